// Slow start without gRPC: its arithmetic, which backends go through it, and
// the routing properties over a whole slow start, on an injected clock.
#include "src/router/slow_start.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "poise/rendezvous.h"
#include "src/core/contract.h"
#include "src/router/backend_set.h"
#include "src/router/config.h"
#include "src/router/picker.h"
#include "src/router/stats_registry.h"
#include "test/router/router_test_util.h"

namespace poise::router {
namespace {

using test::Entries;
using test::States;
using test::ValidConfig;

const RampTime kT0 = RampTime::AfterOrigin(absl::Hours(1000));

SlowStartConfig Slow(absl::Duration window = absl::Seconds(60),
                     uint32_t min_percent = 10) {
  SlowStartConfig c;
  c.window = window;
  c.min_weight_percent = min_percent;
  return c;
}

TEST(SlowStartMath, StepsAreSmallEnoughAndBounded) {
  for (uint32_t m = 1; m <= 100; ++m) {
    const uint32_t n = SlowStart::StepsFor(m);
    EXPECT_GE(n, 20u);
    EXPECT_LE(n, 500u);
    // The worst step's share of the final keys (see slow_start.h).
    const double mf = m / 100.0;
    const double worst = mf < 0.5 ? 1 / (4 * mf * n) : (1 - mf) / n;
    EXPECT_LE(worst, 1.0 / 20 + 1e-12) << m;
  }
  EXPECT_EQ(SlowStart::StepsFor(10), 50u);
}

TEST(SlowStartMath, EffectiveWeightsAreExactMonotoneAndEndAtFull) {
  for (uint32_t w : {1u, 2u, 3u, 7u, 100u, 4194303u}) {
    const uint32_t s = SlowStart::ScaleFor(w);
    EXPECT_EQ(s, 1024u);
    const uint32_t n = SlowStart::StepsFor(10);
    EXPECT_EQ(SlowStart::EffectiveWeight(w, s, 10, 0, n),
              static_cast<uint32_t>(uint64_t{w} * s / 10));
    uint32_t previous = 0;
    for (uint32_t j = 0; j <= n; ++j) {
      const uint32_t e = SlowStart::EffectiveWeight(w, s, 10, j, n);
      EXPECT_GE(e, previous);
      EXPECT_GE(e, 1u);
      previous = e;
    }
    EXPECT_EQ(previous, w * s);
  }
  // Large weights: a smaller power of two, down to 1, and still >= 1.
  EXPECT_EQ(SlowStart::ScaleFor(4194304), 512u);
  EXPECT_EQ(SlowStart::ScaleFor(std::numeric_limits<uint32_t>::max()), 1u);
  EXPECT_EQ(SlowStart::EffectiveWeight(1, 1, 1, 0, 500), 1u);
  EXPECT_EQ(SlowStart::EffectiveWeight(std::numeric_limits<uint32_t>::max(), 1,
                                       100, 0, 20),
            std::numeric_limits<uint32_t>::max());
}

TEST(SlowStartMath, StepTimesRoundTrip) {
  const absl::Duration window = absl::Milliseconds(7);  // not divisible
  const uint32_t n = 50;
  for (uint32_t j = 0; j <= n; ++j) {
    const absl::Duration at = SlowStart::StepOffset(window, j, n);
    EXPECT_EQ(SlowStart::StepAt(window, at, n), j);
    if (j > 0) {
      EXPECT_EQ(SlowStart::StepAt(window, at - absl::Nanoseconds(1), n), j - 1);
    }
  }
}

// A channel of `old_count` backends serving from kT0, then `added` more.
struct Channel {
  explicit Channel(size_t old_count, SlowStartConfig slow = Slow())
      : slow_start(slow), entries(Entries(old_count)) {
    config.slow_start = slow;
    set.Update(entries, config);
    states = States(set.size(), RoutingState::kReady);
    const SlowStart::Weights w = slow_start.Observe(*set.list(), states, kT0);
    EXPECT_FALSE(w.in_progress());
    EXPECT_EQ(w.scale, 1u);
  }
  // Adds backends, pending, then READY at `at`.
  SlowStart::Weights Add(size_t count, RampTime at) {
    const size_t first = entries.size();
    entries = Entries(first + count);
    set.Update(entries, config);
    states.resize(set.size());  // pending
    slow_start.Observe(*set.list(), states, at);
    for (size_t i = first; i < states.size(); ++i) {
      states[i].routing = RoutingState::kReady;
    }
    return slow_start.Observe(*set.list(), states, at);
  }
  std::vector<size_t> Owners(const SlowStart::Weights& w, size_t keys) const {
    auto cfg = std::make_shared<const Config>(config);
    Picker picker(cfg, set.list(), states,
                  std::make_shared<PolicyStats>("t", "weighted_rendezvous"),
                  w.effective);
    std::vector<size_t> owners(keys);
    for (size_t k = 0; k < keys; ++k) {
      const std::string key = "key-" + std::to_string(k);
      PickOutcome out = picker.Pick(PickRequest{key});
      owners[k] = std::get<PickOutcome::Complete>(out.result).backend;
    }
    return owners;
  }

