// Bounds of the contract's scores, with their proofs: why, within one weight,
// the largest z is the best member when it is clear of its runner-up; how
// leaders of different weights are compared without the contract logarithm
// (certified brackets from the series of the true logarithm, then a libm
// approximation), and the margin that makes both sound. Private to src/core
// (and its tests); the owner search (owner_search.h) and the room search
// (room_search.h) rest on these facts.
//
// Why the per-weight argmax of z is exact. Within one weight w, score =
// -LnUnit(z) / w and LnUnit depends on z only through s = (z >> 11) + 1.
//  * Equal s: equal LnUnit, equal score, so Rank::Precedes falls through to
//    the larger z, then (same weight) the earlier index: exactly the argmax of
//    z with the earliest index on equal z.
//  * s_max - s > (s_max >> 30), i.e. s/s_max < 1 - 2^-30: the true logarithms
//    differ by ln(s_max/s) >= 1 - s/s_max > 2^-30 ~ 9.3e-10. The computed
//    LnUnit is within eps of ln(s / 2^53), where eps < 3e-14 (series
//    truncation 2 t^27/(27(1-t^2)) <= 1.2e-14 for t <= 1/3, plus a few
//    roundings of values below 37; score_bounds_test measures max |error| =
//    1.4e-14 and asserts < 1e-13). As 2 eps << 2^-30, LnUnit(s) <
//    LnUnit(s_max), so -LnUnit(s)/w >= -LnUnit(s_max)/w (division by the same w
//    is monotone; a tie after rounding is broken by the larger z = s_max's).
//  * Anything in between (0 < s_max - s <= s_max >> 30, probability ~n 2^-30
//    per key) is not argued about: the group is re-ranked exactly.
// The runner-up z of each group tells which case applies: if it is
// separated from the leader, every other member (z <= runner-up) is too.
#ifndef POISE_SRC_CORE_SCORE_BOUNDS_H_
#define POISE_SRC_CORE_SCORE_BOUNDS_H_

#include <cmath>
#include <cstdint>
#include <limits>

namespace poise::internal {

// Comparing the largest z of different weights without the contract
// logarithm.
//
// The contract's score is S = fl(-LnUnit(z) / w), and LnUnit takes ~13
// divisions. Across groups, the owner search first compares the cheap
//   A = fl(fl(k53 - log(s)) / w),   s = (z >> 11) + 1,  k53 = fl(53 ln 2),
// and asks for S only when A cannot separate two contenders. Error budget
// for |A - S| (all quantities below are < 64, so one ulp is <= 2^-47):
//  * libm: |log(s) - ln s| <= 4 ulp(ln s) <= 2^-45. We assume only this
//    (glibc documents < 1 ulp; score_bounds_test measures the whole |A - S|).
//  * k53 is 53 ln 2 correctly rounded: <= 2^-48 (checked in the test).
//  * the subtraction rounds by <= 2^-48.
//    So |fl(k53 - log s) - (-ln(s / 2^53))| <= 2^-45 + 2^-47 < 3.6e-14.
//  * the contract: |LnUnit(z) - ln(s / 2^53)| < 3e-14 (see above; measured
//    1.4e-14 by score_bounds_test, which asserts < 1e-13; with that looser
//    figure E stays below 1.5e-13, still 6x inside the margin).
//  * both divisions by the same w >= 1 shrink the difference and add at
//    most half an ulp each: <= 2 * 2^-48 < 7.2e-15.
// Hence |A - S| <= E := 3.6e-14 + 3e-14 + 7.2e-15 < 7.4e-14 for every z
// and w. BestEstimate() treats a leader as ahead of k only when
// fl(A_lead + 2 kScoreMargin) < A_k; that sum rounds down by at most
// 2^-48, so A_k > A_lead + 2 kScoreMargin - 2^-48, and with
// kScoreMargin = 2^-40 (~9.1e-13) >= E + 2^-49 (more than 10x over):
//   S_lead <= A_lead + E < A_k - E <= S_k,
// a strict inequality of the contract scores, which is exactly what
// Rank::Precedes decides first. Everything not separated this way gets
// its exact S and the full order (score, larger z, larger weight, earlier
// index). A larger margin is sound too (tests use one to force the
// fallback on real keys); a smaller one is not.
inline constexpr double kScoreMargin = 0x1p-40;
inline constexpr double k53Ln2 = 36.736800569677101399;  // 53 ln 2

// A, the approximate score of z at weight w (see above).
inline double ApproxScore(uint64_t z, uint32_t weight) {
  const uint64_t s = (z >> 11) + 1;  // exact as a double: s <= 2^53
  return (k53Ln2 - std::log(static_cast<double>(s))) /
         static_cast<double>(weight);
}

// Before any logarithm, BestEstimate() tries bounds from the series of the true
// logarithm. With s as above, u = s / 2^53 and x = 1 - u, both exact in
// double (x = (2^53 - s) 2^-53), and -ln u = sum over k >= 1 of x^k / k, so
//   lo = x + x^2/2 + x^3/3 + x^4/4  <=  -ln u  <=  lo + x^5 / (5 u) = hi,
// taken for u >= 1/8 (beyond, hi is +inf); for u >= 1/2 the tail bound
// 0.4 x^5 >= x^5 / (5 u) serves without a division. A leader's x is small
// (about 1 / the members of its weight), so its bounds are tight:
// (hi - lo) / lo < 1e-4 for x < 0.1; a lone member's x is uniform, hence
// the division rather than one constant bound of the tail. Error budget, as
// for A:
//  * evaluating lo and hi in double (u and 5 u need no rounding but one):
//    a relative error below 8 * 2^-53 of values below 3.7, < 3.3e-15;
//  * the contract: |S - (-ln u) / w| < 3e-14 / w + 2^-48 (its logarithm's
//    error, then the rounding of its division);
//  * multiplying lo and hi by fl(1/w) adds a relative error below 2^-52,
//    < 8.3e-16 of values below 3.7.
// So S lies in [lo/w - E, hi/w + E] with E < 7.4e-14 as above, and the
// same rule certifies: fl(hi_lead/w + 2 kScoreMargin) < lo_k/w implies
// S_lead < S_k. These bounds take no call and no table, unlike log().
struct Bracket {
  double lo;
  double hi;  // +inf when u < 1/8
};

inline Bracket ScoreBracket(uint64_t z, uint32_t weight) {
  const uint64_t s = (z >> 11) + 1;
  const double inv_w = 1.0 / static_cast<double>(weight);  // off the chain
  const double x = static_cast<double>((uint64_t{1} << 53) - s) * 0x1p-53;
  const double x2 = x * x;
  const double lo = x + x2 * (0.5 + x * (1.0 / 3 + x * 0.25));
  const double x5 = x2 * x2 * x;
  double hi = std::numeric_limits<double>::infinity();
  if (s >= (uint64_t{1} << 52)) {
    hi = lo + 0.4 * x5;
  } else if (s >= (uint64_t{1} << 50)) {
    hi = lo + x5 / (5 * (static_cast<double>(s) * 0x1p-53));
  }
  return Bracket{lo * inv_w, hi * inv_w};
}

// The certification rule (see above): a's contract score is strictly below
// b's when a's upper bound plus 2 * margin is below b's lower bound.
inline bool CertifiedAhead(const Bracket& a, const Bracket& b, double margin) {
  return a.hi + 2 * margin < b.lo;
}

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_SCORE_BOUNDS_H_
