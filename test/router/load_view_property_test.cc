// Every mode of a pick - a first attempt, a retry's k-th choice, the hard
// limit, a call without a key - over every load view (no loads, the load
// scope's counts, the fleet's estimates), against the plain contract
// (src/core/contract.h) on random backend sets, weights, states and loads.
// The picker walks one order (src/core/key_order.h); the oracle here is the
// contract's order of the READY backends and its capacity, nothing else of
// the router's.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "poise/in_flight.h"
#include "src/core/contract.h"
#include "src/router/backend_set.h"
#include "src/router/config.h"
#include "src/router/fleet_load.h"
#include "src/router/picker.h"
#include "test/router/router_test_util.h"

namespace poise::router::test {
namespace {

std::atomic<int64_t> fake_now_ns{0};
int64_t FakeNow() { return fake_now_ns.load(); }

enum class View : uint8_t { kNone, kScope, kFleet };

// One random channel: its config, backends (weights, states), the calls it
// holds on each and, under serverLoad, each backend's report.
struct Channel {
  View view = View::kNone;
  Config config;
  std::vector<uint32_t> weights;
  std::vector<BackendState> states;
  std::vector<uint64_t> loads;    // this channel's calls in flight
  std::vector<uint64_t> reports;  // serverLoad: reported calls, 0: none
};

Channel RandomChannel(std::mt19937_64& rng, View view) {
  Channel c;
  c.view = view;
  c.config = ValidConfig(/*bounded=*/view != View::kNone);
  static constexpr uint32_t kFactors[] = {100, 101, 125, 150, 200, 400};
  c.config.balance_factor_percent = kFactors[rng() % 6];
  if (rng() % 3 == 0) c.config.max_in_flight_per_backend = 1 + rng() % 4;
  if (view == View::kFleet) c.config.server_load.emplace();
  // The key cache on a small list too, so that some picks read a cached
  // order (every backend READY, at most two weights).
  if (rng() % 2 == 0) {
    c.config.key_cache.enabled = true;
    c.config.key_cache.entries = 64;
  }
  // Mostly short lists; some past the walk's first survivor level and
  // past 512 candidates, where reading every load would be cheaper.
  const size_t r = rng() % 20;
  const size_t n = r < 16 ? 1 + rng() % 12 : r < 19 ? 13 + rng() % 100 : 600;
  // One weight, two, or several (the general path).
  const uint32_t kinds = static_cast<uint32_t>(1 + rng() % 4);
  const bool all_ready = rng() % 3 == 0;
  for (size_t i = 0; i < n; ++i) {
    c.weights.push_back(kinds == 4 ? static_cast<uint32_t>(1 + rng() % 9)
                                   : static_cast<uint32_t>(1 + rng() % kinds));
    BackendState state;
    state.routing = all_ready || rng() % 4 != 0 ? RoutingState::kReady
                                                : RoutingState::kFailed;
    c.states.push_back(state);
    c.loads.push_back(rng() % 3 == 0 ? 0 : rng() % 8);
    c.reports.push_back(view == View::kFleet && rng() % 2 == 0 ? rng() % 40
                                                               : 0);
  }
  return c;
}

class LoadViewProperty : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_now_ns = 1'000'000'000;
    SetFleetClockForTesting(&FakeNow);
  }
  void TearDown() override { SetFleetClockForTesting(nullptr); }

  // The channel's picker, its calls held, its reports stored.
  void Build(const Channel& c) {
    Config config = c.config;
    ASSERT_TRUE(NormalizeAndValidate(config).empty());
    config_ = std::make_shared<const Config>(std::move(config));
    held_.clear();
    set_ = BackendSet();
    std::vector<ResolverEntry> entries;
    for (size_t i = 0; i < c.weights.size(); ++i) {
      entries.push_back(Entry(AddressOf(i), c.weights[i]));
    }
    set_.Update(entries, *config_);
    for (size_t i = 0; i < c.loads.size(); ++i) {
      for (uint64_t k = 0; k < c.loads[i]; ++k) {
        held_.push_back(InFlightGuard::TryAcquireWithin(
            SharedCounter(set_.backends()[i].cell), InFlightCounter::kNoLimit));
      }
      if (c.reports[i] != 0) {
        BackendCell& cell = *set_.backends()[i].cell;
        cell.fleet().report.Store(c.reports[i], cell.in_flight->Load(),
                                  fake_now_ns.load());
      }
    }
    picker_ = std::make_unique<Picker>(config_, set_.list(), c.states, stats_);
  }

