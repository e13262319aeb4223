#include <gtest/gtest.h>

#include <random>
#include <string>

#include "poise/rendezvous.h"
#include "reference.h"
#include "test_util.h"

namespace poise {
namespace {

using test_util::Backends;
using test_util::View;

Result<Decision> DecideWith(uint32_t factor, std::string_view key,
                            const std::vector<reference::Backend>& backends,
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
  // Largest inputs: 128-bit intermediate, saturated result.
  EXPECT_EQ(BoundedLoadRendezvous::Capacity(UINT32_MAX, UINT64_MAX - 1,
                                            UINT32_MAX, UINT32_MAX),
            UINT64_MAX);
  EXPECT_EQ(BoundedLoadRendezvous::Capacity(100, UINT64_MAX - 1, 1, 1),
            UINT64_MAX);
}

TEST(BoundedLoad, Errors) {
  DecisionScratch scratch;
  EXPECT_EQ(DecideWith(150, "k", {}, scratch).error(), PickError::kEmpty);

  auto none = Backends({1, 2}, "b");
  for (auto& b : none) b.eligible = false;
  EXPECT_EQ(DecideWith(150, "k", none, scratch).error(),
            PickError::kNoEligibleCandidates);

  auto heavy = Backends({UINT32_MAX, 1}, "b");
  EXPECT_EQ(DecideWith(150, "k", heavy, scratch).error(),
            PickError::kWeightOverflow);
  heavy[1].eligible = false;  // only eligible weights count
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
    std::vector<reference::Backend> b;
    const size_t n = 1 + rng() % 9;
    for (size_t i = 0; i < n; ++i) {
      b.push_back({"n" + std::to_string(rng() % 12),
                   static_cast<uint32_t>(1 + rng() % 6), rng() % 8,
                   rng() % 6 != 0});
    }
    const uint32_t factor = 100 + static_cast<uint32_t>(rng() % 120);
    const std::string key = std::to_string(trial);
    const auto expected = reference::Decide(key, b, factor);
    const auto got = DecideWith(factor, key, b, scratch);
    ASSERT_EQ(got.ok(), expected.has_value());
    if (!got.ok()) continue;
    ASSERT_EQ(got.value().affinity, expected->affinity) << trial;
    ASSERT_EQ(got.value().selection, expected->selection) << trial;
    ASSERT_EQ(got.value().selected_capacity, expected->capacity) << trial;
    ASSERT_EQ(got.value().selected_load, b[expected->selection].load);
    ASSERT_EQ(got.value().spilled, expected->affinity != expected->selection);
  }
}

// Requests arrive and never finish; every placement must respect the bound
// computed from the loads it saw.
TEST(BoundedLoad, ClosedLoopNeverExceedsCapacity) {
  const std::vector<std::vector<uint32_t>> weight_sets = {
      {1, 1, 1, 1}, {1, 3, 6}, {5, 1, 1, 1, 1, 2}, {100, 1}};
  DecisionScratch scratch;
  for (const auto& weights : weight_sets) {
    for (uint32_t factor : {100u, 125u, 150u, 200u}) {
      std::vector<reference::Backend> b;
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
  std::vector<reference::Backend> b;
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
    const auto order = reference::Order(key, b);
    const size_t owner = order[0].index;
    const size_t second = order[1].index;
    DecisionScratch scratch;
    // L = 2 others + owner load; capacity with factor 100 for w=1, W=5.
    auto loads = b;
    loads[order[2].index].load = 2;
    for (uint64_t owner_load = 0; owner_load < 4; ++owner_load) {
      loads[owner].load = owner_load;
      const uint64_t total = 2 + owner_load;
      const uint64_t cap = BoundedLoadRendezvous::Capacity(100, total, 1, 5);
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
