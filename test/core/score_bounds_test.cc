// The numeric facts the fast paths rest on (src/core/score_bounds.h): the
// contract logarithm's error, which backs the separation lemma (within one
// weight the largest z wins when clear of its runner-up), the lemma at its
// edge, and the two cross-weight estimates (the libm approximation and the
// certified brackets) well inside the certification margin.
#include "src/core/score_bounds.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>

#include "poise/hash.h"
#include "poise/rendezvous.h"
#include "src/core/hash_and_group.h"

namespace poise {
namespace {

constexpr uint64_t kTwo53 = uint64_t{1} << 53;

// LnUnit as a function of s = (z >> 11) + 1, 1 <= s <= 2^53.
double LnOfS(uint64_t s) { return LnUnit((s - 1) << 11); }

// |LnUnit - ln(s / 2^53)| with an 80-bit long double logarithm.
double ErrorAt(uint64_t s) {
  const long double exact = std::log(static_cast<long double>(s)) -
                            53 * std::log(static_cast<long double>(2));
  return static_cast<double>(
      std::fabs(static_cast<long double>(LnOfS(s)) - exact));
}

// The shortcut's lemma needs 2 * max error < 2^-30; the analysis in
// score_bounds.h bounds it by 3e-14. Measured here over every binade boundary
// neighbourhood and millions of random s.
TEST(ScoreBounds, LnUnitErrorBoundBacksTheSeparationMargin) {
  double worst = 0;
  for (int e = 0; e <= 53; ++e) {
    const uint64_t edge = uint64_t{1} << e;
    for (uint64_t d = 0; d < 4096; ++d) {
      if (edge > d) worst = std::max(worst, ErrorAt(edge - d));
      if (edge + d <= kTwo53) worst = std::max(worst, ErrorAt(edge + d));
    }
  }
  std::mt19937_64 rng(5);
  for (int i = 0; i < 3000000; ++i) {
    const uint64_t s = (rng() >> (11 + rng() % 53)) + 1;
    worst = std::max(worst, ErrorAt(s));
  }
  EXPECT_LT(worst, 1e-13);
  EXPECT_LT(2 * worst, std::ldexp(1.0, -30) / 1000);  // a 1000x margin
}

// Monotonicity in s, checked on adjacent pairs: exhaustively within 20000 of
// every binade boundary and on millions of random pairs. The shortcut does
// not rely on it (it re-ranks near ties exactly), but it documents that the
// computed logarithm behaves.
TEST(ScoreBounds, LnUnitIsNonDecreasingOnAdjacentS) {
  for (int e = 1; e <= 53; ++e) {
    const uint64_t edge = uint64_t{1} << e;
    for (uint64_t s = edge > 20000 ? edge - 20000 : 1;
         s < std::min(edge + 20000, kTwo53); ++s) {
      ASSERT_LE(LnOfS(s), LnOfS(s + 1)) << s;
    }
  }
  std::mt19937_64 rng(6);
  for (int i = 0; i < 2000000; ++i) {
    const uint64_t s = (rng() >> (11 + rng() % 53)) % (kTwo53 - 1) + 1;
    ASSERT_LE(LnOfS(s), LnOfS(s + 1)) << s;
  }
}

// The lemma itself at its edge: the closest separated s never outscores the
// leader at any weight.
TEST(ScoreBounds, SeparatedHashesRankAfterTheLeader) {
  std::mt19937_64 rng(8);
  for (int i = 0; i < 1000000; ++i) {
    const uint64_t z_max = rng() >> (rng() % 53);
    const uint64_t s_max = (z_max >> 11) + 1;
    const uint64_t gap = (s_max >> 30) + 1 + rng() % 3;
    if (gap >= s_max) continue;
    const uint64_t z = ((s_max - gap - 1) << 11) | (rng() & 0x7ff);
    ASSERT_TRUE(internal::Separated(z_max, z));
    const uint32_t w = 1 + static_cast<uint32_t>(rng() % 1000);
    const Rank leader{Score(z_max, w), z_max, w, 1};
    const Rank other{Score(z, w), z, w, 0};
    ASSERT_TRUE(leader.Precedes(other)) << z_max << " " << z;
  }
}

// The cross-weight comparison's margin (score_bounds.h): the approximate score
// must stay within kScoreMargin of the contract's Score for every z and
// weight. Measured over every binade's edges and millions of random s (all
// binades), at weights 1..2^32-1; asserted with a 10x margin.
TEST(ScoreBounds, ApproxScoreErrorIsWellInsideTheMargin) {
  const long double ln2 = std::log(static_cast<long double>(2));
  EXPECT_LE(std::fabs(static_cast<long double>(internal::k53Ln2) - 53 * ln2),
            std::ldexp(1.0L, -48));
  double worst = 0;
  auto check = [&](uint64_t s, uint32_t w) {
    const uint64_t z = (s - 1) << 11;
    worst =
        std::max(worst, std::fabs(internal::ApproxScore(z, w) - Score(z, w)));
  };
  for (int e = 0; e <= 53; ++e) {
    const uint64_t edge = uint64_t{1} << e;
    for (uint64_t d = 0; d < 2048; ++d) {
      if (edge > d) check(edge - d, 1);
      if (edge + d <= kTwo53) check(edge + d, 1);
    }
  }
  std::mt19937_64 rng(41);
  for (int i = 0; i < 4000000; ++i) {
    const uint64_t s = (rng() >> (11 + rng() % 53)) + 1;
    const auto w = static_cast<uint32_t>(
        i % 4 == 0 ? 1 : 1 + rng() % (uint64_t{1} << (1 + rng() % 32)));
    check(s, w);
  }
  // The measure is real (libm and the series differ in their last bits)
  // and well inside the margin.
  EXPECT_GT(worst, 0.0);
  EXPECT_LT(worst, internal::kScoreMargin / 10);
}

// The brackets BestEstimate() tries first (score_bounds.h): the contract's
// Score must lie within [lo - E, hi + E] for an E well inside the margin, for
// every z and weight, and the bounds must be tight where leaders live
// (small x) and finite down to u = 1/8.
TEST(ScoreBounds, ScoreBracketHoldsTheContractScore) {
  double worst = 0;  // how far outside its bracket a score fell
  double widest_small_x = 0;
  auto check = [&](uint64_t s, uint32_t w) {
    const uint64_t z = (s - 1) << 11;
    const internal::Bracket b = internal::ScoreBracket(z, w);
    const double score = Score(z, w);
    ASSERT_LE(b.lo, b.hi) << s << " " << w;
    worst = std::max({worst, b.lo - score, score - b.hi});
    const bool u_at_least_an_eighth = s >= (kTwo53 >> 3);
    ASSERT_EQ(std::isfinite(b.hi), u_at_least_an_eighth) << s;
    if (s >= kTwo53 - kTwo53 / 10 && s < kTwo53) {  // 0 < x <= 0.1
      widest_small_x = std::max(widest_small_x, (b.hi - b.lo) / b.lo);
    }
  };
  for (int e = 0; e <= 53; ++e) {
    const uint64_t edge = uint64_t{1} << e;
    for (uint64_t d = 0; d < 2048; ++d) {
      if (edge > d) check(edge - d, 1);
      if (edge + d <= kTwo53) check(edge + d, 1);
    }
  }
  // Around u = 1/8 and u = 1/2, where the bounds change form or widen.
  for (const uint64_t mid : {kTwo53 >> 3, kTwo53 >> 1}) {
    for (uint64_t d = 0; d < 4096; ++d) check(mid - 2048 + d, 3);
  }
  std::mt19937_64 rng(43);
  for (int i = 0; i < 4000000; ++i) {
    // Half the draws near u = 1 (x uniform below 2^-k), like leaders.
    const uint64_t s = i % 2 == 0 ? kTwo53 - (rng() >> (11 + rng() % 53))
                                  : (rng() >> (11 + rng() % 53)) + 1;
    const auto w = static_cast<uint32_t>(
        i % 4 == 0 ? 1 : 1 + rng() % (uint64_t{1} << (1 + rng() % 32)));
    check(std::max<uint64_t>(s, 1), w);
  }
  EXPECT_GT(widest_small_x, 0.0);  // the brackets are not degenerate
  EXPECT_LT(worst, internal::kScoreMargin / 10);
  EXPECT_LT(widest_small_x, 1e-4);
}

}  // namespace
}  // namespace poise
