#include "subjects.h"

#include <cstdio>

namespace poise_sim {

std::string Subject::Identity() const {
  char text[32];
  std::snprintf(text, sizeof(text), "subject-%02u", no);
  return text;
}

std::vector<Subject> MakeSubjects(uint32_t count, uint64_t seed) {
  LessonGenerator r(seed);
  std::vector<Subject> subjects;
  subjects.reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    Subject s;
    s.no = i + 1;
    // One statement per draw: the order of the draws is the contract.
    s.capacity = 20 + r.Draw(81);
    s.delay = 5 + r.Draw(45);
    s.klass = r.Draw(3);
    s.special = r.Draw(9) == 0;
    subjects.push_back(s);
  }
  return subjects;
}

uint64_t TotalCapacity(const std::vector<Subject>& subjects) {
  uint64_t total = 0;
  for (const Subject& s : subjects) total += s.capacity;
  return total;
}

}  // namespace poise_sim
