// poise::Bound, the one statement of the bounded-load rule: against the
// contract's exact 128-bit formula at its edges, and every decision path of
// the core against it on random inputs.
#include "poise/bound.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "poise/identity_table.h"
#include "poise/rendezvous.h"
#include "src/core/contract.h"
#include "src/core/prepared_candidates.h"
#include "test/core/test_util.h"

namespace poise {
namespace {

// Bound's capacity and its room test against the contract's 128-bit
// formula, around the edges where its shortcuts hand over: L + 1 near 2^32
// and near 2^64, and W near 2^64 / 100 (where 100 W stops fitting in 64
// bits) and past 2^32. (Was test/core/capacity_test.cc.)
TEST(Capacity, CapacityShortcutEqualsWideFormula) {
  std::mt19937_64 rng(31);
  size_t past_64_bits = 0, wide_weights = 0;
  for (int i = 0; i < 1000000; ++i) {
    const auto f =
        static_cast<uint32_t>(100 + rng() % (i % 2 ? 200 : 1u << 31));
    const uint64_t load = i % 5 == 4 ? UINT64_MAX - 1 - rng() % 1000
                                     : (uint64_t{UINT32_MAX} - 2 + rng() % 5) *
                                           (i % 3 == 0 ? 1 : rng() % 3);
    uint64_t total_weight = 0;
    switch (i % 4) {
      case 0:
        total_weight = 1 + rng() % UINT32_MAX;
        break;
      case 1:
        total_weight = UINT64_MAX / 100 - 2 + rng() % 5;
        break;
      case 2:
        total_weight = 1 + (rng() >> (rng() % 64));
        break;
      default:
        total_weight = uint64_t{UINT32_MAX} + rng() % 1000;
        break;
    }
    const auto weight = static_cast<uint32_t>(
        1 + rng() % std::min<uint64_t>(total_weight, UINT32_MAX));
    const UInt128 expected = contract::Capacity(f, load, weight, total_weight);
    past_64_bits += expected > UINT64_MAX;
    wide_weights += total_weight > UINT64_MAX / 100;
    const Bound bound(f, load, weight, total_weight);
    ASSERT_TRUE(bound.Capacity() == expected) << i;
    ASSERT_TRUE(BoundedLoadRendezvous::Capacity(f, load, weight,
                                                total_weight) == expected);
    const uint64_t near = expected > UINT64_MAX
                              ? UINT64_MAX - rng() % 3
                              : static_cast<uint64_t>(expected) - 1;
    for (const uint64_t probe : {near, near + 1, near + 2, uint64_t{0}}) {
      ASSERT_EQ(bound.HasRoom(probe), UInt128{probe} < expected) << i;
    }
  }
  EXPECT_GT(past_64_bits, 1000u);
  EXPECT_GT(wide_weights, 50000u);
}

TEST(Bound, Edges) {
  constexpr uint64_t kMaxLoad = UINT64_MAX - 1;  // L + 1 = 2^64 - 1 fits
  // The largest numerator: f, L + 1 and w all at their maxima.
  const Bound largest(UINT32_MAX, kMaxLoad, UINT32_MAX, 1);
  EXPECT_TRUE(largest.Capacity() ==
              contract::Capacity(UINT32_MAX, kMaxLoad, UINT32_MAX, 1));
  EXPECT_TRUE(largest.HasRoom(UINT64_MAX));
  // Huge weights: W = 2^64 - 1, so 100 W does not fit in 64 bits.
  const Bound heavy(150, kMaxLoad, UINT32_MAX, UINT64_MAX);
  EXPECT_TRUE(heavy.Capacity() ==
              contract::Capacity(150, kMaxLoad, UINT32_MAX, UINT64_MAX));
  const auto c = static_cast<uint64_t>(heavy.Capacity());
  EXPECT_TRUE(heavy.HasRoom(c - 1));
  EXPECT_FALSE(heavy.HasRoom(c));
  // f = 100 is exactly proportional: 10 calls (L = 9) over weights 3 of 10
  // give the weight-3 backend 3 calls, and ceil() rounds a share up.
  EXPECT_TRUE(Bound(100, 9, 3, 10).Capacity() == 3);
  EXPECT_FALSE(Bound(100, 9, 3, 10).HasRoom(3));
  EXPECT_TRUE(Bound(100, 9, 3, 10).HasRoom(2));
  EXPECT_TRUE(Bound(100, 10, 3, 10).Capacity() == 4);  // 3.3 -> 4
  // Idle: every bound is at least 1, so an idle backend has room.
  EXPECT_TRUE(Bound(100, 0, 1, UINT64_MAX).HasRoom(0));
  EXPECT_FALSE(Bound(100, 0, 1, UINT64_MAX).HasRoom(1));
  // A default Bound admits nothing.
  EXPECT_FALSE(Bound().HasRoom(0));
  EXPECT_TRUE(Bound().Capacity() == 0);
}

// The first candidate in the key's order (the contract's K5) whose load has
// room under Bound for T, among `b`; the index, or -1 when none has.
int FirstWithRoomByBound(const std::string& key,
                         const std::vector<contract::LoadedCandidate>& b,
                         uint32_t f, uint64_t total_load) {
  uint64_t total_weight = 0;
  for (const auto& x : b) total_weight += x.eligible ? x.weight : 0;
  for (const contract::Ranked& r : contract::Order(key, b)) {
    if (Bound(f, total_load, r.weight, total_weight).HasRoom(b[r.index].load)) {
      return static_cast<int>(r.index);
    }
  }
  return -1;
}

// Every path that decides a bounded route (the general search, the one- and
// two-weight short paths and the walk along the key's order, the k-th
// choice for n = 0) selects the first candidate that Bound gives room.
class BoundAgreement : public test_util::KernelFixture {};
INSTANTIATE_TEST_SUITE_P(Bound, BoundAgreement, test_util::Kernels(),
                         test_util::KernelName);

TEST_P(BoundAgreement, EveryPathSelectsTheFirstCandidateWithRoom) {
  std::mt19937_64 rng(2025);
  DecisionScratch scratch;
  size_t paths[3] = {0, 0, 0}, spills = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const size_t n = 1 + rng() % (trial % 3 == 0 ? 300 : 12);
    const auto shape = static_cast<uint32_t>(trial % 3);  // 1, 2, 3+ weights
    std::vector<contract::LoadedCandidate> b;
    uint64_t sum = 0;
    for (size_t i = 0; i < n; ++i) {
      const auto w =
          static_cast<uint32_t>(shape == 0 ? 3 : 1 + rng() % (shape + 1));
      const uint64_t load = rng() % 4 == 0 ? 0 : rng() % 9;
      const bool eligible = rng() % 8 != 0;
      b.push_back({"b" + std::to_string(i), w, load, eligible});
      sum += eligible ? load : 0;
    }
    const auto f = static_cast<uint32_t>(100 + rng() % 120);
    const std::string key = "key-" + std::to_string(trial);
    const std::vector<Candidate> view = test_util::View(b);
    const PreparedCandidates prepared(
        view, std::make_shared<const IdentityTable>(view));
    const auto policy = *BoundedLoadRendezvous::Create(f);
    const auto load = [&](size_t i) { return b[i].load; };
    for (const uint64_t total : {sum, sum + rng() % 40}) {
      const int want = FirstWithRoomByBound(key, b, f, total);
      if (want < 0) continue;  // no eligible candidate
      ++paths[static_cast<int>(prepared.path())];
      const auto routed =
          prepared.RouteWithTotal(policy, key, total, load, scratch);
      ASSERT_TRUE(routed.ok()) << trial;
      ASSERT_EQ(routed.value().selection, static_cast<size_t>(want)) << trial;
      spills += routed.value().spilled;
      if (total != sum) continue;  // Decide's L is the loads' sum
      const auto decided = policy.Decide(key, view, load, scratch);
      ASSERT_EQ(decided.value().selection, static_cast<size_t>(want));
      const auto nth =
          policy.DecideNth(key, view, prepared.table(), load, 0, scratch);
      ASSERT_EQ(nth.value().selection, static_cast<size_t>(want));
    }
  }
  // Every path ran, and so did the walk past a full owner.
  for (const size_t count : paths) EXPECT_GT(count, 500u);
  EXPECT_GT(spills, 500u);
}

}  // namespace
}  // namespace poise
