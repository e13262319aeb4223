// The pick rules against the core's own answers: the owner among READY
// backends, pending owners queueing, failed owners passing keys to their next
// READY choice, calls without a key, the hard limit and bounded spills, and
// every in-flight slot released exactly once.
#include "src/router/picker.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "poise/rendezvous.h"
#include "test/router/picker_fixture.h"
#include "test/router/router_test_util.h"

namespace poise::router {
namespace {

using test::CandidatesOf;
using test::States;
using test::ValidConfig;

const PickOutcome::Complete* Completed(const PickOutcome& outcome) {
  return std::get_if<PickOutcome::Complete>(&outcome.result);
}
PickOutcome::Complete* Completed(PickOutcome& outcome) {
  return std::get_if<PickOutcome::Complete>(&outcome.result);
}
const absl::Status* Failed(const PickOutcome& outcome) {
  const auto* fail = std::get_if<PickOutcome::Fail>(&outcome.result);
  return fail != nullptr ? &fail->status : nullptr;
}
bool Queued(const PickOutcome& outcome) {
  return std::holds_alternative<PickOutcome::Queue>(outcome.result);
}

class PickerTest : public test::PickerFixture {
 protected:
  void BuildReady(Config config, size_t n = 4) {
    Build(std::move(config), std::vector<uint32_t>(n, 1),
          States(n, RoutingState::kReady));
  }

  PickOutcome Pick(std::optional<std::string_view> key) const {
    return picker_->Pick(PickRequest{key});
  }
  // The backend a completed pick chose; -1 otherwise.
  int PickBackend(std::string_view key) const {
    const PickOutcome outcome = Pick(key);
    const PickOutcome::Complete* c = Completed(outcome);
    return c != nullptr ? static_cast<int>(c->backend) : -1;
  }

