// The lesson's forty subjects and the generator that makes them.
//
// The simulator must reproduce the lesson's Python program number for number,
// so the generator and the order in which it is consumed are copied from it
// exactly: a Park–Miller "minimal standard" step (multiplier 48271, modulus
// 2^31 - 1) reduced modulo n on every draw.
#ifndef POISE_TOOLS_SIM_SUBJECTS_H_
#define POISE_TOOLS_SIM_SUBJECTS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace poise_sim {

// The lesson's seed: the default of --seed.
inline constexpr uint64_t kLessonSeed = 20260812;
// The lesson's subject count: the default of --subjects.
inline constexpr uint32_t kLessonSubjects = 40;

// r(n) of the lesson: state d = seed % 2147483646 + 1, then every draw does
// d = d * 48271 % 2147483647 and returns d % n. d < 2^31 and 48271 < 2^16, so
// the product fits in 64 bits and the arithmetic is exact.
class LessonGenerator final {
 public:
  explicit LessonGenerator(uint64_t seed) : d_(seed % 2147483646 + 1) {}

  uint32_t Draw(uint32_t n) {
    d_ = d_ * 48271 % 2147483647;
    return static_cast<uint32_t>(d_ % n);
  }

 private:
  uint64_t d_;
};

// One subject (backend) of the lesson. Only `capacity` drives distribution
// (assumption TM8); the other fields exist because generating them consumes
// the generator, and skipping them would change every later capacity.
struct Subject {
  uint32_t no = 0;        // 1-based, as in the lesson
  uint32_t capacity = 0;  // 20 + r(81): units it can take without overrun
  uint32_t delay = 0;     // 5 + r(45)
  uint32_t klass = 0;     // r(3): interactive, batch, standby
  bool special = false;   // r(9) == 0

  // The identity the rendezvous rules hash: "subject-07" (two digits, zero
  // padded; three or more digits past 99).
  std::string Identity() const;
};

// `count` subjects drawn in the lesson's order: for each subject capacity,
// delay, class and special, one draw each.
std::vector<Subject> MakeSubjects(uint32_t count, uint64_t seed);

uint64_t TotalCapacity(const std::vector<Subject>& subjects);

}  // namespace poise_sim

#endif  // POISE_TOOLS_SIM_SUBJECTS_H_
