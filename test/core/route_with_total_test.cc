// PreparedCandidates::RouteWithTotal against the contract's rule for a given
// total (contract::DecideWithTotal) and, when the total is the sum of the
// loads, against Decide: the same routing on every path (one weight, two
// weights, more, ineligible members, duplicate identities, loads at and
// above their bounds, stale totals), each load read at most once, and only
// the loads of the candidates up to the selection in the key's order (every
// eligible one for a stale total).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "poise/identity_table.h"
#include "poise/rendezvous.h"
#include "src/core/contract.h"
#include "src/core/key_order.h"
#include "src/core/key_order_walk.h"
#include "src/core/prepared_candidates.h"
#include "test_util.h"

namespace poise {
namespace {

using Path = PreparedCandidates::Path;
using Routed = PreparedCandidates::Routed;

// A candidate list with its loads, as the core and as the contract see it.
struct Case {
  std::vector<contract::LoadedCandidate> backends;
  std::vector<Candidate> candidates;
  bool duplicates = false;

  uint64_t LoadSum() const {
    uint64_t sum = 0;
    for (const auto& b : backends) {
      if (b.eligible && b.weight != 0) sum += b.load;
    }
    return sum;
  }
};

// Random lists of every shape: one weight (most), two weights, up to four
// or up to twelve (past the group table), ineligible members and zero
// weights, duplicate identities (equal z: a near-tie), loads from idle to
// all saturated, some exactly at a bound of their sum.
Case RandomCase(std::mt19937_64& rng, size_t max_n, uint32_t factor) {
  Case c;
  const size_t n = 1 + rng() % max_n;
  const uint64_t shape = rng() % 10;  // 0-4 one, 5-7 two, 8 four, 9 twelve
  const auto common = static_cast<uint32_t>(1 + rng() % 1000);
  const auto other = static_cast<uint32_t>(1 + (common + rng() % 999) % 1000);
  for (size_t i = 0; i < n; ++i) {
    const bool duplicate = i > 0 && rng() % 24 == 0;
    c.duplicates |= duplicate;
    std::string name = duplicate ? c.backends[rng() % i].identity
                                 : "10.1." + std::to_string(i) + ".7:50051";
    const uint32_t weight = shape < 5   ? common
                            : shape < 8 ? (rng() % 3 == 0 ? other : common)
                            : shape == 8
                                ? static_cast<uint32_t>(1 + rng() % 4)
                                : static_cast<uint32_t>(1 + rng() % 12);
    c.backends.push_back(
        {std::move(name), rng() % 12 == 0 ? 0u : weight, 0, rng() % 10 != 0});
  }
  // About `busy` of the members carry load; a few sit at a bound.
  const size_t busy = rng() % (n + 1);
  for (size_t i = 0; i < n; ++i) {
    c.backends[i].load = i < busy ? 2 + rng() % 9 : (rng() % 4 == 0 ? 1 : 0);
  }
  std::shuffle(c.backends.begin(), c.backends.end(), rng);
  if (rng() % 4 == 0) {
    // One member exactly at its bound under the sum of the others (its own
    // load counted in the sum it is bounded by): load = capacity(L).
    contract::LoadedCandidate& b = c.backends[rng() % n];
    uint64_t total_weight = 0, others = 0;
    for (const auto& x : c.backends) {
      if (!x.eligible || x.weight == 0) continue;
      total_weight += x.weight;
      if (&x != &b) others += x.load;
    }
    if (b.eligible && b.weight != 0) {
      for (uint64_t load = 0; load < 1000; ++load) {
        if (UInt128{load} ==
            contract::Capacity(factor, others + load, b.weight, total_weight)) {
          b.load = load;
          break;
        }
      }
    }
  }
  c.candidates = test_util::View(c.backends);
  return c;
}

void ExpectSameRouting(const Result<Routed>& got,
                       const Result<contract::DecisionWithTotal>& want) {
  ASSERT_EQ(got.ok(), want.ok());
  if (!want.ok()) {
    EXPECT_EQ(got.error(), want.error());
    return;
  }
  const contract::Decision& w = want.value().decision;
  EXPECT_EQ(got.value().affinity, w.affinity);
  EXPECT_EQ(got.value().selection, w.selection);
  EXPECT_EQ(got.value().spilled, w.selection != w.affinity);
  EXPECT_EQ(got.value().stale_total, want.value().stale_total);
}

// The candidates the key's order puts up to and including `selection`.
std::vector<size_t> OrderUpTo(const std::string& key, const Case& c,
                              size_t selection) {
  std::vector<size_t> prefix;
  for (const contract::Ranked& r : contract::Order(key, c.backends)) {
    prefix.push_back(r.index);
    if (r.index == selection) break;
  }
  return prefix;
}

// How a RouteWithTotal read the loads.
struct Reads {
  std::vector<int> count;