  // The contract's order of the READY backends, each one's load as the
  // channel's view sees it, and the view's L and W.
  struct Expected {
    std::vector<contract::Ranked> order;
    std::vector<uint64_t> load;
    uint64_t total = 0;
    uint64_t ready_weight = 0;
  };
  Expected Oracle(const Channel& c, std::string_view key) const {
    Expected e;
    std::vector<contract::LoadedCandidate> backends;
    std::vector<LoadPart> parts;
    for (size_t i = 0; i < c.weights.size(); ++i) {
      const bool ready = c.states[i].routing == RoutingState::kReady;
      backends.push_back({std::string(set_.backends()[i].identity),
                          c.weights[i], c.loads[i], ready});
      e.total += c.loads[i];
      if (!ready) continue;
      e.ready_weight += c.weights[i];
      // A report stored with this channel's count then: the others' part.
      const uint64_t others =
          c.reports[i] > c.loads[i] ? c.reports[i] - c.loads[i] : 0;
      parts.push_back({others, c.loads[i], c.weights[i]});
    }
    e.order = contract::Order(key, backends);
    e.load = c.loads;
    if (c.view == View::kFleet) {
      e.total += OthersPartOfL(parts, e.total, c.config.balance_factor_percent,
                               e.ready_weight);
      for (size_t i = 0; i < c.weights.size(); ++i) {
        if (c.reports[i] > c.loads[i]) e.load[i] = c.reports[i];
      }
    }
    return e;
  }

  static uint64_t CapacityOf(const Channel& c, const Expected& e, size_t i,
                             uint64_t total) {
    const UInt128 cap = contract::Capacity(c.config.balance_factor_percent,
                                           total, c.weights[i], e.ready_weight);
    return cap > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(cap);
  }
  static bool BelowLimit(const Channel& c, size_t i) {
    return !c.config.max_in_flight_per_backend.has_value() ||
           c.loads[i] < *c.config.max_in_flight_per_backend;
  }
  // The READY backends along the key's order with room by the view's bound
  // over `total` calls and by the hard limit (over this channel's own count,
  // the one the slot takes).
  static std::vector<size_t> WithRoom(const Channel& c, const Expected& e,
                                      uint64_t total) {
    std::vector<size_t> out;
    for (const contract::Ranked& r : e.order) {
      if ((c.view == View::kNone ||
           e.load[r.index] < CapacityOf(c, e, r.index, total)) &&
          BelowLimit(c, r.index)) {
        out.push_back(r.index);
      }
    }
    return out;
  }

  // The pick of attempt k + 1 as the contract and the rules say: the
  // (k mod m)-th of the m READY backends with room along the key's order
  // under L; with none, under the sum of their loads (K9: L was stale);
  // with none, the first below the limit past every bound; with none of
  // those, RESOURCE_EXHAUSTED.
  void ExpectPick(const Channel& c, std::string_view key, uint32_t k) {
    const Expected e = Oracle(c, key);
    uint64_t total = e.total;
    std::vector<size_t> with_room = WithRoom(c, e, total);
    if (with_room.empty()) {
      total = 0;
      for (const contract::Ranked& r : e.order) total += e.load[r.index];
      with_room = WithRoom(c, e, total);
    }
    std::optional<size_t> below_limit;
    for (const contract::Ranked& r : e.order) {
      if (!below_limit.has_value() && BelowLimit(c, r.index)) {
        below_limit = r.index;
      }
    }
    const PickOutcome outcome = picker_->Pick(PickRequest{key, k});
    const std::string where =
        "key " + std::string(key) + " attempt " + std::to_string(k + 1) +
        " of " + std::to_string(c.weights.size()) + " backends, view " +
        std::to_string(static_cast<int>(c.view)) + ", f " +
        std::to_string(c.config.balance_factor_percent);
    if (e.order.empty()) {
      ASSERT_TRUE(std::holds_alternative<PickOutcome::Fail>(outcome.result))
          << where;
      return;
    }
    if (with_room.empty() && !below_limit.has_value()) {
      const auto* f = std::get_if<PickOutcome::Fail>(&outcome.result);
      ASSERT_NE(f, nullptr) << where;
      EXPECT_EQ(f->status.code(), absl::StatusCode::kResourceExhausted)
          << where;
      ++checked_[3];
      return;
    }
    const auto* got = std::get_if<PickOutcome::Complete>(&outcome.result);
    const auto* failed = std::get_if<PickOutcome::Fail>(&outcome.result);
    ASSERT_NE(got, nullptr)
        << where << " "
        << (failed != nullptr ? failed->status.ToString() : "queued");
    const size_t expected =
        with_room.empty() ? *below_limit : with_room[k % with_room.size()];
    EXPECT_EQ(got->backend, expected) << where;
    EXPECT_EQ(got->spilled, k == 0 && expected != e.order[0].index) << where;
    // The bound it was held to: the one a backend's admission enforces.
    const uint64_t bound = with_room.empty() || c.view == View::kNone
                               ? 0
                               : CapacityOf(c, e, expected, total);
    EXPECT_EQ(got->bound, bound) << where;
    EXPECT_EQ(got->slot.held(), c.config.tracks_load()) << where;
    ++checked_[with_room.empty() ? 2 : total == e.total ? 0 : 1];
  }

