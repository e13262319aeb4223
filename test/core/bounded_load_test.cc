#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>

#include "poise/identity_table.h"
#include "poise/rendezvous.h"
#include "src/core/contract.h"
#include "src/core/prepared_candidates.h"
#include "test_util.h"

namespace poise {
namespace {

using test_util::Backends;
using test_util::View;

Result<Decision> DecideWith(
    uint32_t factor, std::string_view key,
    const std::vector<contract::LoadedCandidate>& backends,
    DecisionScratch& scratch) {
  return BoundedLoadRendezvous::Create(factor)->Decide(
      key, View(backends), [&](size_t i) { return backends[i].load; }, scratch);
}

TEST(BoundedLoad, FactorBelowOneHundredIsRejected) {
  EXPECT_FALSE(BoundedLoadRendezvous::Create(99).has_value());
  EXPECT_FALSE(BoundedLoadRendezvous::Create(0).has_value());
  EXPECT_EQ(BoundedLoadRendezvous::Create(100)->factor_percent(), 100u);
  EXPECT_EQ(BoundedLoadRendezvous().factor_percent(), 150u);
}

TEST(BoundedLoad, CapacityIsAnExactCeiling) {
  EXPECT_EQ(BoundedLoadRendezvous::Capacity(150, 0, 1, 3), 1u);    // 150/300
  EXPECT_EQ(BoundedLoadRendezvous::Capacity(100, 9, 1, 10), 1u);   // 1000/1000
  EXPECT_EQ(BoundedLoadRendezvous::Capacity(100, 10, 1, 10), 2u);  // 1100/1000
  EXPECT_EQ(BoundedLoadRendezvous::Capacity(125, 39, 6, 10), 30u);
  // Largest inputs: exact 128-bit results, as poise-core reports them.
  // f (L + 1) w / (100 W) = (2^32 - 1)(2^64 - 1)(2^32 - 1) / (100 (2^32 - 1)).
  const UInt128 two64 = UInt128{1} << 64;
  EXPECT_TRUE(BoundedLoadRendezvous::Capacity(UINT32_MAX, UINT64_MAX - 1,
                                              UINT32_MAX, UINT32_MAX) ==
              (UInt128{UINT32_MAX} * (two64 - 1) + 99) / 100);
  EXPECT_TRUE(BoundedLoadRendezvous::Capacity(100, UINT64_MAX - 1, 1, 1) ==
              two64 - 1);
  // A weight sum past 2^32 - 1, and 100 W past 2^64.
  EXPECT_TRUE(BoundedLoadRendezvous::Capacity(100, 1, 1u << 31,
                                              uint64_t{1} << 32) == 1);
  EXPECT_TRUE(BoundedLoadRendezvous::Capacity(100, 0, 1, UINT64_MAX) == 1);
  EXPECT_TRUE(
      BoundedLoadRendezvous::Capacity(UINT32_MAX, UINT64_MAX - 1, UINT32_MAX,
                                      UINT64_MAX) ==
      contract::Capacity(UINT32_MAX, UINT64_MAX - 1, UINT32_MAX, UINT64_MAX));
}

// The two edges where poise-core and this core once disagreed, as
// poise-explain shows them (test/CMakeLists.txt): eligible weights summing
// past 2^32 - 1, and a capacity past 2^64 - 1.
TEST(BoundedLoad, AgreesWithPoiseCoreAtTheEdges) {
  DecisionScratch scratch;
  // W = 2^32; L + 1 = 4: capacity ceil(100 * 4 * 2^31 / (100 * 2^32)) = 2.
  // "k0" has a as its owner (either may own a key at equal weights), and a
  // is full (3 >= 2), so the request spills to b.
  auto heavy = Backends({1u << 31, 1u << 31}, "");
  heavy[0].identity = "a";
  heavy[0].load = 3;
  heavy[1].identity = "b";
  const auto spill = DecideWith(100, "k0", heavy, scratch);
  ASSERT_TRUE(spill.ok());
  EXPECT_EQ(spill.value().affinity, 0u);
  EXPECT_EQ(spill.value().selection, 1u);
  EXPECT_TRUE(spill.value().selected_capacity == 2);
  // One backend of weight 1, L = 10^12, f = 2^32 - 1: the capacity is
  // (2^32 - 1)(10^12 + 1) / 100 rounded up = 42949672950042949673 > 2^64.
  auto lone = Backends({1}, "a");
  lone[0].load = 1000000000000;
  const auto wide = DecideWith(UINT32_MAX, "k", lone, scratch);
  ASSERT_TRUE(wide.ok());
  const UInt128 expected =
      UInt128{4294967295ULL} * 10000000000ULL + 42949673ULL;  // as decimal
  EXPECT_TRUE(wide.value().selected_capacity == expected);
  EXPECT_TRUE(wide.value().selected_capacity > UINT64_MAX);
}

// poise-core's order of checks: no candidates, none eligible, the scratch,
// then per eligible candidate in index order its load and weight sums, then
// L + 1.
TEST(BoundedLoad, ErrorsComeInPoiseCoresOrder) {
  DecisionScratch none(0);  // cannot hold a single candidate
  EXPECT_EQ(DecideWith(150, "k", {}, none).error(), PickError::kEmpty);
  auto ineligible = Backends({1, 2}, "b");
  for (auto& b : ineligible) b.eligible = false;
  EXPECT_EQ(DecideWith(150, "k", ineligible, none).error(),
            PickError::kNoEligibleCandidates);
  auto overflowing = Backends({1, 1}, "b");
  overflowing[0].load = UINT64_MAX;
  overflowing[1].load = 1;
  EXPECT_EQ(DecideWith(150, "k", overflowing, none).error(),
            PickError::kScratchCapacityExceeded);
  DecisionScratch scratch;
  EXPECT_EQ(DecideWith(150, "k", overflowing, scratch).error(),
            PickError::kLoadOverflow);
  // The contract states the same order (it has no scratch).
  EXPECT_EQ(contract::Decide("k", {}, 150).error(), PickError::kEmpty);
  EXPECT_EQ(contract::Decide("k", ineligible, 150).error(),
            PickError::kNoEligibleCandidates);
  EXPECT_EQ(contract::Decide("k", overflowing, 150).error(),
            PickError::kLoadOverflow);
  // Weights past 2^32 - 1 are no error at all (a 64-bit sum of 32-bit
  // weights wraps only past 2^32 candidates).
  auto heavy = Backends({UINT32_MAX, UINT32_MAX, UINT32_MAX}, "b");
  heavy[1].load = UINT64_MAX - 1;  // L + 1 = 2^64 - 1: still fine
  EXPECT_TRUE(DecideWith(150, "k", heavy, scratch).ok());
  EXPECT_TRUE(contract::Decide("k", heavy, 150).ok());
  heavy[2].load = 1;  // L = 2^64 - 1: L + 1 wraps
  EXPECT_EQ(DecideWith(150, "k", heavy, scratch).error(),
            PickError::kLoadOverflow);
  EXPECT_EQ(contract::Decide("k", heavy, 150).error(),
            PickError::kLoadOverflow);
  EXPECT_STREQ(ToString(PickError::kWeightOverflow),
               "eligible weights sum past 2^64-1");
}

TEST(BoundedLoad, Errors) {
  DecisionScratch scratch;
  EXPECT_EQ(DecideWith(150, "k", {}, scratch).error(), PickError::kEmpty);

  auto none = Backends({1, 2}, "b");
  for (auto& b : none) b.eligible = false;
  EXPECT_EQ(DecideWith(150, "k", none, scratch).error(),
            PickError::kNoEligibleCandidates);

  // Weights sum in 64 bits, as in poise-core: past 2^32 - 1 is fine.
  auto heavy = Backends({UINT32_MAX, 1}, "b");
  EXPECT_TRUE(DecideWith(150, "k", heavy, scratch).ok());
  heavy[1].eligible = false;
  EXPECT_TRUE(DecideWith(150, "k", heavy, scratch).ok());

  auto loaded = Backends({1, 1}, "b");
  loaded[0].load = UINT64_MAX;
  loaded[1].load = 1;
  EXPECT_EQ(DecideWith(150, "k", loaded, scratch).error(),
            PickError::kLoadOverflow);
  loaded[1].load = 0;  // L = 2^64-1: L + 1 overflows
  EXPECT_EQ(DecideWith(150, "k", loaded, scratch).error(),
            PickError::kLoadOverflow);
  loaded[0].load = UINT64_MAX - 1;
  EXPECT_TRUE(DecideWith(150, "k", loaded, scratch).ok());

  DecisionScratch small(2);
  EXPECT_TRUE(DecideWith(150, "k", Backends({1, 1}, "b"), small).ok());
  EXPECT_EQ(DecideWith(150, "k", Backends({1, 1, 1}, "b"), small).error(),
            PickError::kScratchCapacityExceeded);
}

TEST(BoundedLoad, EachEligibleLoadIsSampledExactlyOnce) {
  auto b = Backends({1, 2, 3, 4}, "b");
  b[2].eligible = false;
  std::vector<int> samples(b.size());
  DecisionScratch scratch;
  const auto d = BoundedLoadRendezvous().Decide(
      "k", View(b),
      [&](size_t i) {
        ++samples[i];
        return uint64_t{5};
      },
      scratch);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(samples, (std::vector<int>{1, 1, 0, 1}));
}

TEST(BoundedLoad, IdleDecisionEqualsWeightedRendezvous) {
  auto b = Backends({1, 5, 2, 8, 3}, "b");
  DecisionScratch scratch;
  for (uint32_t factor : {100u, 125u, 150u, 1000u}) {
    for (int k = 0; k < 20000; ++k) {
      const std::string key = "idle" + std::to_string(k);
      const auto d = DecideWith(factor, key, b, scratch);
      ASSERT_TRUE(d.ok());
      const size_t owner = WeightedRendezvous::Pick(key, View(b)).value();
      ASSERT_EQ(d.value().affinity, owner);
      ASSERT_EQ(d.value().selection, owner);
      ASSERT_FALSE(d.value().spilled);
    }
  }
}

TEST(BoundedLoad, MatchesReferenceUnderRandomLoads) {
  std::mt19937_64 rng(99);
  DecisionScratch scratch;
  for (int trial = 0; trial < 100000; ++trial) {
    std::vector<contract::LoadedCandidate> b;
    const size_t n = 1 + rng() % 9;
    for (size_t i = 0; i < n; ++i) {
      b.push_back({"n" + std::to_string(rng() % 12),
                   static_cast<uint32_t>(1 + rng() % 6), rng() % 8,
                   rng() % 6 != 0});
    }
    const uint32_t factor = 100 + static_cast<uint32_t>(rng() % 120);
    const std::string key = std::to_string(trial);
    const auto expected = contract::Decide(key, b, factor);
    const auto got = DecideWith(factor, key, b, scratch);
    ASSERT_EQ(got.ok(), expected.ok());
    if (!got.ok()) {
      ASSERT_EQ(got.error(), expected.error()) << trial;
      continue;
    }
    ASSERT_EQ(got.value().affinity, expected.value().affinity) << trial;
    ASSERT_EQ(got.value().selection, expected.value().selection) << trial;
    ASSERT_EQ(got.value().selected_capacity, expected.value().selected_capacity)
        << trial;
    ASSERT_EQ(got.value().selected_load, b[expected.value().selection].load);
    ASSERT_EQ(got.value().spilled,
              expected.value().affinity != expected.value().selection);
  }
}

// The same at the edges of the range: weights near 2^32 (their sums pass
// 2^32 - 1), loads near 2^64 (sums that overflow, or capacities past
// 2^64 - 1), factors up to 2^32 - 1; through Decide, Decide with a table
// and PreparedCandidates (one, two or more weights), errors included.
TEST(BoundedLoad, MatchesTheContractPast32BitWeightsAnd64BitCapacities) {
  std::mt19937_64 rng(100);
  DecisionScratch scratch;
  size_t weights_past_32 = 0, capacities_past_64 = 0, overflows = 0;
  for (int trial = 0; trial < 30000; ++trial) {
    std::vector<contract::LoadedCandidate> b;
    const size_t n = 1 + rng() % 9;
    const uint64_t shape = rng() % 3;  // one weight, two, any
    const auto heavy = [&] {
      return static_cast<uint32_t>(rng() % 2 ? UINT32_MAX - rng() % 4
                                             : 1 + rng() % UINT32_MAX);
    };
    const uint32_t w0 = heavy(), w1 = heavy();
    for (size_t i = 0; i < n; ++i) {
      const uint32_t w = shape == 0   ? w0
                         : shape == 1 ? (rng() % 2 ? w0 : w1)
                                      : heavy();
      const uint64_t load =
          rng() % 4 == 0 ? UINT64_MAX / (1 + rng() % n) - rng() % 3 : rng() % 8;
      b.push_back({"e" + std::to_string(rng() % 12), w, load, rng() % 6 != 0});
    }
    const auto factor = static_cast<uint32_t>(
        rng() % 2 ? 100 + rng() % 200 : UINT32_MAX - rng() % (1u << 31));
    const std::string key = "edge-" + std::to_string(trial);
    const auto expected = contract::Decide(key, b, factor);
    const std::vector<Candidate> view = View(b);
    const IdentityTable table(view);
    const PreparedCandidates prepared(
        view, std::make_shared<const IdentityTable>(view));
    const auto policy = *BoundedLoadRendezvous::Create(factor);
    const auto load = [&](size_t i) { return b[i].load; };
    uint64_t total_weight = 0;
    for (const auto& x : b) total_weight += x.eligible ? x.weight : 0;
    weights_past_32 += total_weight > UINT32_MAX;
    overflows += !expected.ok();
    if (expected.ok()) {
      capacities_past_64 += expected.value().selected_capacity > UINT64_MAX;
    }
    for (const auto& got : {policy.Decide(key, view, load, scratch),
                            policy.Decide(key, view, table, load, scratch)}) {
      ASSERT_EQ(got.ok(), expected.ok()) << trial;
      if (!got.ok()) {
        ASSERT_EQ(got.error(), expected.error()) << trial;
        continue;
      }
      ASSERT_EQ(got.value().affinity, expected.value().affinity) << trial;
      ASSERT_EQ(got.value().selection, expected.value().selection) << trial;
      ASSERT_EQ(got.value().selected_load, expected.value().selected_load);
      ASSERT_TRUE(got.value().selected_capacity ==
                  expected.value().selected_capacity)
          << trial;
    }
    if (expected.ok()) {  // the loads' sum fits: the route given it
      uint64_t total_load = 0;
      for (const auto& x : b) total_load += x.eligible ? x.load : 0;
      const auto routed =
          prepared.RouteWithTotal(policy, key, total_load, load, scratch);
      ASSERT_TRUE(routed.ok());
      ASSERT_EQ(routed.value().affinity, expected.value().affinity);
      ASSERT_EQ(routed.value().selection, expected.value().selection);
    }
  }
  EXPECT_GT(weights_past_32, 10000u);
  EXPECT_GT(capacities_past_64, 1000u);
  EXPECT_GT(overflows, 1000u);
}

// Requests arrive and never finish; every placement must respect the bound
// computed from the loads it saw.
TEST(BoundedLoad, ClosedLoopNeverExceedsCapacity) {
  const std::vector<std::vector<uint32_t>> weight_sets = {
      {1, 1, 1, 1}, {1, 3, 6}, {5, 1, 1, 1, 1, 2}, {100, 1}};
  DecisionScratch scratch;
  for (const auto& weights : weight_sets) {
    for (uint32_t factor : {100u, 125u, 150u, 200u}) {
      std::vector<contract::LoadedCandidate> b;
      b.reserve(weights.size());
      for (uint32_t w : weights) {
        b.push_back({"s" + std::to_string(b.size()), w});
      }
      std::mt19937 rng(factor);
      for (int request = 0; request < 3000; ++request) {
        // Half the traffic is one hot key.
        const std::string key =
            rng() % 2 ? "hot" : "cold-" + std::to_string(rng() % 500);
        const auto d = DecideWith(factor, key, b, scratch);
        ASSERT_TRUE(d.ok());
        const Decision& got = d.value();
        ASSERT_LT(got.selected_load, got.selected_capacity);
        ++b[got.selection].load;
        // After admission no backend is above its bound for this decision.
        ASSERT_LE(b[got.selection].load, got.selected_capacity);
      }
    }
  }
}

TEST(BoundedLoad, FactorOneHundredIsProportionalWithinFloorAndCeil) {
  const std::vector<uint32_t> weights = {1, 2, 3, 4};  // W = 10
  std::vector<contract::LoadedCandidate> b;
  b.reserve(weights.size());
  for (uint32_t w : weights) b.push_back({"p" + std::to_string(b.size()), w});
  DecisionScratch scratch;
  for (int placed = 0; placed < 1000; ++placed) {
    const auto d = DecideWith(100, "same-key", b, scratch);
    ASSERT_TRUE(d.ok());
    ++b[d.value().selection].load;
    const uint64_t total = static_cast<uint64_t>(placed) + 1;
    for (size_t i = 0; i < b.size(); ++i) {
      // load_i <= ceil(total * w_i / W) at every step.
      const uint64_t ceil_share = (total * weights[i] + 9) / 10;
      ASSERT_LE(b[i].load, ceil_share) << "after " << total;
    }
  }
  // At a multiple of W the split is exact.
  for (size_t i = 0; i < b.size(); ++i) EXPECT_EQ(b[i].load, 100u * weights[i]);
}

TEST(BoundedLoad, SpillsOnlyAtTheBoundToTheNextInTheOwnersOrder) {
  auto b = Backends({1, 1, 1, 1, 1}, "b");
  for (int k = 0; k < 500; ++k) {
    const std::string key = "spill" + std::to_string(k);
    const auto order = contract::Order(key, b);
    const size_t owner = order[0].index;
    const size_t second = order[1].index;
    DecisionScratch scratch;
    // L = 2 others + owner load; capacity with factor 100 for w=1, W=5.
    auto loads = b;
    loads[order[2].index].load = 2;
    for (uint64_t owner_load = 0; owner_load < 4; ++owner_load) {
      loads[owner].load = owner_load;
      const uint64_t total = 2 + owner_load;
      const UInt128 cap = BoundedLoadRendezvous::Capacity(100, total, 1, 5);
      const auto d = DecideWith(100, key, loads, scratch);
      ASSERT_TRUE(d.ok());
      EXPECT_EQ(d.value().affinity, owner);
      if (owner_load < cap) {
        EXPECT_EQ(d.value().selection, owner);
        EXPECT_FALSE(d.value().spilled);
      } else {
        EXPECT_EQ(d.value().selection, second) << key;
        EXPECT_TRUE(d.value().spilled);
      }
    }
  }
}

TEST(BoundedLoad, ScratchIsRetainedAndReleasable) {
  auto b = Backends({1, 2, 3, 4, 5, 6, 7, 8}, "b");
  DecisionScratch scratch;
  ASSERT_TRUE(DecideWith(150, "a", b, scratch).ok());
  const size_t retained = scratch.capacity();
  EXPECT_GE(retained, b.size());
  for (int k = 0; k < 100; ++k) {
    ASSERT_TRUE(DecideWith(150, std::to_string(k), b, scratch).ok());
  }
  EXPECT_EQ(scratch.capacity(), retained);  // no regrowth after warm-up
  scratch.Release();
  EXPECT_EQ(scratch.capacity(), 0u);
  EXPECT_TRUE(DecideWith(150, "again", b, scratch).ok());
}

}  // namespace
}  // namespace poise
