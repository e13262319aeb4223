#include "poise/rendezvous.h"

#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <map>
#include <random>
#include <string>

#include "src/core/contract.h"
#include "test_util.h"

namespace poise {
namespace {

using test_util::Backends;
using test_util::View;

size_t Owner(std::string_view key, const std::vector<Candidate>& candidates) {
  const Result<size_t> r = WeightedRendezvous::Pick(key, candidates);
  EXPECT_TRUE(r.ok());
  return r.ok() ? r.value() : SIZE_MAX;
}

TEST(WeightedRendezvous, PublishedExampleOwner) {
  const std::vector<Candidate> c = {{"a", 1}, {"b", 3}, {"c", 6}};
  EXPECT_EQ(Owner("customer-42", c), 1u);
}

TEST(WeightedRendezvous, Errors) {
  EXPECT_EQ(WeightedRendezvous::Pick("k", {}).error(), PickError::kEmpty);
  const std::vector<Candidate> none = {{"a", 1, false}, {"b", 0, true}};
  EXPECT_EQ(WeightedRendezvous::Pick("k", none).error(),
            PickError::kNoEligibleCandidates);
  EXPECT_EQ(WeightedRendezvous::Ranking("k", none).error(),
            PickError::kNoEligibleCandidates);
}

TEST(WeightedRendezvous, MatchesReferenceOrder) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<contract::LoadedCandidate> b;
    const size_t n = 1 + rng() % 12;
    for (size_t i = 0; i < n; ++i) {
      b.push_back({"id" + std::to_string(rng() % 20),
                   static_cast<uint32_t>(1 + rng() % 5), 0, rng() % 5 != 0});
    }
    const std::string key = "k" + std::to_string(trial);
    const auto expected = contract::Order(key, b);
    const auto got = WeightedRendezvous::Ranking(key, View(b));
    ASSERT_EQ(got.ok(), !expected.empty());
    if (!got.ok()) continue;
    ASSERT_EQ(got.value().size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(got.value()[i].index, expected[i].index) << key;
    }
    ASSERT_EQ(Owner(key, View(b)), expected.front().index);
  }
}

// With equal weights the winner is exactly ordinary rendezvous: argmax z.
TEST(WeightedRendezvous, EqualWeightsAreOrdinaryRendezvous) {
  for (uint32_t weight : {1u, 7u, 4294967295u}) {
    std::vector<Candidate> c;
    std::vector<std::string> ids;
    ids.reserve(16);
    for (int i = 0; i < 16; ++i) {
      ids.push_back("10.0.0." + std::to_string(i) + ":443");
    }
    c.reserve(ids.size());
    for (const auto& id : ids) c.push_back({id, weight});
    for (int k = 0; k < 200000 / 3; ++k) {
      const std::string key = "session-" + std::to_string(k);
      const KeyHash h(key);
      size_t argmax = 0;
      for (size_t i = 1; i < c.size(); ++i) {
        if (h.Mixed(ids[i]) > h.Mixed(ids[argmax])) argmax = i;
      }
      ASSERT_EQ(Owner(key, c), argmax) << key;
    }
  }
}

TEST(WeightedRendezvous, WeightSharesWithinOnePercent) {
  const std::vector<Candidate> c = {{"a", 1}, {"b", 3}, {"c", 6}};
  std::array<int, 3> hits{};
  constexpr int kKeys = 300000;
  for (int k = 0; k < kKeys; ++k) ++hits[Owner("user:" + std::to_string(k), c)];
  EXPECT_NEAR(hits[0] / double{kKeys}, 0.1, 0.01);
  EXPECT_NEAR(hits[1] / double{kKeys}, 0.3, 0.01);
  EXPECT_NEAR(hits[2] / double{kKeys}, 0.6, 0.01);
}

TEST(WeightedRendezvous, RemovingANonOwnerNeverMovesAKey) {
  auto b = Backends({1, 2, 3, 4, 5, 6}, "backend-");
  const auto all = View(b);
  for (size_t removed = 0; removed < b.size(); ++removed) {
    auto fewer = b;
    fewer.erase(fewer.begin() + static_cast<std::ptrdiff_t>(removed));
    const auto rest = View(fewer);
    for (int k = 0; k < 20000; ++k) {
      const std::string key = std::to_string(k);
      const size_t before = Owner(key, all);
      if (before == removed) continue;
      ASSERT_EQ(rest[Owner(key, rest)].identity, all[before].identity);
    }
  }
}

TEST(WeightedRendezvous, AddingABackendOnlyMovesKeysToIt) {
  auto b = Backends({2, 2, 3, 1}, "backend-");
  const auto before = View(b);
  auto more = b;
  more.push_back({"backend-new", 4});
  const auto after = View(more);
  int moved = 0;
  for (int k = 0; k < 50000; ++k) {
    const std::string key = "k" + std::to_string(k);
    const auto& then = before[Owner(key, before)].identity;
    const auto& now = after[Owner(key, after)].identity;
    if (then != now) {
      ASSERT_EQ(now, "backend-new");
      ++moved;
    }
  }
  EXPECT_NEAR(moved / 50000.0, 4.0 / 12.0, 0.02);
}

TEST(WeightedRendezvous, ChangingOneWeightNeverMovesBetweenUnchangedBackends) {
  auto b = Backends({3, 1, 4, 1, 5}, "backend-");
  for (uint32_t new_weight : {1u, 2u, 9u, 100u}) {
    auto changed = b;
    changed[2].weight = new_weight;
    const auto before = View(b);
    const auto after = View(changed);
    for (int k = 0; k < 20000; ++k) {
      const std::string key = "w" + std::to_string(k);
      const size_t then = Owner(key, before);
      const size_t now = Owner(key, after);
      if (then != now) {
        ASSERT_TRUE(then == 2 || now == 2) << key;
      }
    }
  }
}

TEST(WeightedRendezvous, SliceOrderDoesNotChangeTheWinner) {
  auto b = Backends({1, 2, 3, 4, 5, 6, 7}, "backend-");
  std::mt19937 rng(5);
  for (int round = 0; round < 20; ++round) {
    auto shuffled = b;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    const auto x = View(b);
    const auto y = View(shuffled);
    for (int k = 0; k < 5000; ++k) {
      const std::string key = std::to_string(k * 31);
      ASSERT_EQ(x[Owner(key, x)].identity, y[Owner(key, y)].identity);
    }
  }
}

TEST(WeightedRendezvous, DuplicateIdentitiesResolveAsSpecified) {
  // Same identity, same draw: the greater weight wins wherever it stands.
  const std::vector<Candidate> heavier_later = {{"dup", 1}, {"dup", 5}};
  const std::vector<Candidate> heavier_first = {{"dup", 5}, {"dup", 1}};
  // Equal weights: the earlier entry wins.
  const std::vector<Candidate> equal = {{"dup", 2}, {"dup", 2}};
  for (int k = 0; k < 1000; ++k) {
    const std::string key = std::to_string(k);
    EXPECT_EQ(Owner(key, heavier_later), 1u);
    EXPECT_EQ(Owner(key, heavier_first), 0u);
    EXPECT_EQ(Owner(key, equal), 0u);
  }
}

}  // namespace
}  // namespace poise