  // A call without a key goes to some READY backend with room (a random
  // key's first), never past every bound while one has room.
  void ExpectKeyless(const Channel& c) {
    const Expected e = Oracle(c, "any");
    const std::vector<size_t> with_room = WithRoom(c, e, e.total);
    const PickOutcome outcome = picker_->Pick(PickRequest{std::nullopt, 0});
    if (with_room.empty()) return;  // the key decides what comes next
    const auto* got = std::get_if<PickOutcome::Complete>(&outcome.result);
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(std::count(with_room.begin(), with_room.end(), got->backend), 1)
        << got->backend;
  }

  // 400 random channels of `view`, four keys each at a random attempt,
  // each key picked twice (the second may read the key cache's order).
  void RunTrials(View view, uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int trial = 0; trial < 400; ++trial) {
      const Channel c = RandomChannel(rng, view);
      Build(c);
      if (HasFatalFailure()) return;
      for (int k = 0; k < 4; ++k) {
        const std::string key = "key-" + std::to_string(rng() % 100000);
        const auto attempts =
            static_cast<uint32_t>(rng() % 2 == 0 ? 0 : rng() % 6);
        for (int twice = 0; twice < 2; ++twice) {
          ExpectPick(c, key, attempts);
          if (HasFatalFailure()) return;
        }
      }
      ExpectKeyless(c);
    }
  }

  std::shared_ptr<const Config> config_;
  BackendSet set_;
  std::vector<InFlightGuard> held_;
  std::shared_ptr<PolicyStats> stats_ =
      std::make_shared<PolicyStats>("test", "policy");
  std::unique_ptr<Picker> picker_;
  // Picks checked with room under L, under the loads' sum, past every
  // bound, and failed with every READY backend at the limit.
  size_t checked_[4] = {0, 0, 0, 0};
};

bool AnyReport(const Channel& c) {
  for (const uint64_t r : c.reports) {
    if (r != 0) return true;
  }
  return false;
}

TEST_F(LoadViewProperty, WeightedRendezvousWalksTheContractsOrder) {
  RunTrials(View::kNone, 1);
  EXPECT_GT(checked_[0], 1000u);
  EXPECT_GT(checked_[3], 0u);  // every READY backend at the limit
}

TEST_F(LoadViewProperty, TheScopesCountsAgainstTheContractsBounds) {
  RunTrials(View::kScope, 2);
  EXPECT_GT(checked_[0], 1000u);
  EXPECT_GT(checked_[3], 0u);
}

// The limit is the hard rule, the bound is not: the backend with room at
// the limit (weight 10, 2 calls, bound 5), the other below the limit but
// over its bound (weight 1, 1 call, bound ceil(1.25 * 4 / 11) = 1). The
// call goes to the second, past its bound, on a first attempt and a retry.
TEST_F(LoadViewProperty, RoomOnlyAtTheLimitTakesTheFirstBelowItPastItsBound) {
  Channel c;
  c.view = View::kScope;
  c.config = ValidConfig(/*bounded=*/true);
  c.config.balance_factor_percent = 125;
  c.config.max_in_flight_per_backend = 2;
  c.weights = {10, 1};
  c.states.resize(2);
  for (BackendState& s : c.states) s.routing = RoutingState::kReady;
  c.loads = {2, 1};
  c.reports = {0, 0};
  Build(c);
  for (uint32_t k = 0; k < 3; ++k)
    ExpectPick(c, "tenant-" + std::to_string(k), k);
  EXPECT_EQ(checked_[2], 3u);
}

// Under serverLoad a first attempt follows the herding rule (random) where
// a backend's room shows only in its report; retries, and first attempts
// without any report, are the bound alone over the fleet's estimates.
TEST_F(LoadViewProperty, TheFleetsEstimatesAgainstTheContractsBounds) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 400; ++trial) {
    const Channel c = RandomChannel(rng, View::kFleet);
    Build(c);
    if (HasFatalFailure()) return;
    for (int k = 0; k < 4; ++k) {
      const std::string key = "key-" + std::to_string(rng() % 100000);
      const uint32_t attempts = AnyReport(c)
                                    ? static_cast<uint32_t>(1 + rng() % 5)
                                    : static_cast<uint32_t>(rng() % 3);
      ExpectPick(c, key, attempts);
      if (HasFatalFailure()) return;
    }
    if (!AnyReport(c)) ExpectKeyless(c);
  }
  EXPECT_GT(checked_[0], 1000u);
  EXPECT_GT(checked_[1], 0u);  // no room under L: the loads' sum
  EXPECT_GT(checked_[2], 0u);
}

}  // namespace
}  // namespace poise::router::test
