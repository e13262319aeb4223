// PreparedCandidates against the general path (itself checked against the
// contract in the other core tests) and the contract: the one- and
// two-weight short paths must give the same owner, the same decision (a
// route given the loads' sum is Decide's) and the same errors, reading each
// eligible load at most once, on every input.
#include "src/core/prepared_candidates.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "poise/identity_table.h"
#include "poise/rendezvous.h"
#include "src/core/contract.h"
#include "test_util.h"

namespace poise {
namespace {

using Path = PreparedCandidates::Path;

std::shared_ptr<const IdentityTable> TableOf(
    const std::vector<Candidate>& candidates) {
  return std::make_shared<const IdentityTable>(candidates);
}

void ExpectSame(const Result<size_t>& got, const Result<size_t>& want) {
  ASSERT_EQ(got.ok(), want.ok());
  if (want.ok()) {
    EXPECT_EQ(got.value(), want.value());
  } else {
    EXPECT_EQ(got.error(), want.error());
  }
}

void ExpectSame(const Result<Decision>& got, const Result<Decision>& want) {
  ASSERT_EQ(got.ok(), want.ok());
  if (!want.ok()) {
    EXPECT_EQ(got.error(), want.error());
    return;
  }
  const Decision& g = got.value();
  const Decision& w = want.value();
  EXPECT_EQ(g.affinity, w.affinity);
  EXPECT_EQ(g.selection, w.selection);
  EXPECT_EQ(g.spilled, w.spilled);
  EXPECT_EQ(g.selected_load, w.selected_load);
  EXPECT_EQ(g.selected_capacity, w.selected_capacity);
}

// RouteWithTotal given the sum of the eligible loads, as a Decision: what
// Decide answers on those loads (capacity by Bound; no overflow here).
template <typename LoadFn>
Result<Decision> DecideByRoute(const PreparedCandidates& prepared,
                               const BoundedLoadRendezvous& bounded,
                               std::string_view key, const LoadFn& load,
                               DecisionScratch& scratch) {
  uint64_t total = 0, total_weight = 0;
  const std::vector<Candidate>& c = prepared.candidates();
  for (size_t i = 0; i < c.size(); ++i) {
    if (!c[i].IsEligible()) continue;
    total += load(i);
    total_weight += c[i].weight;
  }
  const auto routed =
      prepared.RouteWithTotal(bounded, key, total, load, scratch);
  if (!routed.ok()) return routed.error();
  const PreparedCandidates::Routed& r = routed.value();
  return Decision{
      r.affinity, r.selection, r.spilled, load(r.selection),
      bounded.BoundFor(total, c[r.selection].weight, total_weight).Capacity()};
}

// The decision tests run once per compiled target of the hashing kernels
// that the CPU can run.
class PreparedByKernel : public test_util::KernelFixture {};
INSTANTIATE_TEST_SUITE_P(PreparedCandidates, PreparedByKernel,
                         test_util::Kernels(), test_util::KernelName);

// Random lists of every shape the short paths must either serve or refuse:
// one weight (most lists), two weights, more, ineligible members, duplicate
// identities (equal z: a near-tie the short path must hand over), loads from
// idle to saturated (a full owner), against keys of every length.
TEST_P(PreparedByKernel, EqualsTheGeneralPathOnRandomLists) {
  std::mt19937_64 rng(20261201);
  size_t picks = 0, short_lists = 0, two_weight_lists = 0, spills = 0,
         lazy_routes = 0;
  for (int list = 0; list < 3000; ++list) {
    const size_t n = 1 + rng() % 60;
    const uint64_t shape = rng() % 8;  // 0-5 one weight, 6 two, 7 up to four
    const auto common = static_cast<uint32_t>(1 + rng() % 1000);
    const auto other = static_cast<uint32_t>(1 + (common + rng() % 999) % 1000);
    std::vector<std::string> names;
    bool duplicates = false;
    for (size_t i = 0; i < n; ++i) {
      const bool duplicate = i > 0 && rng() % 16 == 0;
      duplicates |= duplicate;
      names.push_back(duplicate ? names[rng() % i]
                                : "10.0.0." + std::to_string(i) + ":50051");
    }
    std::vector<Candidate> candidates;
    for (size_t i = 0; i < n; ++i) {
      const auto weight = shape < 6    ? common
                          : shape == 6 ? (rng() % 3 == 0 ? other : common)
                                       : static_cast<uint32_t>(1 + rng() % 4);
      candidates.push_back(
          {names[i], rng() % 10 == 0 ? 0u : weight, rng() % 8 != 0});
    }
    const PreparedCandidates prepared(candidates, TableOf(candidates));
    const IdentityTable& table = prepared.table();
    short_lists += prepared.path() == Path::kOneWeight;
    two_weight_lists += prepared.path() == Path::kTwoWeights;
    // Saturation from none to most: about `busy` of the members are full.
    const auto factor = static_cast<uint32_t>(100 + rng() % 120);
    const auto bounded = *BoundedLoadRendezvous::Create(factor);
    const size_t busy = rng() % (n + 1);
    std::vector<uint64_t> loads(n);
    for (size_t i = 0; i < n; ++i) loads[i] = i < busy ? 3 + rng() % 5 : 0;
    DecisionScratch scratch_a, scratch_b;
    for (int k = 0; k < 200; ++k) {
      const std::string key = "session-" + std::to_string(rng() % 100000);
      ExpectSame(prepared.Pick(key),
                 WeightedRendezvous::Pick(key, candidates, table));
      std::vector<int> sampled(n, 0);
      const Result<Decision> got = bounded.Decide(
          key, candidates, table,
          [&](size_t i) {
            ++sampled[i];
            return loads[i];
          },
          scratch_b);
      ExpectSame(DecideByRoute(
                     prepared, bounded, key, [&](size_t i) { return loads[i]; },
                     scratch_a),
                 got);
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(sampled[i], candidates[i].IsEligible() ? 1 : 0) << i;
      }
      // The route given the loads' sum: each load read at most once, and
      // only the owner's when it is idle on a short path.
      std::fill(sampled.begin(), sampled.end(), 0);
      uint64_t sum = 0;
      for (size_t i = 0; i < n; ++i) {
        sum += candidates[i].IsEligible() ? loads[i] : 0;
      }
      const Result<PreparedCandidates::Routed> routed = prepared.RouteWithTotal(
          bounded, key, sum,
          [&](size_t i) {
            ++sampled[i];
            return loads[i];
          },
          scratch_a);
      ASSERT_EQ(routed.ok(), got.ok());
      if (got.ok()) {
        EXPECT_EQ(routed.value().affinity, got.value().affinity);
        EXPECT_EQ(routed.value().selection, got.value().selection);
        EXPECT_EQ(routed.value().spilled, got.value().spilled);
        // Duplicates tie on z: not decisive, so everyone is sampled.
        const bool lazy = prepared.path() != Path::kGeneral && !duplicates &&
                          loads[got.value().affinity] == 0;
        size_t total_sampled = 0;
        for (size_t i = 0; i < n; ++i) {
          ASSERT_LE(sampled[i], candidates[i].IsEligible() ? 1 : 0) << i;
          total_sampled += static_cast<size_t>(sampled[i]);
        }
        if (lazy) {
          EXPECT_EQ(total_sampled, 1u);
          ++lazy_routes;
        }
      }
      spills += got.ok() && got.value().spilled;
      ++picks;
      if (HasFatalFailure()) return;
    }
  }
  EXPECT_EQ(picks, 600000u);
  EXPECT_GT(short_lists, 1500u);  // the short paths were exercised...
  EXPECT_GT(two_weight_lists, 250u);
  EXPECT_GT(spills, 10000u);       // ...and so was the hand-over
  EXPECT_GT(lazy_routes, 50000u);  // the route skipped the others' loads
}

// Lists of three to eight weights (the general path, every weight's leader
// from one pass of the vector kernel) and of nine (no grouping), with
// ineligible members and duplicate identities: the pick is the contract's.
TEST_P(PreparedByKernel, ManyWeightPicksAreTheContracts) {
  std::mt19937_64 rng(11);
  size_t general = 0, picks = 0;
  for (int list = 0; list < 300; ++list) {
    const size_t weights = 3 + static_cast<size_t>(list % 7);  // 3..9
    const size_t n = 1 + rng() % 90;
    std::vector<contract::LoadedCandidate> backends;
    for (size_t i = 0; i < n; ++i) {
      const bool duplicate = i > 0 && rng() % 12 == 0;
      backends.push_back(
          {duplicate ? backends[rng() % i].identity
                     : "10.2." + std::to_string(list) + "." + std::to_string(i),
           static_cast<uint32_t>(1 + rng() % weights), 0, rng() % 6 != 0});
    }
    const std::vector<Candidate> candidates = test_util::View(backends);
    const PreparedCandidates prepared(candidates, TableOf(candidates));
    general += prepared.path() == Path::kGeneral;
    for (int k = 0; k < 100; ++k) {
      const std::string key = "many-" + std::to_string(rng() % 1000000);
      ExpectSame(prepared.Pick(key), contract::Pick(key, backends));
      ++picks;
    }
  }
  EXPECT_GT(general, 200u);
  EXPECT_EQ(picks, 30000u);
}

// The short paths against the contract itself (not only the general path),
// on one-weight and two-weight lists with unequal loads.
TEST_P(PreparedByKernel, ShortPathAnswersAreTheContracts) {
  std::mt19937_64 rng(7);
  for (int list = 0; list < 200; ++list) {
    const bool two = list % 2 == 1;
    const std::string name = "backend-" + std::to_string(list);
    std::vector<contract::LoadedCandidate> backends =
        two ? test_util::Backends({5, 5, 3, 5, 5, 3, 3, 5, 5, 5, 3, 5}, name)
            : test_util::Backends({5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5}, name);
    for (auto& b : backends) b.load = rng() % 4;
    const std::vector<Candidate> candidates = test_util::View(backends);
    const PreparedCandidates prepared(candidates, TableOf(candidates));
    ASSERT_EQ(prepared.path(), two ? Path::kTwoWeights : Path::kOneWeight);
    const auto bounded = *BoundedLoadRendezvous::Create(125);
    DecisionScratch scratch;
    for (int k = 0; k < 50; ++k) {
      const std::string key = std::to_string(rng());
      const auto want = contract::Decide(key, backends, 125);
      ASSERT_TRUE(want.ok());
      ASSERT_EQ(prepared.Pick(key).value(), want.value().affinity);
      const Result<Decision> got = DecideByRoute(
          prepared, bounded, key, [&](size_t i) { return backends[i].load; },
          scratch);
      ASSERT_TRUE(got.ok());
      EXPECT_EQ(got.value().affinity, want.value().affinity);
      EXPECT_EQ(got.value().selection, want.value().selection);
    }
  }
}

// The route reads one counter when the owner is idle and, when every
// candidate is full, every eligible one, once; with one weight and with two.
TEST(PreparedCandidates, RouteSamplesTheOthersOnlyForABusyOwner) {
  for (const bool two : {false, true}) {
    SCOPED_TRACE(two ? "two weights" : "one weight");
    std::vector<std::string> names(20);
    std::vector<Candidate> candidates(names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      names[i] = "b" + std::to_string(i);
      candidates[i] = {names[i], two && i % 4 == 0 ? 5u : 2u};
    }
    candidates[3].eligible = false;
    const PreparedCandidates prepared(candidates, TableOf(candidates));
    ASSERT_EQ(prepared.path(), two ? Path::kTwoWeights : Path::kOneWeight);
    const auto bounded = *BoundedLoadRendezvous::Create(150);
    DecisionScratch scratch;
    const size_t owner = prepared.Pick("tenant-7").value();
    std::vector<uint64_t> loads(candidates.size(), 1);
    std::vector<int> sampled(candidates.size(), 0);
    auto load = [&](size_t i) {
      ++sampled[i];
      return loads[i];
    };
    loads[owner] = 0;
    const uint64_t total = 19;  // the others' loads
    auto routed =
        prepared.RouteWithTotal(bounded, "tenant-7", total, load, scratch);
    ASSERT_TRUE(routed.ok());
    EXPECT_EQ(routed.value().selection, owner);
    EXPECT_FALSE(routed.value().spilled);
    EXPECT_EQ(std::count(sampled.begin(), sampled.end(), 1), 1);
    EXPECT_EQ(sampled[owner], 1);
    // Busy, and every other candidate full under a stale total of 0 (every
    // bound 1 or 2, every load at least 1... the owner's 20): every eligible
    // load read once, and the loads' sum decides (a spill).
    loads[owner] = 20;
    for (size_t i = 0; i < loads.size(); ++i) {
      if (i != owner) loads[i] = 2;
    }
    std::fill(sampled.begin(), sampled.end(), 0);
    routed = prepared.RouteWithTotal(bounded, "tenant-7", 0, load, scratch);
    ASSERT_TRUE(routed.ok());
    EXPECT_TRUE(routed.value().spilled);
    EXPECT_TRUE(routed.value().stale_total);
    EXPECT_EQ(routed.value().affinity, owner);
    for (size_t i = 0; i < sampled.size(); ++i) {
      EXPECT_EQ(sampled[i], i == 3 ? 0 : 1) << i;
    }
  }
}

TEST(PreparedCandidates, ShortPathsOnlyForListsThatFit) {
  const std::vector<Candidate> equal = {{"a", 3}, {"b", 3}, {"c", 7, false}};
  EXPECT_EQ(PreparedCandidates(equal, TableOf(equal)).path(), Path::kOneWeight);
  const std::vector<Candidate> mixed = {{"a", 3}, {"b", 4}, {"c", 0}};
  EXPECT_EQ(PreparedCandidates(mixed, TableOf(mixed)).path(),
            Path::kTwoWeights);
  const std::vector<Candidate> three = {{"a", 3}, {"b", 4}, {"c", 5}};
  EXPECT_EQ(PreparedCandidates(three, TableOf(three)).path(), Path::kGeneral);
  // Weights summing past 2^32 - 1 sum in 64 bits, as in poise-core: the
  // short paths serve them, and answer as the general path and the contract.
  const std::vector<Candidate> heavy = {{"a", 3000000000u}, {"b", 3000000000u}};
  const PreparedCandidates prepared_heavy(heavy, TableOf(heavy));
  EXPECT_EQ(prepared_heavy.path(), PreparedCandidates::Path::kOneWeight);
  const std::vector<Candidate> heavy_two = {{"a", 3000000000u},
                                            {"b", 4000000000u}};
  const PreparedCandidates prepared_heavy_two(heavy_two, TableOf(heavy_two));
  EXPECT_EQ(prepared_heavy_two.path(), PreparedCandidates::Path::kTwoWeights);
  DecisionScratch scratch_a, scratch_b;
  const auto bounded = *BoundedLoadRendezvous::Create(150);
  for (const PreparedCandidates* p : {&prepared_heavy, &prepared_heavy_two}) {
    std::vector<contract::LoadedCandidate> backends;
    for (const Candidate& c : p->candidates()) {
      backends.push_back({std::string(c.identity), c.weight, 0, true});
    }
    for (const uint64_t owner_load : {uint64_t{0}, uint64_t{1}, uint64_t{2}}) {
      for (int k = 0; k < 50; ++k) {
        const std::string key = "heavy-" + std::to_string(k);
        const size_t owner = contract::Pick(key, backends).value();
        backends[owner].load = owner_load;
        const auto load = [&](size_t i) { return backends[i].load; };
        const Result<Decision> got =
            DecideByRoute(*p, bounded, key, load, scratch_a);
        ExpectSame(got, bounded.Decide(key, p->candidates(), p->table(), load,
                                       scratch_b));
        const auto want = contract::Decide(key, backends, 150);
        ASSERT_TRUE(got.ok() && want.ok());
        EXPECT_EQ(got.value().selection, want.value().selection);
        EXPECT_TRUE(got.value().selected_capacity ==
                    want.value().selected_capacity);
        backends[owner].load = 0;
      }
    }
  }
}

TEST(PreparedCandidates, ErrorsAreTheGeneralPaths) {
  DecisionScratch scratch;
  const auto bounded = *BoundedLoadRendezvous::Create(150);
  auto idle = [](size_t) { return uint64_t{0}; };
  // Empty, none eligible, table of another list, no table.
  const std::vector<Candidate> none = {};
  const PreparedCandidates empty(none, TableOf(none));
  EXPECT_EQ(empty.Pick("k").error(), PickError::kEmpty);
  EXPECT_EQ(empty.RouteWithTotal(bounded, "k", 0, idle, scratch).error(),
            PickError::kEmpty);
  const std::vector<Candidate> off = {{"a", 1, false}, {"b", 0}};
  const PreparedCandidates ineligible(off, TableOf(off));
  EXPECT_EQ(ineligible.Pick("k").error(), PickError::kNoEligibleCandidates);
  EXPECT_EQ(ineligible.RouteWithTotal(bounded, "k", 0, idle, scratch).error(),
            PickError::kNoEligibleCandidates);
  const std::vector<Candidate> two = {{"a", 1}, {"b", 1}};
  const std::vector<Candidate> three = {{"a", 1}, {"b", 1}, {"c", 1}};
  const PreparedCandidates mismatched(two, TableOf(three));
  EXPECT_EQ(mismatched.path(), Path::kGeneral);
  EXPECT_EQ(mismatched.Pick("k").error(), PickError::kTableMismatch);
  EXPECT_EQ(mismatched.RouteWithTotal(bounded, "k", 0, idle, scratch).error(),
            PickError::kTableMismatch);
  const PreparedCandidates untabled(two, nullptr);
  EXPECT_EQ(untabled.Pick("k").error(), PickError::kTableMismatch);
  // On the short path: a total whose L + 1 does not fit, and loads summing
  // past 2^64 - 1 under a stale total (the loads' sum then decides).
  const PreparedCandidates prepared(two, TableOf(two));
  ASSERT_EQ(prepared.path(), Path::kOneWeight);
  EXPECT_EQ(
      prepared.RouteWithTotal(bounded, "k", UINT64_MAX, idle, scratch).error(),
      PickError::kLoadOverflow);
  const auto d = prepared.RouteWithTotal(
      bounded, "k", 0, [](size_t) { return UINT64_MAX / 2 + 1; }, scratch);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error(), PickError::kLoadOverflow);
  // A scratch that may not grow.
  DecisionScratch small(1);
  EXPECT_EQ(prepared.RouteWithTotal(bounded, "k", 0, idle, small).error(),
            PickError::kScratchCapacityExceeded);
}

}  // namespace
}  // namespace poise
