// The largest z of a stream of candidates and the facts that make it the
// best member of its weight: within one weight the contract's order is the
// order of z wherever the largest z is separated from the runner-up
// (score_bounds.h proves it). Every decision path keeps its leaders in a
// LargestZ. Private to src/core (and its tests).
#ifndef POISE_SRC_CORE_LARGEST_Z_H_
#define POISE_SRC_CORE_LARGEST_Z_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace poise::internal {

inline constexpr size_t kNone = static_cast<size_t>(-1);

// The largest z of a stream offered in index order, its index (the first
// index wins equal z), the largest z among the others (the runner-up) and how
// many entries were taken. Trivially constructible so that the group table
// costs nothing until used: start from LargestZ::Empty().
struct LargestZ {
  uint64_t z;
  uint64_t runner_up;
  size_t index;
  size_t count;  // entries offered with take == true

  static LargestZ Empty() { return LargestZ{0, 0, kNone, 0}; }

  // Offers (candidate_z, i) if `take`. Bitwise logic on purpose: `take` is
  // data-dependent (has the backend room?) and would mispredict as a branch;
  // a new leader is rare (about ln n times per pass), so that branch is cheap.
  // A refused entry is offered as z = 0, which never leads (strictly larger
  // z is needed) and cannot raise the runner-up. Neither can a taken z = 0
  // lead: if every taken z is 0, index stays kNone with count > 0, and the
  // owner search re-ranks that group exactly.
  void Offer(uint64_t candidate_z, size_t i, bool take = true) {
    count += take;
    const uint64_t zt = take ? candidate_z : uint64_t{0};
    if (zt > z) {
      runner_up = z;  // the old leader was >= every earlier z
      z = zt;
      index = i;
      return;
    }
    runner_up = std::max(runner_up, zt);
  }
};

// True when every z' <= z_other provably ranks after z_max at equal weight
// (src/core/score_bounds.h has the argument).
inline bool Separated(uint64_t z_max, uint64_t z_other) {
  const uint64_t s_max = (z_max >> 11) + 1;
  const uint64_t s = (z_other >> 11) + 1;
  return s_max - s > (s_max >> 30);
}

// Whether a weight group's largest z is its best member by the contract's
// order with no logarithm: it exists and no other member's z comes near it.
inline bool ClearOfRunnerUp(const LargestZ& l) {
  return l.index != kNone && (l.count <= 1 || Separated(l.z, l.runner_up));
}

// The survivor threshold: about `quota` of n uniformly distributed z reach
// it; 0 (everyone survives) for short lists. A room search lists the
// survivors first: the best candidate with room is usually among them.
inline constexpr size_t kSurvivorQuota = 8;
inline uint64_t SurvivorThreshold(size_t n, size_t quota) {
  if (n <= 2 * quota) return 0;
  return UINT64_MAX - (UINT64_MAX / n) * quota;
}

// A leader offered only the survivors of `threshold` (> 0): the members not
// listed have z < threshold, so its runner-up is bounded by threshold - 1.
inline void BoundUnlisted(LargestZ& l, uint64_t threshold) {
  l.count = std::max<size_t>(l.count, 2);
  l.runner_up = std::max(l.runner_up, threshold - 1);
}

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_LARGEST_Z_H_