  SlowStart slow_start;
  Config config = ValidConfig();
  std::vector<ResolverEntry> entries;
  BackendSet set;
  std::vector<BackendState> states;
};

// Slow start's promises over a whole 4 -> 5 scale-out, every step, 100k keys.
TEST(SlowStartObserve, EveryStepIsTheCoresDecisionAndNoKeyMovesTwice) {
  constexpr size_t kKeys = 100'000;
  Channel channel(4);
  const std::vector<size_t> before = channel.Owners(
      channel.slow_start.Observe(*channel.set.list(), channel.states, kT0),
      kKeys);
  const RampTime start = kT0 + absl::Seconds(5);
  SlowStart::Weights w = channel.Add(1, start);
  ASSERT_TRUE(w.in_progress());
  EXPECT_EQ(w.scale, 1024u);
  const uint32_t n = SlowStart::StepsFor(10);
  std::vector<size_t> previous = before;
  std::vector<int> moves(kKeys, 0);
  size_t final_on_new = 0;
  std::vector<size_t> moved_per_step;
  for (uint32_t j = 0; j <= n; ++j) {
    const RampTime now = start + SlowStart::StepOffset(absl::Seconds(60), j, n);
    w = channel.slow_start.Observe(*channel.set.list(), channel.states, now);
    if (j < n) {
      ASSERT_TRUE(w.progress[4].has_value());
      EXPECT_EQ(w.progress[4]->step, j);
      EXPECT_EQ(*w.next_step,
                start + SlowStart::StepOffset(absl::Seconds(60), j + 1, n));
      EXPECT_EQ(w.effective[4], SlowStart::EffectiveWeight(1, 1024, 10, j, n));
      for (size_t i = 0; i < 4; ++i) EXPECT_EQ(w.effective[i], 1024u);
    } else {
      EXPECT_FALSE(w.in_progress());
      EXPECT_EQ(w.scale, 1u);
    }
    const std::vector<size_t> owners = channel.Owners(w, kKeys);
    // The core's decision with this step's effective weights.
    std::vector<Candidate> candidates =
        test::CandidatesOf(channel.set.backends());
    for (size_t i = 0; i < candidates.size(); ++i) {
      candidates[i].weight = w.effective[i];
    }
    size_t moved = 0;
    for (size_t k = 0; k < kKeys; ++k) {
      const std::string key = "key-" + std::to_string(k);
      ASSERT_EQ(owners[k], WeightedRendezvous::Pick(key, candidates).value());
      if (owners[k] != previous[k]) {
        ++moved;
        ++moves[k];
        // Only ever onto the new backend, from the key's old owner.
        ASSERT_EQ(owners[k], 4u) << key;
        ASSERT_EQ(previous[k], before[k]) << key;
      }
      if (owners[k] != 4) {
        ASSERT_EQ(owners[k], before[k]) << key;
      }
    }
    moved_per_step.push_back(moved);
    previous = owners;
  }
  for (size_t k = 0; k < kKeys; ++k) {
    ASSERT_LE(moves[k], 1);
    final_on_new += previous[k] == 4 ? 1 : 0;
  }
  // No step moves more than ~1/20 of the new backend's final keys (the
  // jump to minWeightPercent at step 0 is the start, not a step).
  for (size_t j = 1; j < moved_per_step.size(); ++j) {
    EXPECT_LE(moved_per_step[j], final_on_new / 20 + final_on_new / 200) << j;
  }
  EXPECT_NEAR(static_cast<double>(final_on_new) / kKeys, 0.2, 0.01);
  // At the end: exactly the contract with the full weights.
  std::vector<contract::LoadedCandidate> full;
  for (const ListedBackend& b : channel.set.backends()) {
    full.push_back({std::string(b.identity), b.weight, 0, true});
  }
  for (size_t k = 0; k < 20'000; ++k) {
    const std::string key = "key-" + std::to_string(k);
    ASSERT_EQ(previous[k], contract::Pick(key, full).value()) << key;
  }
}

TEST(SlowStartObserve, BoundedCapacityUsesTheEffectiveWeights) {
  Channel channel(4);
  channel.config.bounded = true;
  const SlowStart::Weights w = channel.Add(1, kT0 + absl::Seconds(1));
  ASSERT_TRUE(w.in_progress());
  auto cfg = std::make_shared<const Config>(channel.config);
  Picker picker(cfg, channel.set.list(), channel.states,
                std::make_shared<PolicyStats>("t", "bounded_load_rendezvous"),
                w.effective);
  // Hold one call on every backend: the new one's capacity,
  // ceil(1.5 * 6 * e / W) with e = 102 of W = 4198, is 1, so it is full,
  // while at its full weight (capacity 2) it would have room.
  std::vector<PickOutcome> held;
  std::vector<bool> busy(5, false);
  for (size_t k = 0; held.size() < 5 && k < 100'000; ++k) {
    const std::string key = "h" + std::to_string(k);
    PickOutcome out = picker.Pick(PickRequest{key});
    auto& c = std::get<PickOutcome::Complete>(out.result);
    if (!busy[c.backend] && !c.spilled) {
      busy[c.backend] = true;
      held.push_back(std::move(out));
    } else {
      c.slot.Release();
    }
  }
  ASSERT_EQ(held.size(), 5u);
  std::vector<Candidate> candidates =
      test::CandidatesOf(channel.set.backends());
  for (size_t i = 0; i < 5; ++i) candidates[i].weight = w.effective[i];
  for (size_t k = 0; k < 5'000; ++k) {
    const std::string key = "q" + std::to_string(k);
    if (WeightedRendezvous::Pick(key, candidates).value() != 4) continue;
    PickOutcome out = picker.Pick(PickRequest{key});
    auto& c = std::get<PickOutcome::Complete>(out.result);
    EXPECT_NE(c.backend, 4u) << key;
    EXPECT_TRUE(c.spilled);
    return;
  }
  FAIL() << "no key of the backend in slow start";
}

TEST(SlowStartObserve, BackendsPresentAtTheStartSkipSlowStart) {
  Config config = ValidConfig();
  BackendSet set;
  set.Update(Entries(4), config);
  SlowStart slow(Slow());
  std::vector<BackendState> states = States(4, RoutingState::kPending);
  EXPECT_FALSE(slow.Observe(*set.list(), states, kT0).in_progress());
  states[0].routing = RoutingState::kReady;
  EXPECT_FALSE(slow.Observe(*set.list(), states, kT0).in_progress());
  for (auto& s : states) s.routing = RoutingState::kReady;
  EXPECT_FALSE(
      slow.Observe(*set.list(), states, kT0 + absl::Seconds(3)).in_progress());
}

TEST(SlowStartObserve, AShortFailureKeepsTheStepALongOneRestartsSlowStart) {
  Channel channel(4);
  const RampTime start = kT0 + absl::Seconds(1);
  channel.Add(1, start);
  auto observe = [&](absl::Duration after) {
    return channel.slow_start.Observe(*channel.set.list(), channel.states,
                                      start + after);
  };
  channel.states[4].routing = RoutingState::kFailed;
  EXPECT_EQ(observe(absl::Seconds(12)).progress[4]->step, 10u);
  channel.states[4].routing = RoutingState::kReady;
  // Back after 18 s: slow start ran on, at 30 s it is at step 25.
  EXPECT_EQ(observe(absl::Seconds(30)).progress[4]->step, 25u);
  EXPECT_FALSE(observe(absl::Seconds(60)).in_progress());
  // A warm backend down for a whole window starts slow start from step 0.
  channel.states[1].routing = RoutingState::kFailed;
  EXPECT_FALSE(observe(absl::Seconds(70)).in_progress());
  channel.states[1].routing = RoutingState::kReady;
  SlowStart::Weights w = observe(absl::Seconds(130));
  ASSERT_TRUE(w.progress[1].has_value());
  EXPECT_EQ(w.progress[1]->step, 0u);
  EXPECT_EQ(w.effective[1], 102u);
  // Down for less than a window: no slow start.
  channel.states[2].routing = RoutingState::kFailed;
  observe(absl::Seconds(131));
  channel.states[2].routing = RoutingState::kReady;
  EXPECT_FALSE(observe(absl::Seconds(190)).progress[2].has_value());
}

TEST(SlowStartObserve, RemovedAndBackWithinTheWindowKeepsItsStepElseRestarts) {
  Channel channel(4);
  const RampTime start = kT0 + absl::Seconds(1);
  channel.Add(1, start);
  Config& config = channel.config;
  // Removed at 12 s, back at 24 s: on at step 20.
  std::vector<ResolverEntry> four = Entries(4);
  channel.entries = four;
  channel.set.Update(four, config);
  channel.states.resize(4);
  EXPECT_FALSE(channel.slow_start
                   .Observe(*channel.set.list(), channel.states,
                            start + absl::Seconds(12))
                   .in_progress());
  SlowStart::Weights w = channel.Add(1, start + absl::Seconds(24));
  ASSERT_TRUE(w.progress[4].has_value());
  EXPECT_EQ(w.progress[4]->step, 20u);
  // Removed at 30 s, back after a window: from step 0 again.
  channel.entries = four;
  channel.set.Update(four, config);
  channel.states.resize(4);
  channel.slow_start.Observe(*channel.set.list(), channel.states,
                             start + absl::Seconds(30));
  channel.slow_start.Observe(*channel.set.list(), channel.states,
                             start + absl::Seconds(95));  // forgotten
  w = channel.Add(1, start + absl::Seconds(100));
  ASSERT_TRUE(w.progress[4].has_value());
  EXPECT_EQ(w.progress[4]->step, 0u);
}

TEST(SlowStartObserve, LargeWeightsScaleDownAndStayWithin32Bits) {
  Config config = ValidConfig();
  BackendSet set;
  SlowStart slow(Slow());
  std::vector<ResolverEntry> entries = {
      test::Entry(test::AddressOf(0), std::numeric_limits<uint32_t>::max()),
      test::Entry(test::AddressOf(1), 1)};
  set.Update({entries[0]}, config);
  std::vector<BackendState> states = States(1, RoutingState::kReady);
  slow.Observe(*set.list(), states, kT0);
  set.Update(entries, config);
  states = States(2, RoutingState::kReady);
  const SlowStart::Weights w = slow.Observe(*set.list(), states, kT0);
  ASSERT_TRUE(w.in_progress());
  EXPECT_EQ(w.scale, 1u);
  EXPECT_EQ(w.effective[0], std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(w.effective[1], 1u);
}

TEST(SlowStartConfig, RejectedValuesNameTheField) {
  Config config = ValidConfig();
  config.slow_start = Slow(absl::ZeroDuration(), 0);
  std::vector<ConfigError> errors = NormalizeAndValidate(config);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "slowStart.window");
  EXPECT_EQ(errors[1].field, "slowStart.minWeightPercent");
  config.slow_start = Slow(absl::Hours(1) + absl::Milliseconds(1), 101);
  errors = NormalizeAndValidate(config);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "slowStart.window");
  config.slow_start = Slow(absl::Hours(1), 100);
  EXPECT_TRUE(NormalizeAndValidate(config).empty());
}

}  // namespace
}  // namespace poise::router
