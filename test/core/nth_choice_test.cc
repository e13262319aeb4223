// The k-th choice of a key (retries) against the plain contract's order.
#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "poise/identity_table.h"
#include "poise/rendezvous.h"
#include "src/core/contract.h"
#include "src/core/prepared_candidates.h"
#include "test_util.h"

namespace poise {
namespace {

using test_util::View;

std::vector<contract::LoadedCandidate> RandomBackends(std::mt19937& rng) {
  std::vector<contract::LoadedCandidate> b;
  const size_t n = 1 + rng() % 10;
  for (size_t i = 0; i < n; ++i) {
    // Distinct identities: the policies list one backend per identity.
    b.push_back({"id" + std::to_string(i) + "-" + std::to_string(rng() % 7),
                 static_cast<uint32_t>(1 + rng() % 5), rng() % 6,
                 rng() % 5 != 0});
  }
  return b;
}

TEST(PickNth, IsTheContractsOrderWrappingAround) {
  std::mt19937 rng(19);
  for (int trial = 0; trial < 1500; ++trial) {
    const std::vector<contract::LoadedCandidate> b = RandomBackends(rng);
    const std::vector<Candidate> c = View(b);
    const IdentityTable table(c);
    const std::string key = "k" + std::to_string(trial);
    const std::vector<contract::Ranked> order = contract::Order(key, b);
    for (size_t n = 0; n < 2 * b.size() + 1; ++n) {
      const Result<size_t> got = WeightedRendezvous::PickNth(key, c, table, n);
      ASSERT_EQ(got.ok(), !order.empty());
      if (!got.ok()) {
        EXPECT_EQ(got.error(), PickError::kNoEligibleCandidates);
        continue;
      }
      ASSERT_EQ(got.value(), order[n % order.size()].index) << key << " " << n;
    }
    if (!order.empty()) {
      EXPECT_EQ(WeightedRendezvous::PickNth(key, c, table, 0).value(),
                WeightedRendezvous::Pick(key, c, table).value());
    }
  }
}

// Longer lists than a hashing block (64), more weights than the pass
// groups (8), and duplicate identities (equal z: the near-tie that sends a
// choice to the exact ranks), at choices deep enough to leave the short path.
TEST(PickNth, IsTheContractsOrderOnLongListsManyWeightsAndEqualZ) {
  std::mt19937 rng(23);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t n = 1 + rng() % 200;
    const auto weights = static_cast<uint32_t>(1 + rng() % 12);
    std::vector<contract::LoadedCandidate> b;
    for (size_t i = 0; i < n; ++i) {
      b.push_back({"b" + std::to_string(i),
                   static_cast<uint32_t>(1 + rng() % weights), 0,
                   rng() % 9 != 0});
      if (i > 0 && rng() % 8 == 0) {  // a copy, of the same weight or not
        const contract::LoadedCandidate& of = b[rng() % i];
        b.back().identity = of.identity;
        if (rng() % 2 == 0) b.back().weight = of.weight;
      }
    }
    const std::vector<Candidate> c = View(b);
    const IdentityTable table(c);
    const std::string key = "long" + std::to_string(trial);
    const std::vector<contract::Ranked> order = contract::Order(key, b);
    if (order.empty()) continue;
    for (const size_t nth : {size_t{0}, size_t{1}, size_t{2}, size_t{5},
                             size_t{6}, size_t{7}, size_t{30}, n - 1}) {
      const Result<size_t> got =
          WeightedRendezvous::PickNth(key, c, table, nth);
      ASSERT_TRUE(got.ok());
      ASSERT_EQ(got.value(), order[nth % order.size()].index)
          << key << " n " << n << " nth " << nth;
    }
  }
}

TEST(PickNth, Errors) {
  const std::vector<Candidate> none = {{"a", 1, false}, {"b", 0, true}};
  EXPECT_EQ(WeightedRendezvous::PickNth(
                "k", {}, IdentityTable(std::vector<Candidate>{}), 0)
                .error(),
            PickError::kEmpty);
  EXPECT_EQ(
      WeightedRendezvous::PickNth("k", none, IdentityTable(none), 3).error(),
      PickError::kNoEligibleCandidates);
  const std::vector<Candidate> one = {{"a", 1}};
  EXPECT_EQ(
      WeightedRendezvous::PickNth("k", one, IdentityTable(none), 0).error(),
      PickError::kTableMismatch);
  // A huge n wraps without walking n steps.
  EXPECT_EQ(WeightedRendezvous::PickNth("k", one, IdentityTable(one), SIZE_MAX)
                .value(),
            0u);
}

// The eligible backends' loads and weights, summed.
struct Totals {
  uint64_t load = 0;
  uint64_t weight = 0;
};
Totals EligibleTotals(const std::vector<contract::LoadedCandidate>& b) {
  Totals t;
  for (const auto& x : b) {
    if (x.eligible) {
      t.load += x.load;
      t.weight += x.weight;
    }
  }
  return t;
}

// The backends with room under the contract's capacities over the eligible
// ones, in the key's contract order.
std::vector<size_t> WithRoomInOrder(
    const std::string& key, const std::vector<contract::LoadedCandidate>& b,
    uint32_t factor) {
  const Totals t = EligibleTotals(b);
  std::vector<size_t> with_room;
  for (const contract::Ranked& r : contract::Order(key, b)) {
    if (b[r.index].load <
        contract::Capacity(factor, t.load, b[r.index].weight, t.weight)) {
      with_room.push_back(r.index);
    }
  }
  return with_room;
}

TEST(DecideNth, IsTheContractsOrderOfBackendsWithRoom) {
  std::mt19937 rng(91);
  DecisionScratch scratch;
  for (int trial = 0; trial < 1500; ++trial) {
    const std::vector<contract::LoadedCandidate> b = RandomBackends(rng);
    const std::vector<Candidate> c = View(b);
    const IdentityTable table(c);
    const std::string key = "k" + std::to_string(trial);
    const uint32_t factor = 100 + static_cast<uint32_t>(rng() % 120);
    const auto policy = BoundedLoadRendezvous::Create(factor).value();
    const Totals totals = EligibleTotals(b);
    const std::vector<size_t> with_room = WithRoomInOrder(key, b, factor);
    const auto load = [&](size_t i) { return b[i].load; };
    const Result<contract::Decision> first = contract::Decide(key, b, factor);
    for (size_t n = 0; n < 2 * b.size() + 1; ++n) {
      const Result<Decision> got =
          policy.DecideNth(key, c, table, load, n, scratch);
      ASSERT_EQ(got.ok(), first.ok());
      if (!got.ok()) {
        EXPECT_EQ(got.error(), first.error());
        continue;
      }
      ASSERT_FALSE(with_room.empty());
      const size_t want = with_room[n % with_room.size()];
      ASSERT_EQ(got.value().selection, want) << key << " " << n;
      EXPECT_EQ(got.value().affinity, first.value().affinity);
      EXPECT_EQ(got.value().spilled, want != first.value().affinity);
      EXPECT_EQ(got.value().selected_load, b[want].load);
      EXPECT_TRUE(got.value().selected_capacity ==
                  contract::Capacity(factor, totals.load, b[want].weight,
                                     totals.weight));
      if (n == 0) {
        EXPECT_EQ(got.value().selection, first.value().selection);
      }
    }
  }
}

// One weight over long lists, where DecideNth offers its searches only the
// largest z (a threshold): some backends ineligible, a share of them full
// (up to nearly all, so that fewer than k + 2 of the listed have room and
// the pass is made again), each k against the contract's order of those with
// room.
TEST(DecideNth, OnOneWeightOfALongListIsTheContractsOrder) {
  std::mt19937 rng(17);
  DecisionScratch scratch;
  size_t checked = 0;
  for (const size_t n : {size_t{49}, size_t{64}, size_t{100}, size_t{1000}}) {
    for (const int full_percent : {0, 30, 90, 99}) {
      std::vector<contract::LoadedCandidate> b;
      for (size_t i = 0; i < n; ++i) {
        const bool full = static_cast<int>(rng() % 100) < full_percent;
        b.push_back({"pod-" + std::to_string(i), 3,
                     full ? uint64_t{1000} : rng() % 3, rng() % 10 != 0});
      }
      const std::vector<Candidate> c = View(b);
      const IdentityTable table(c);
      const auto load = [&](size_t i) { return b[i].load; };
      for (int k = 0; k < 8; ++k) {
        const std::string key = "long-" + std::to_string(k);
        const auto factor = static_cast<uint32_t>(100 + rng() % 120);
        const auto policy = BoundedLoadRendezvous::Create(factor).value();
        const Result<contract::Decision> first =
            contract::Decide(key, b, factor);
        ASSERT_TRUE(first.ok());
        const std::vector<size_t> with_room = WithRoomInOrder(key, b, factor);
        for (const size_t nth : {size_t{0}, size_t{1}, size_t{2}, size_t{5},
                                 with_room.size() + 1}) {
          const Result<Decision> got =
              policy.DecideNth(key, c, table, load, nth, scratch);
          ASSERT_TRUE(got.ok());
          const size_t want = with_room[nth % with_room.size()];
          EXPECT_EQ(got.value().selection, want)
              << key << " n " << n << " full " << full_percent << " k " << nth;
          EXPECT_EQ(got.value().affinity, first.value().affinity);
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 4u * 4u * 8u * 5u);
}

TEST(DecideNth, SamplesEachEligibleLoadOnce) {
  const std::vector<Candidate> c = {{"a", 1}, {"b", 2, false}, {"c", 3}};
  const IdentityTable table(c);
  std::vector<int> reads(c.size(), 0);
  DecisionScratch scratch;
  const auto r = BoundedLoadRendezvous().DecideNth(
      "k", c, table,
      [&](size_t i) {
        ++reads[i];
        return uint64_t{0};
      },
      1, scratch);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(reads, (std::vector<int>{1, 0, 1}));
}

// PreparedCandidates::NthWithRoomForTotal's selection over `c` and `table`.
Result<size_t> NthWithRoomForTotal(const BoundedLoadRendezvous& bounded,
                                   const std::string& key,
                                   const std::vector<Candidate>& c,
                                   const IdentityTable& table, uint64_t total,
                                   PreparedCandidates::LoadReader load,
                                   size_t n, DecisionScratch& scratch) {
  const PreparedCandidates prepared(
      c, std::make_shared<const IdentityTable>(table));
  const Result<PreparedCandidates::Routed> r =
      prepared.NthWithRoomForTotal(bounded, key, total, load, n, scratch);
  if (!r.ok()) return r.error();
  return r.value().selection;
}

// With a given total: DecideNth's selection where the total is the loads'
// sum, and otherwise the k-th of the backends with room under it in the
// contract's order (DecideNth's where none has room).
TEST(NthWithRoomForTotal, IsTheKthWithRoomUnderTheTotal) {
  std::mt19937 rng(40);
  const auto bounded = *BoundedLoadRendezvous::Create(150);
  DecisionScratch scratch;
  size_t compared = 0, stale = 0;
  for (int trial = 0; trial < 1500; ++trial) {
    const std::vector<contract::LoadedCandidate> b = RandomBackends(rng);
    const std::vector<Candidate> c = View(b);
    const IdentityTable table(c);
    const std::string key = "k" + std::to_string(trial);
    const auto load = [&b](size_t i) { return b[i].load; };
    uint64_t sum = 0, weight = 0;
    for (const auto& x : b) {
      if (x.eligible) {
        sum += x.load;
        weight += x.weight;
      }
    }
    if (weight == 0) {
      EXPECT_EQ(
          NthWithRoomForTotal(bounded, key, c, table, sum, load, 0, scratch)
              .error(),
          PickError::kNoEligibleCandidates);
      continue;
    }
    for (const uint64_t total : {sum, sum + rng() % 20, sum / 3}) {
      std::vector<size_t> with_room;
      for (const contract::Ranked& r : contract::Order(key, b)) {
        if (UInt128{b[r.index].load} <
            contract::Capacity(150, total, b[r.index].weight, weight)) {
          with_room.push_back(r.index);
        }
      }
      stale += with_room.empty();
      for (size_t n = 0; n < b.size() + 2; ++n) {
        const Result<size_t> got = NthWithRoomForTotal(bounded, key, c, table,
                                                       total, load, n, scratch);
        ASSERT_TRUE(got.ok());
        const Result<Decision> nth =
            bounded.DecideNth(key, c, table, load, n, scratch);
        ASSERT_TRUE(nth.ok());
        if (total == sum) {
          EXPECT_EQ(got.value(), nth.value().selection);
        }
        EXPECT_EQ(got.value(), with_room.empty()
                                   ? nth.value().selection
                                   : with_room[n % with_room.size()])
            << key << " " << n << " " << total;
        ++compared;
      }
    }
  }
  EXPECT_GT(compared, 20000u);
  EXPECT_GT(stale, 50u);
  const std::vector<Candidate> one = {{"a", 1, true}};
  EXPECT_EQ(NthWithRoomForTotal(
                bounded, "k", one, IdentityTable(one), UINT64_MAX,
                [](size_t) { return 0; }, 0, scratch)
                .error(),
            PickError::kLoadOverflow);
  EXPECT_EQ(NthWithRoomForTotal(
                bounded, "k", one, IdentityTable(std::vector<Candidate>{}), 0,
                [](size_t) { return 0; }, 0, scratch)
                .error(),
            PickError::kTableMismatch);
}

}  // namespace
}  // namespace poise