  // The core's answer over every backend, or over the READY ones.
  int OwnerAmongAll(std::string_view key) const {
    return static_cast<int>(
        WeightedRendezvous::Pick(key, CandidatesOf(set_.backends())).value());
  }
  int OwnerAmongReady(std::string_view key) const {
    return static_cast<int>(
        WeightedRendezvous::Pick(key, CandidatesOf(set_.backends(), states_))
            .value());
  }
  // A key whose owner over every backend is `backend`.
  std::string KeyOwnedBy(int backend) const {
    for (int k = 0;; ++k) {
      std::string key = "key-" + std::to_string(k);
      if (OwnerAmongAll(key) == backend) return key;
    }
  }
};

// ---------------------------------------------------------------------------
// Keyed picks

TEST_F(PickerTest, AKeyGoesToItsOwner) {
  for (const bool bounded : {false, true}) {
    for (const std::vector<uint32_t>& weights :
         {std::vector<uint32_t>{1, 1, 1, 1}, std::vector<uint32_t>{1, 3},
          std::vector<uint32_t>{1, 2, 3, 4, 5}}) {
      Build(ValidConfig(bounded), weights,
            States(weights.size(), RoutingState::kReady));
      for (int k = 0; k < 300; ++k) {
        const std::string key = "user-" + std::to_string(k);
        ASSERT_EQ(PickBackend(key), OwnerAmongAll(key))
            << key << " bounded " << bounded;
      }
    }
  }
}

TEST_F(PickerTest, WeightedRendezvousHoldsNoSlotAndCountsPicks) {
  BuildReady(ValidConfig());
  const PickOutcome outcome = Pick("k");
  const PickOutcome::Complete* c = Completed(outcome);
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->slot.held());
  EXPECT_FALSE(c->spilled);
  EXPECT_EQ(InFlight(c->backend), 0u);
  EXPECT_EQ(stats_->picks.load(), 1u);
  EXPECT_EQ(set_.backends()[c->backend].cell->picks.load(), 1u);
}

TEST_F(PickerTest, BoundedLoadRendezvousHoldsASlotUntilTheCallEnds) {
  BuildReady(ValidConfig(/*bounded=*/true));
  PickOutcome outcome = Pick("k");
  PickOutcome::Complete* c = Completed(outcome);
  ASSERT_NE(c, nullptr);
  EXPECT_TRUE(c->slot.held());
  EXPECT_EQ(InFlight(c->backend), 1u);
  c->slot.Release();
  EXPECT_EQ(InFlight(c->backend), 0u);
}

// ---------------------------------------------------------------------------
// Pending and failed owners

TEST_F(PickerTest, APendingOwnerQueuesItsKeysOnly) {
  for (const bool bounded : {false, true}) {
    std::vector<BackendState> states = States(4, RoutingState::kReady);
    states[2].routing = RoutingState::kPending;
    Build(ValidConfig(bounded), {1, 1, 1, 1}, states);
    EXPECT_TRUE(Queued(Pick(KeyOwnedBy(2)))) << bounded;
    for (int k = 0; k < 200; ++k) {
      const std::string key = "user-" + std::to_string(k);
      const int owner = OwnerAmongAll(key);
      const PickOutcome outcome = Pick(key);
      if (owner == 2) {
        EXPECT_TRUE(Queued(outcome)) << key;
      } else {
        ASSERT_NE(Completed(outcome), nullptr) << key;
        EXPECT_EQ(static_cast<int>(Completed(outcome)->backend), owner);
      }
    }
  }
}

TEST_F(PickerTest, AFailedOwnerPassesItsKeysToTheirNextReadyChoice) {
  for (const bool bounded : {false, true}) {
    // 0 failed, 1 pending: a key of 0 whose second choice is 1 must skip
    // it too (1 does not serve yet) and land on its first READY choice.
    std::vector<BackendState> states = States(4, RoutingState::kReady);
    states[0].routing = RoutingState::kFailed;
    states[1].routing = RoutingState::kPending;
    Build(ValidConfig(bounded), {1, 1, 1, 1}, states);
    int checked = 0;
    for (int k = 0; checked < 50; ++k) {
      const std::string key = "user-" + std::to_string(k);
      if (OwnerAmongAll(key) != 0) continue;
      ++checked;
      const int next = OwnerAmongReady(key);
      ASSERT_TRUE(next == 2 || next == 3);
      // The first READY backend in the key's order over every backend.
      const auto ranking =
          WeightedRendezvous::Ranking(key, CandidatesOf(set_.backends()));
      size_t r = 0;
      while (ranking.value()[r].index < 2) ++r;
      EXPECT_EQ(next, static_cast<int>(ranking.value()[r].index));
      EXPECT_EQ(PickBackend(key), next) << key << " bounded " << bounded;
    }
  }
}

TEST_F(PickerTest, NoReadyBackendFailsTheCallWithTheRouteError) {
  Build(ValidConfig(), {1, 1}, States(2, RoutingState::kFailed));
  const PickOutcome outcome = Pick("k");
  ASSERT_NE(Failed(outcome), nullptr);
  EXPECT_EQ(*Failed(outcome),
            absl::InternalError("poise: cannot route: no eligible candidates"));
  EXPECT_EQ(stats_->failed_picks.load(), 1u);
}

// ---------------------------------------------------------------------------
// Calls without a key

TEST_F(PickerTest, NoKeyRandomSpreadsAndNeverQueues) {
  for (const bool bounded : {false, true}) {
    std::vector<BackendState> states = States(4, RoutingState::kReady);
    states[3].routing = RoutingState::kPending;
    stats_ = std::make_shared<PolicyStats>("test", "policy");
    Build(ValidConfig(bounded), {1, 1, 1, 1}, states);
    std::set<size_t> seen;
    for (int i = 0; i < 300; ++i) {
      PickOutcome outcome = Pick(std::nullopt);
      ASSERT_NE(Completed(outcome), nullptr);  // a random key has no home
      seen.insert(Completed(outcome)->backend);
    }
    EXPECT_EQ(seen, (std::set<size_t>{0, 1, 2}));
    EXPECT_EQ(stats_->missing_key.load(), 300u);
    EXPECT_EQ(stats_->picks.load(), 300u);
    for (size_t b = 0; b < 4; ++b) EXPECT_EQ(InFlight(b), 0u);
  }
}

TEST_F(PickerTest, NoKeyFailNamesTheHeader) {
  Config config = ValidConfig(/*bounded=*/true);
  config.missing_key = MissingKey::kFail;
  BuildReady(config);
  const PickOutcome outcome = Pick(std::nullopt);
  ASSERT_NE(Failed(outcome), nullptr);
  EXPECT_EQ(*Failed(outcome),
            absl::InternalError("poise: the call has no \"x-session-id\" "
                                "header and missingKey is FAIL"));
  EXPECT_EQ(stats_->missing_key.load(), 1u);
  EXPECT_EQ(stats_->failed_picks.load(), 1u);
  EXPECT_EQ(stats_->picks.load(), 0u);
  // An empty value is a key like any other.
  EXPECT_NE(Completed(Pick("")), nullptr);
}

// ---------------------------------------------------------------------------
// The hard limit

TEST_F(PickerTest, TheHardLimitIsExact) {
  for (const bool bounded : {false, true}) {
    Config config = ValidConfig(bounded);
    config.max_in_flight_per_backend = 2;
    BuildReady(config);
    std::vector<PickOutcome> held;
    for (int i = 0; i < 8; ++i) {
      held.push_back(Pick("k" + std::to_string(i % 3)));
      ASSERT_NE(Completed(held.back()), nullptr) << bounded << " " << i;
      EXPECT_TRUE(Completed(held.back())->slot.held());
    }
    for (size_t b = 0; b < 4; ++b) EXPECT_EQ(InFlight(b), 2u);
    const PickOutcome refused = Pick("k0");
    ASSERT_NE(Failed(refused), nullptr);
    EXPECT_EQ(*Failed(refused),
              absl::ResourceExhaustedError("poise: every READY backend is at "
                                           "maxInFlightPerBackend (2 calls in "
                                           "flight)"));
    held.clear();
    for (size_t b = 0; b < 4; ++b) EXPECT_EQ(InFlight(b), 0u);
  }
}

TEST_F(PickerTest, AFullOwnerSendsTheKeyToItsNextChoiceWithRoom) {
  Config config = ValidConfig();
  config.max_in_flight_per_backend = 1;
  BuildReady(config);
  const std::string key = "hot";
  PickOutcome first = Pick(key);
  ASSERT_NE(Completed(first), nullptr);
  const size_t owner = Completed(first)->backend;
  PickOutcome second = Pick(key);
  ASSERT_NE(Completed(second), nullptr);
  std::vector<Candidate> rest = CandidatesOf(set_.backends());
  rest[owner].eligible = false;
  EXPECT_EQ(Completed(second)->backend,
            WeightedRendezvous::Pick(key, rest).value());
  EXPECT_TRUE(Completed(second)->spilled);
  EXPECT_EQ(stats_->spills.load(), 1u);
  EXPECT_EQ(set_.backends()[Completed(second)->backend]
                .cell->counts.Get()
                .spilled_in.load(),
            1u);
}

TEST_F(PickerTest, ConcurrentPicksNeverExceedTheLimit) {
  Config config = ValidConfig(/*bounded=*/true);
  config.max_in_flight_per_backend = 3;
  BuildReady(config);
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<PickOutcome> held;
      for (int i = 0; i < 4000; ++i) {
        PickOutcome outcome = Pick("k" + std::to_string((i + t) % 5));
        if (Failed(outcome) != nullptr) ++refused;
        held.push_back(std::move(outcome));
        if (held.size() == 4) held.clear();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t b = 0; b < 4; ++b) {
    EXPECT_LE(set_.backends()[b].cell->in_flight->Peak(), 3u);
    EXPECT_EQ(InFlight(b), 0u);
  }
  EXPECT_EQ(stats_->picks.load() + stats_->failed_picks.load(), 16000u);
  EXPECT_EQ(stats_->failed_picks.load(), static_cast<uint64_t>(refused));
}

// ---------------------------------------------------------------------------
// Bounded spills

// Under load, every pick equals the core's Decide over the READY backends
// with the loads of the moment.
// L is the load scope's total: calls still in flight on a backend that left
// READY count, so the READY backends' bounds are not computed as if the
// client had sent nothing there.
TEST_F(PickerTest, BoundsCountTheScopesCallsAlsoOnBackendsNotReady) {
  std::vector<BackendState> states = States(4, RoutingState::kReady);
  states[3].routing = RoutingState::kFailed;
  Build(ValidConfig(/*bounded=*/true), {1, 1, 1, 1}, states);
  std::vector<InFlightGuard> draining;  // 8 calls on the failed backend
  draining.reserve(8);
  for (int i = 0; i < 8; ++i) {
    draining.push_back(
        InFlightGuard::TryAcquire(SharedCounter(set_.backends()[3].cell)));
  }
  const std::string key = "user-1";
  const auto owner = static_cast<size_t>(OwnerAmongReady(key));
  PickOutcome first = Pick(key);  // L = 8: the owner is idle
  ASSERT_NE(Completed(first), nullptr);
  ASSERT_EQ(Completed(first)->backend, owner);
  // L = 9, W = 3: bound ceil(1.5 * 10 / 3) = 5, so the owner (1 call) has
  // room. From the READY loads alone (L = 1) it would be ceil(1.5 * 2 / 3)
  // = 1 and the key would spill.
  EXPECT_EQ(set_.load_scope()->total().Load(), 9u);
  PickOutcome second = Pick(key);
  ASSERT_NE(Completed(second), nullptr);
  EXPECT_EQ(Completed(second)->backend, owner);
  EXPECT_FALSE(Completed(second)->spilled);
  draining.clear();
  // L = 2 now: bound ceil(1.5 * 3 / 3) = 2, the owner holds 2: a spill.
  PickOutcome third = Pick(key);
  ASSERT_NE(Completed(third), nullptr);
  EXPECT_TRUE(Completed(third)->spilled);
}

TEST_F(PickerTest, BoundedPicksEqualDecide) {
  for (const std::vector<uint32_t>& weights :
       {std::vector<uint32_t>{1, 1, 1, 1, 1}, std::vector<uint32_t>{1, 2, 1},
        std::vector<uint32_t>{1, 2, 3, 4}}) {
    Config config = ValidConfig(/*bounded=*/true);
    config.balance_factor_percent = 100;
    std::vector<BackendState> states =
        States(weights.size(), RoutingState::kReady);
    states[0].routing = RoutingState::kFailed;  // load spreads over the rest
    Build(config, weights, states);
    const BoundedLoadRendezvous policy = *BoundedLoadRendezvous::Create(100);
    DecisionScratch scratch;
    const auto load = [this](size_t i) {
      return set_.backends()[i].cell->in_flight->Load();
    };
    std::vector<PickOutcome> held;
    int spills = 0;
    for (int k = 0; k < 400; ++k) {
      // Hot keys and cold keys: owners fill up and drain.
      const std::string key = k % 3 == 0 ? "hot" : "user-" + std::to_string(k);
      const Result<Decision> expected = policy.Decide(
          key, CandidatesOf(set_.backends(), states_), load, scratch);
      ASSERT_TRUE(expected.ok());
      PickOutcome outcome = Pick(key);
      ASSERT_NE(Completed(outcome), nullptr);
      EXPECT_EQ(Completed(outcome)->backend, expected.value().selection) << k;
      EXPECT_EQ(Completed(outcome)->spilled, expected.value().spilled) << k;
      spills += expected.value().spilled;
      held.push_back(std::move(outcome));
      if (k % 7 == 6) held.erase(held.begin(), held.begin() + 4);
    }
    EXPECT_GT(spills, 0);
    EXPECT_EQ(stats_->spills.load(), static_cast<uint64_t>(spills));
    held.clear();
    for (size_t b = 0; b < weights.size(); ++b) EXPECT_EQ(InFlight(b), 0u);
    stats_ = std::make_shared<PolicyStats>("test", "policy");
  }
}

// ---------------------------------------------------------------------------
// Slots

TEST_F(PickerTest, EverySlotIsReleasedExactlyOnce) {
  Config config = ValidConfig(/*bounded=*/true);
  config.max_in_flight_per_backend = 5;
  BuildReady(config, 2);
  {
    // Dropped without use: the call died before it started.
    const PickOutcome unused = Pick("a");
    ASSERT_NE(Completed(unused), nullptr);
    EXPECT_EQ(InFlight(0) + InFlight(1), 1u);
  }
  EXPECT_EQ(InFlight(0) + InFlight(1), 0u);
  PickOutcome outcome = Pick("a");
  ASSERT_NE(Completed(outcome), nullptr);
  const size_t b = Completed(outcome)->backend;
  InFlightGuard slot = std::move(Completed(outcome)->slot);
  EXPECT_FALSE(Completed(outcome)->slot.held());
  EXPECT_EQ(InFlight(b), 1u);
  InFlightGuard moved = std::move(slot);
  moved.Release();
  moved.Release();  // once only
  EXPECT_EQ(InFlight(b), 0u);
  outcome = PickOutcome{};  // nothing left to give back
  EXPECT_EQ(InFlight(b), 0u);
  // A cell outlives its list while a call holds it.
  PickOutcome late = Pick("a");
  picker_.reset();
  set_.Update({}, *config_);
  late = PickOutcome{};
  EXPECT_EQ(stats_->picks.load(), 3u);
}

}  // namespace
}  // namespace poise::router