  explicit Reads(size_t n) : count(n, 0) {}
  size_t Total() const {
    size_t total = 0;
    for (const int r : count) total += static_cast<size_t>(r);
    return total;
  }
};

// RouteWithTotal on `backends`' loads, counting each load read in `reads`
// (sized for the list).
Result<Routed> RouteCounting(
    const PreparedCandidates& prepared, const BoundedLoadRendezvous& bounded,
    const std::string& key, uint64_t total,
    const std::vector<contract::LoadedCandidate>& backends,
    std::vector<int>& reads, DecisionScratch& scratch) {
  return prepared.RouteWithTotal(
      bounded, key, total,
      [&](size_t i) {
        ++reads[i];
        return backends[i].load;
      },
      scratch);
}

// n idle pods of weight 3 (with `two` weights, 7 for every third), each
// eligible but those with i % every == at.
std::vector<contract::LoadedCandidate> Pods(size_t n, bool two, size_t every,
                                            size_t at) {
  std::vector<contract::LoadedCandidate> pods;
  for (size_t i = 0; i < n; ++i) {
    pods.push_back({"pod-" + std::to_string(i) + ".svc",
                    two && i % 3 == 0 ? 7u : 3u, 0, i % every != at});
  }
  return pods;
}

class RouteWithTotalByKernel : public test_util::KernelFixture {};
INSTANTIATE_TEST_SUITE_P(RouteWithTotal, RouteWithTotalByKernel,
                         test_util::Kernels(), test_util::KernelName);

// Totals from the loads' sum: the sum itself (Decide's answer, exactly),
// above it by a little and by far, and below it (often stale). Every other
// list reads every load as soon as the owner is full (kCheapest below 512),
// the others only along the order: the answers are the same.
TEST_P(RouteWithTotalByKernel, AnswersAsTheContractForEveryTotal) {
  std::mt19937_64 rng(20260211);
  size_t routes = 0, owner_only = 0, prefix_only = 0, read_all = 0, stale = 0,
         spills = 0, past_the_owner = 0, along_general = 0;
  size_t by_path[3] = {0, 0, 0};
  for (int list = 0; list < 1500; ++list) {
    const auto factor = static_cast<uint32_t>(100 + rng() % 120);
    const Case c = RandomCase(rng, list % 10 == 0 ? 400 : 60, factor);
    const size_t n = c.candidates.size();
    PreparedCandidates prepared(
        c.candidates, std::make_shared<const IdentityTable>(c.candidates));
    size_t eligible = 0;
    for (const Candidate& x : c.candidates) eligible += x.IsEligible();
    ++by_path[static_cast<size_t>(prepared.path())];
    const auto bounded = *BoundedLoadRendezvous::Create(factor);
    const uint64_t sum = c.LoadSum();
    DecisionScratch scratch_a, scratch_b;
    const int keys = n > 100 ? 8 : 40;
    for (int k = 0; k < keys; ++k) {
      const std::string key = "tenant-" + std::to_string(rng() % 1000000);
      const uint64_t totals[] = {sum,
                                 sum + 1 + rng() % 8,
                                 sum * 50 + rng() % 1000,
                                 sum + (uint64_t{1} << 40),
                                 sum / 2,
                                 rng() % (sum + 1),
                                 0};
      for (const uint64_t total : totals) {
        Reads reads(n);
        const Result<Routed> got = RouteCounting(
            prepared, bounded, key, total, c.backends, reads.count, scratch_a);
        const auto want =
            contract::DecideWithTotal(key, c.backends, factor, total);
        ExpectSameRouting(got, want);
        if (HasFatalFailure()) return;
        for (size_t i = 0; i < n; ++i) {
          ASSERT_LE(reads.count[i], c.candidates[i].IsEligible() ? 1 : 0) << i;
        }
        ++routes;
        if (!got.ok()) continue;
        stale += got.value().stale_total;
        const size_t spills_before = spills;
        spills += got.value().spilled;
        // The loads read: at least those up to the selection in the key's
        // order; exactly those, unless every eligible one was read (a stale
        // total).
        const std::vector<size_t> prefix =
            OrderUpTo(key, c, got.value().selection);
        for (const size_t i : prefix) ASSERT_EQ(reads.count[i], 1) << i;
        if (reads.Total() == prefix.size()) {
          prefix_only += 1;
          owner_only += prefix.size() == 1;
        } else {
          ASSERT_EQ(reads.Total(), eligible);
          read_all += 1;
        }
        if (total == sum) {
          // The sampled contract, bit for bit: Decide's routing.
          EXPECT_FALSE(got.value().stale_total);
          const Result<Decision> d = bounded.Decide(
              key, prepared.candidates(), prepared.table(),
              [&](size_t i) { return c.backends[i].load; }, scratch_b);
          ASSERT_TRUE(d.ok());
          EXPECT_EQ(got.value().affinity, d.value().affinity);
          EXPECT_EQ(got.value().selection, d.value().selection);
          EXPECT_EQ(got.value().spilled, d.value().spilled);
        }
        if (total >= sum) {
          EXPECT_FALSE(got.value().stale_total);
        }
        // Exactly the key's order up to the selection, on every path
        // (every eligible load when none had room).
        if (got.value().stale_total) {
          EXPECT_EQ(reads.Total(), eligible);
        } else {
          EXPECT_EQ(reads.Total(), prefix.size());
          along_general +=
              prepared.path() == Path::kGeneral && spills_before != spills;
          past_the_owner += prefix.size() > 1;
        }
      }
    }
  }
  EXPECT_GT(routes, 300000u);
  EXPECT_GT(by_path[static_cast<size_t>(Path::kOneWeight)], 500u);
  EXPECT_GT(by_path[static_cast<size_t>(Path::kTwoWeights)], 300u);
  EXPECT_GT(by_path[static_cast<size_t>(Path::kGeneral)], 200u);
  EXPECT_GT(owner_only, 50000u);    // the owner had room: one read
  EXPECT_GT(prefix_only, 150000u);  // a walk that stopped at the selection
  EXPECT_GT(read_all, 5000u);
  EXPECT_GT(stale, 5000u);
  EXPECT_GT(spills, 50000u);
  EXPECT_GT(past_the_owner, 5000u);
  EXPECT_GT(along_general, 1000u);  // spills along the general path's ranking
}

// Long lists, mostly saturated, so that the walk lists its deeper levels
// (about 8, 32, 128, ... candidates): one weight and two weights, each
// selection where the walk reads exactly the key's order up to it.
TEST_P(RouteWithTotalByKernel, DeepWalksReadOnlyTheKeysOrderUpToTheSelection) {
  std::mt19937_64 rng(99);
  size_t deep = 0;
  for (const bool two : {false, true}) {
    for (const size_t n : {size_t{17}, size_t{100}, size_t{1000}}) {
      std::vector<contract::LoadedCandidate> backends = Pods(n, two, 17, 5);
      const std::vector<Candidate> candidates = test_util::View(backends);
      PreparedCandidates prepared(
          candidates, std::make_shared<const IdentityTable>(candidates));
      ASSERT_EQ(prepared.path(), two ? Path::kTwoWeights : Path::kOneWeight);
      const auto bounded = *BoundedLoadRendezvous::Create(120);
      DecisionScratch scratch;
      for (int k = 0; k < 60; ++k) {
        const std::string key = "deep-" + std::to_string(k);
        const std::vector<contract::Ranked> order =
            contract::Order(key, backends);
        // The first `full` of the key's order are far over any bound; the
        // rest idle. T is large enough that the idle have room.
        const size_t full = rng() % order.size();
        for (auto& b : backends) b.load = 0;
        for (size_t r = 0; r < full; ++r) {
          backends[order[r].index].load = uint64_t{1} << 40;
        }
        const uint64_t total = uint64_t{1} << 41;
        std::vector<int> reads(n, 0);
        const Result<Routed> got = RouteCounting(prepared, bounded, key, total,
                                                 backends, reads, scratch);
        ASSERT_TRUE(got.ok());
        EXPECT_EQ(got.value().affinity, order.front().index);
        EXPECT_EQ(got.value().selection, order[full].index);
        EXPECT_FALSE(got.value().stale_total);
        for (size_t r = 0; r < order.size(); ++r) {
          EXPECT_EQ(reads[order[r].index], r > full ? 0 : 1) << r;
        }
        deep += full > 40;
      }
    }
  }
  EXPECT_GT(deep, 20u);
}

// A retry's k-th choice with room (NthWithRoomForTotal, n > 0), whose
// hashing pass also marks the walk's first survivor level: on one weight
// and two, lists long enough to have one (n > 16), a random share of the
// backends full, each k against the contract's order of those with room.
TEST_P(RouteWithTotalByKernel,
       KthChoiceWalksTheContractsOrderFromTheMarkedLevel) {
  std::mt19937_64 rng(7);
  size_t past_first_level = 0;
  for (const bool two : {false, true}) {
    for (const size_t n :
         {size_t{17}, size_t{63}, size_t{65}, size_t{100}, size_t{1000}}) {
      std::vector<contract::LoadedCandidate> backends = Pods(n, two, 13, 4);
      const std::vector<Candidate> candidates = test_util::View(backends);
      PreparedCandidates prepared(
          candidates, std::make_shared<const IdentityTable>(candidates));
      const auto bounded = *BoundedLoadRendezvous::Create(120);
      DecisionScratch scratch;
      for (int k = 0; k < 40; ++k) {
        const std::string key = "kth-" + std::to_string(k);
        const std::vector<contract::Ranked> order =
            contract::Order(key, backends);
        for (auto& b : backends) {
          b.load = rng() % 3 == 0 ? uint64_t{1} << 40 : 0;
        }
        const uint64_t total = uint64_t{1} << 41;
        std::vector<size_t> with_room;
        for (const contract::Ranked& r : order) {
          if (backends[r.index].load == 0) with_room.push_back(r.index);
        }
        if (with_room.empty()) continue;
        for (const size_t nth : {size_t{1}, size_t{2}, size_t{5}, n / 2}) {
          const Result<Routed> got = prepared.NthWithRoomForTotal(
              bounded, key, total, [&](size_t i) { return backends[i].load; },
              nth, scratch);
          ASSERT_TRUE(got.ok());
          EXPECT_EQ(got.value().affinity, order.front().index);
          EXPECT_EQ(got.value().selection, with_room[nth % with_room.size()])
              << key << " n " << n << " k " << nth;
          past_first_level += nth > 8 && nth < with_room.size();
        }
      }
    }
  }
  EXPECT_GT(past_first_level, 50u);
}

// A stale total (here 0, or far below the loads) never fails a pick: with
// nobody having room under it, every load is read once and the answer is
// Decide's (bounds from the loads' sum), flagged `stale_total`.
TEST_P(RouteWithTotalByKernel, StaleTotalFallsBackToTheSampledDecision) {
  for (const std::vector<uint32_t>& weights :
       {std::vector<uint32_t>{2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
                              2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
        std::vector<uint32_t>{1, 3, 1, 1, 3, 1, 1, 1, 3, 1, 1, 3, 1, 1, 1},
        std::vector<uint32_t>{1, 2, 3, 4, 1, 2, 3, 4}}) {
    std::vector<contract::LoadedCandidate> backends;
    for (size_t i = 0; i < weights.size(); ++i) {
      backends.push_back(
          {"b" + std::to_string(i), weights[i], 10 + (i * 7) % 5, true});
    }
    const std::vector<Candidate> candidates = test_util::View(backends);
    const PreparedCandidates prepared(
        candidates, std::make_shared<const IdentityTable>(candidates));
    SCOPED_TRACE(static_cast<int>(prepared.path()));
    const auto bounded = *BoundedLoadRendezvous::Create(150);
    DecisionScratch scratch_a, scratch_b;
    for (int k = 0; k < 100; ++k) {
      const std::string key = "stale-" + std::to_string(k);
      for (const uint64_t total : {uint64_t{0}, uint64_t{3}}) {
        std::vector<int> reads(backends.size(), 0);
        const Result<Routed> got = RouteCounting(prepared, bounded, key, total,
                                                 backends, reads, scratch_a);
        const Result<Decision> want = bounded.Decide(
            key, prepared.candidates(), prepared.table(),
            [&](size_t i) { return backends[i].load; }, scratch_b);
        ASSERT_TRUE(got.ok() && want.ok());
        EXPECT_TRUE(got.value().stale_total);
        EXPECT_EQ(got.value().affinity, want.value().affinity);
        EXPECT_EQ(got.value().selection, want.value().selection);
        EXPECT_EQ(got.value().spilled, want.value().spilled);
        for (const int r : reads) EXPECT_EQ(r, 1);
      }
    }
  }
}

// A view's Admits may answer differently when asked again (the router's hard
// limit reads counts other threads change between two asks). Under a stale
// total, and for a retry's k-th past the number with room, the walk asks
// each candidate once and takes the (nth mod m + 1)-th of the m it admitted;
// here every candidate is admitted at its first ask only.
TEST(RouteWithTotal, AStaleTotalAsksEachCandidateOnceAndTakesAnAdmittedOne) {
  std::vector<contract::LoadedCandidate> backends;
  for (size_t i = 0; i < 8; ++i) {
    backends.push_back({"pod-" + std::to_string(i), 1, 4, true});
  }
  const std::vector<Candidate> candidates = test_util::View(backends);
  const PreparedCandidates prepared(
      candidates, std::make_shared<const IdentityTable>(candidates));
  struct AdmitsOnce {
    std::vector<int>& asks;
    static uint64_t Load(size_t /*i*/) { return 4; }
    bool Admits(size_t i) { return asks[i]++ == 0; }
  };
  DecisionScratch scratch;
  for (size_t nth = 0; nth < 10; ++nth) {
    const std::string key = "once-" + std::to_string(nth);
    std::vector<int> asks(backends.size(), 0);
    AdmitsOnce view{asks};
    internal::KeyOrder order =
        internal::KeyOrder::Of(prepared.list(), key,
                               nth == 0 ? internal::KeyOrder::Stop::kAtOwner
                                        : internal::KeyOrder::Stop::kPastOwner);
    // Under L = 0 every bound is ceil(1.25 * 1 / 8) = 1, below each load of
    // 4; the loads' sum, 32, gives every candidate ceil(1.25 * 33 / 8) = 6.
    const Result<internal::Walked> walked = internal::WalkToNthWithRoom(
        order, 125, 0, internal::EligibleWeightOf(prepared.list()), view, nth,
        scratch);
    ASSERT_TRUE(walked.ok()) << key;
    EXPECT_TRUE(walked.value().stale_total) << key;
    const std::vector<contract::Ranked> want = contract::Order(key, backends);
    EXPECT_EQ(walked.value().selection, want[nth % want.size()].index) << key;
    EXPECT_EQ(walked.value().owner, want[0].index) << key;
    for (const int a : asks) EXPECT_EQ(a, 1) << key;
  }
  // The same for a retry's k-th past the number with room (a total that
  // gives every candidate room): it wraps around those found, each asked
  // once.
  for (size_t nth = 8; nth < 13; ++nth) {
    const std::string key = "wrap-" + std::to_string(nth);
    std::vector<int> asks(backends.size(), 0);
    AdmitsOnce view{asks};
    internal::KeyOrder order = internal::KeyOrder::Of(
        prepared.list(), key, internal::KeyOrder::Stop::kPastOwner);
    const Result<internal::Walked> walked = internal::WalkToNthWithRoom(
        order, 125, 1000, internal::EligibleWeightOf(prepared.list()), view,
        nth, scratch);
    ASSERT_TRUE(walked.ok()) << key;
    EXPECT_FALSE(walked.value().stale_total) << key;
    const std::vector<contract::Ranked> want = contract::Order(key, backends);
    EXPECT_EQ(walked.value().selection, want[nth % want.size()].index) << key;
    for (const int a : asks) EXPECT_EQ(a, 1) << key;
  }
}

// T + 1 must fit (T = 2^64 - 1 is kLoadOverflow on every path, even for an
// idle owner); loads summing past 2^64 - 1 are no error under a total
// (nothing sums them) unless the total is stale.
TEST(RouteWithTotal, OverflowRules) {
  DecisionScratch scratch;
  const auto bounded = *BoundedLoadRendezvous::Create(150);
  const std::vector<Candidate> one = {{"a", 1}, {"b", 1}, {"c", 1}};
  const std::vector<Candidate> two = {{"a", 1}, {"b", 2}, {"c", 1}};
  const std::vector<Candidate> three = {{"a", 1}, {"b", 2}, {"c", 3}};
  for (const auto* list : {&one, &two, &three}) {
    const PreparedCandidates prepared(
        *list, std::make_shared<const IdentityTable>(*list));
    SCOPED_TRACE(static_cast<int>(prepared.path()));
    std::vector<contract::LoadedCandidate> backends;
    for (const Candidate& c : *list) {
      backends.push_back({std::string(c.identity), c.weight, 0, true});
    }
    const auto idle = [](size_t) { return uint64_t{0}; };
    const Result<Routed> past =
        prepared.RouteWithTotal(bounded, "k", UINT64_MAX, idle, scratch);
    ASSERT_FALSE(past.ok());
    EXPECT_EQ(past.error(), PickError::kLoadOverflow);
    EXPECT_EQ(contract::DecideWithTotal("k", backends, 150, UINT64_MAX).error(),
              PickError::kLoadOverflow);
    // Two loads near 2^64 (their sum wraps) and one idle member: under a
    // total of 2^64 - 2 the loaded ones are over their bounds (w / W is at
    // most 1/2 for them, so a bound is at most ceil(0.75 (2^64 - 1))) and
    // the idle one has room.
    backends[0].load = backends[1].load = UINT64_MAX - 1;
    const auto loads = [&](size_t i) { return backends[i].load; };
    for (int k = 0; k < 20; ++k) {
      const std::string key = "wrap-" + std::to_string(k);
      const Result<Routed> got =
          prepared.RouteWithTotal(bounded, key, UINT64_MAX - 1, loads, scratch);
      ExpectSameRouting(
          got, contract::DecideWithTotal(key, backends, 150, UINT64_MAX - 1));
      ASSERT_TRUE(got.ok());
      EXPECT_EQ(got.value().selection, 2u);
      // Stale (T = 0, nobody idle): the sampled decision, whose sum wraps.
      backends[2].load = 5;
      const Result<Routed> stale =
          prepared.RouteWithTotal(bounded, key, 0, loads, scratch);
      ASSERT_FALSE(stale.ok());
      EXPECT_EQ(stale.error(), PickError::kLoadOverflow);
      EXPECT_EQ(contract::DecideWithTotal(key, backends, 150, 0).error(),
                PickError::kLoadOverflow);
      backends[2].load = 0;
    }
  }
}

TEST(RouteWithTotal, ErrorsAreDecidesOtherwise) {
  DecisionScratch scratch;
  const auto bounded = *BoundedLoadRendezvous::Create(150);
  const auto idle = [](size_t) { return uint64_t{0}; };
  const std::vector<Candidate> none = {};
  const PreparedCandidates empty(none,
                                 std::make_shared<const IdentityTable>(none));
  EXPECT_EQ(empty.RouteWithTotal(bounded, "k", 0, idle, scratch).error(),
            PickError::kEmpty);
  const std::vector<Candidate> off = {{"a", 1, false}, {"b", 0}};
  const PreparedCandidates ineligible(
      off, std::make_shared<const IdentityTable>(off));
  EXPECT_EQ(ineligible.RouteWithTotal(bounded, "k", 0, idle, scratch).error(),
            PickError::kNoEligibleCandidates);
  const std::vector<Candidate> two = {{"a", 1}, {"b", 1}};
  const std::vector<Candidate> three = {{"a", 1}, {"b", 1}, {"c", 1}};
  const PreparedCandidates mismatched(
      two, std::make_shared<const IdentityTable>(three));
  EXPECT_EQ(mismatched.RouteWithTotal(bounded, "k", 0, idle, scratch).error(),
            PickError::kTableMismatch);
  for (const auto* list : {&two, &three}) {
    const PreparedCandidates prepared(
        *list, std::make_shared<const IdentityTable>(*list));
    DecisionScratch small(1);
    EXPECT_EQ(prepared.RouteWithTotal(bounded, "k", 0, idle, small).error(),
              PickError::kScratchCapacityExceeded);
  }
}

}  // namespace
}  // namespace poise
