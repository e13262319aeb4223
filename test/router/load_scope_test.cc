// Load scopes: counters by identity and their total, shared by name across
// channels (loadScope PROCESS) or a channel's own (CHANNEL); and several
// channels' pickers driving the same traffic under either scope.
#include "src/router/load_scope.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "poise/rendezvous.h"
#include "src/router/backend_set.h"
#include "src/router/picker.h"
#include "src/router/stats_registry.h"
#include "test/router/router_test_util.h"

namespace poise::router {
namespace {

using test::AddressOf;
using test::Entry;
using test::States;
using test::ValidConfig;

// ---------------------------------------------------------------------------
// The scope itself

TEST(LoadScope, ANamedScopeIsOneObjectWhileHeld) {
  std::shared_ptr<LoadScope> a = LoadScope::Named("load-scope-test-a");
  EXPECT_EQ(LoadScope::Named("load-scope-test-a"), a);
  EXPECT_NE(LoadScope::Named("load-scope-test-b"), a);
  EXPECT_TRUE(a->named());
  EXPECT_EQ(a->name(), "load-scope-test-a");
  std::weak_ptr<LoadScope> weak = a;
  a.reset();
  EXPECT_TRUE(weak.expired());  // the registry holds it weakly
}

TEST(LoadScope, ScopesOfTheirOwnAreDistinct) {
  std::shared_ptr<LoadScope> a = LoadScope::Create();
  std::shared_ptr<LoadScope> b = LoadScope::Create();
  EXPECT_NE(a, b);
  EXPECT_FALSE(a->named());
  auto cell = std::make_shared<BackendCell>(a);  // counts into a's total
  InFlightGuard call = InFlightGuard::TryAcquire(SharedCounter(cell));
  EXPECT_EQ(a->total().Load(), 1u);
  EXPECT_EQ(b->total().Load(), 0u);
}

TEST(LoadScope, ACounterIsFoundByIdentityWhileHeldAndCountsIntoTheTotal) {
  std::shared_ptr<LoadScope> scope = LoadScope::Named("load-scope-test-find");
  std::shared_ptr<InFlightCounter> x = scope->SharedCounterFor("x");
  EXPECT_EQ(scope->SharedCounterFor("x"), x);
  std::shared_ptr<InFlightCounter> y = scope->SharedCounterFor("y");
  EXPECT_NE(x, y);
  InFlightGuard one = InFlightGuard::TryAcquire(x);
  InFlightGuard two = InFlightGuard::TryAcquire(y);
  InFlightGuard three = InFlightGuard::TryAcquire(y);
  EXPECT_EQ(scope->total().Load(), 3u);
  EXPECT_EQ(scope->findable_counters(), 2u);
  x.reset();  // the guard still holds it
  EXPECT_EQ(scope->SharedCounterFor("x")->Load(), 1u);
  one.Release();
  two.Release();
  three.Release();
  EXPECT_EQ(scope->total().Load(), 0u);
  EXPECT_EQ(scope->findable_counters(), 1u);  // y
  y.reset();
  EXPECT_EQ(scope->findable_counters(), 0u);
  EXPECT_EQ(scope->SharedCounterFor("x")->Load(), 0u);  // a new one
}

TEST(LoadScope, AScopeOfItsOwnFindsOnlyParkedCountersWithCallsInFlight) {
  std::shared_ptr<LoadScope> scope = LoadScope::Create();
  auto cell = std::make_shared<BackendCell>(scope);
  EXPECT_EQ(scope->SharedCounterFor("x"), nullptr);  // its set carries it
  scope->KeepFindableWhileInFlight(
      "x", SharedCounter(cell));  // idle: nothing to keep
  EXPECT_EQ(scope->findable_counters(), 0u);
  InFlightGuard call = InFlightGuard::TryAcquire(SharedCounter(cell));
  scope->KeepFindableWhileInFlight("x", SharedCounter(cell));
  cell.reset();  // only the call holds it now
  EXPECT_EQ(scope->findable_counters(), 1u);
  std::shared_ptr<InFlightCounter> back = scope->SharedCounterFor("x");
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->Load(), 1u);                // the same counter
  EXPECT_EQ(scope->findable_counters(), 0u);  // listed again
  call.Release();
  EXPECT_EQ(scope->total().Load(), 0u);
}

TEST(LoadScope, ACounterKeepsItsScopeAlive) {
  std::weak_ptr<LoadScope> weak;
  InFlightGuard call;
  {
    std::shared_ptr<LoadScope> scope = LoadScope::Named("load-scope-test-c");
    weak = scope;
    call = InFlightGuard::TryAcquire(scope->SharedCounterFor("x"));
  }
  ASSERT_FALSE(weak.expired());
  EXPECT_EQ(weak.lock()->total().Load(), 1u);
  EXPECT_EQ(LoadScope::Named("load-scope-test-c"), weak.lock());
  call.Release();  // the last holder
  EXPECT_TRUE(weak.expired());
}

TEST(LoadScope, ScopeForKeepsTheRightScopeAndSwitchesKinds) {
  std::shared_ptr<LoadScope> own =
      LoadScopeForChannel(LoadScopeKind::kChannel, "t", {});
  EXPECT_FALSE(own->named());
  EXPECT_EQ(LoadScopeForChannel(LoadScopeKind::kChannel, "t", own), own);
  std::shared_ptr<LoadScope> shared =
      LoadScopeForChannel(LoadScopeKind::kProcess, "load-scope-test-t", own);
  EXPECT_TRUE(shared->named());
  EXPECT_EQ(
      LoadScopeForChannel(LoadScopeKind::kProcess, "load-scope-test-t", shared),
      shared);
  EXPECT_NE(
      LoadScopeForChannel(LoadScopeKind::kProcess, "load-scope-test-u", shared),
      shared);
  EXPECT_FALSE(
      LoadScopeForChannel(LoadScopeKind::kChannel, "t", shared)->named());
}

TEST(LoadScope, ManyThreadsLookingUpAndCountingAgree) {
  std::shared_ptr<LoadScope> scope = LoadScope::Named("load-scope-test-mt");
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([t]() {
      std::shared_ptr<LoadScope> mine = LoadScope::Named("load-scope-test-mt");
      for (int k = 0; k < 2000; ++k) {
        InFlightGuard g = InFlightGuard::TryAcquire(
            mine->SharedCounterFor("id-" + std::to_string((t * 7 + k) % 13)));
        EXPECT_TRUE(g.held());
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(scope->total().Load(), 0u);
  EXPECT_LE(scope->findable_counters(), 13u);
}

// ---------------------------------------------------------------------------
// Channels sharing a scope

// `channels` channels over the same backends (weights `weights`, all READY),
// each counting in its own scope or all in one named scope; calls picked in
// turn and each channel's oldest call ended once it holds `per_channel`.
class Channels {
 public:
  Channels(size_t channels, const std::vector<uint32_t>& weights,
           bool process_scope, const std::string& scope_name)
      : weights_(weights) {
    Config config = ValidConfig(/*bounded=*/true);
    EXPECT_TRUE(NormalizeAndValidate(config).empty());
    config.load_scope =
        process_scope ? LoadScopeKind::kProcess : LoadScopeKind::kChannel;
    config_ = std::make_shared<const Config>(config);
    std::vector<ResolverEntry> entries;
    for (size_t i = 0; i < weights.size(); ++i) {
      entries.push_back(Entry(AddressOf(i), weights[i]));
    }
    channels_.resize(channels);
    for (Channel& c : channels_) {
      c.set.SetLoadScope(LoadScopeForChannel(config.load_scope, scope_name,
                                             c.set.load_scope()));
      c.set.Update(entries, config);
      c.stats = std::make_shared<PolicyStats>(scope_name, "bounded");
      c.picker = std::make_unique<Picker>(
          config_, c.set.list(), States(weights.size(), RoutingState::kReady),
          c.stats);
    }
  }

  // Every backend's calls in flight over all channels.
  uint64_t LoadOf(size_t backend) const {
    if (channels_[0].set.load_scope()->named()) {
      return channels_[0].set.backends()[backend].cell->in_flight->Load();
    }
    uint64_t load = 0;
    for (const Channel& c : channels_) {
      load += c.set.backends()[backend].cell->in_flight->Load();
    }
    return load;
  }
  uint64_t TotalLoad() const {
    uint64_t total = 0;
    for (size_t b = 0; b < weights_.size(); ++b) total += LoadOf(b);
    return total;
  }
  // The bound of `backend` over all channels' calls, `total` of them.
  uint64_t ProcessWideBound(size_t backend, uint64_t total) const {
    uint64_t w_sum = 0;
    for (uint32_t w : weights_) w_sum += w;
    return static_cast<uint64_t>(BoundedLoadRendezvous::Capacity(
        config_->balance_factor_percent, total, weights_[backend], w_sum));
  }

  struct Result {
    uint64_t picks = 0;
    uint64_t spills = 0;
    // Picks that went to a backend already at its process-wide bound.
    uint64_t over_bound = 0;
    std::vector<uint64_t> most;  // per backend, the highest load after a pick
  };
  // `steps` picks of `key_for(channel, step)`, channel after channel, each
  // channel ending its oldest call first once it holds `per_channel`.
  template <typename KeyFor>
  Result Drive(size_t per_channel, size_t steps, KeyFor key_for) {
    Result r;
    r.most.assign(weights_.size(), 0);
    for (size_t step = 0; step < steps; ++step) {
      const size_t channel = step % channels_.size();
      Channel& c = channels_[channel];
      if (c.calls.size() == per_channel) c.calls.pop_front();  // ends
      const uint64_t total = TotalLoad();
      std::vector<uint64_t> loads;
      for (size_t b = 0; b < weights_.size(); ++b) loads.push_back(LoadOf(b));
      PickOutcome outcome = c.picker->Pick(PickRequest{key_for(channel, step)});
      auto* done = std::get_if<PickOutcome::Complete>(&outcome.result);
      if (done == nullptr) {
        ADD_FAILURE() << "pick " << step << " did not complete";
        continue;
      }
      ++r.picks;
      r.spills += done->spilled ? 1 : 0;
      r.over_bound +=
          loads[done->backend] >= ProcessWideBound(done->backend, total) ? 1
                                                                         : 0;
      r.most[done->backend] =
          std::max(r.most[done->backend], loads[done->backend] + 1);
      c.calls.push_back(std::move(done->slot));
    }
    return r;
  }

  // The first key "hot-<i>" whose owner is `backend`.
  std::string KeyOwnedBy(size_t backend) const {
    const std::vector<Candidate> all =
        test::CandidatesOf(channels_[0].set.backends());
    for (int i = 0;; ++i) {
      std::string key = "hot-" + std::to_string(i);
      if (WeightedRendezvous::Pick(key, all).value() == backend) return key;
    }
  }

  // Ends channel `i`'s calls, then drops its picker and backend list.
  void Close(size_t i) {
    Channel& c = channels_[i];
    c.calls.clear();
    c.picker.reset();
    c.set.Clear();
  }
  size_t size() const { return channels_.size(); }
  const Picker& picker(size_t i) const { return *channels_[i].picker; }
  const BackendSet& set(size_t i) const { return channels_[i].set; }

 private:
  struct Channel {
    BackendSet set;
    std::shared_ptr<PolicyStats> stats;
    std::unique_ptr<Picker> picker;
    std::deque<InFlightGuard> calls;
  };
  std::shared_ptr<const Config> config_;
  std::vector<uint32_t> weights_;
  std::vector<Channel> channels_;
};

// One hot key, 4 channels, 16 calls in flight in all. Each channel's own
// bounds let the owner take more than its share of the process-wide bound
// (the sum of four rounded-up bounds over four L + 1 is more than one); the
// process scope holds every backend to the bound of all 16 calls.
TEST(LoadScopeChannels, AHotKeyFromFourChannelsStaysWithinTheProcessWideBound) {
  const std::vector<uint32_t> weights = {1, 2, 3, 6};
  for (const size_t owner : {0u, 3u}) {
    Channels::Result result[2];
    for (const bool process : {false, true}) {
      Channels channels(4, weights, process, "load-scope-test-hot");
      const std::string key = channels.KeyOwnedBy(owner);
      result[process] =
          channels.Drive(4, 4000, [&](size_t, size_t) { return key.c_str(); });
    }
    const Channels::Result& by_channel = result[0];
    const Channels::Result& by_process = result[1];
    EXPECT_EQ(by_process.over_bound, 0u) << "owner " << owner;
    EXPECT_EQ(by_process.picks, 4000u);
    // Weight 1 of 12: each channel's bound is ceil(1.5 * 4 / 12) = 1, so the
    // owner holds 4 calls; the process-wide bound is ceil(1.5 * 16 / 12) = 2.
    if (owner == 0) {
      EXPECT_GT(by_channel.over_bound, 0u);
      EXPECT_EQ(by_channel.most[0], 4u);
      EXPECT_EQ(by_process.most[0], 2u);
    }
    ::testing::Test::RecordProperty(
        "hot_key_owner_" + std::to_string(owner) + "_spills_channel_process",
        std::to_string(by_channel.spills) + "/" +
            std::to_string(by_process.spills) + " of 4000, over the bound " +
            std::to_string(by_channel.over_bound) + "/" +
            std::to_string(by_process.over_bound));
  }
}

// A hot key on one channel while three others carry spread keys, 16 calls in
// flight in all: the hot channel's own L counts only its 4 calls, so its
// owner's bound stays at 1 or 2 although the backends carry 16; the process
// scope bounds it by all 16 and spills far less, still within the bound.
TEST(LoadScopeChannels, AHotKeyOnOneOfFourChannelsSpillsLessInTheProcessScope) {
  const std::vector<uint32_t> weights = {1, 2, 3, 6};
  Channels::Result result[2];
  for (const bool process : {false, true}) {
    Channels channels(4, weights, process, "load-scope-test-uneven");
    const std::string hot = channels.KeyOwnedBy(1);
    result[process] = channels.Drive(4, 40000, [&](size_t c, size_t step) {
      return c == 0 ? hot : "k" + std::to_string(step * 7919 % 1000);
    });
  }
  EXPECT_EQ(result[1].over_bound, 0u);
  EXPECT_GT(result[0].over_bound, 0u);
  EXPECT_LT(result[1].spills * 2, result[0].spills)
      << "process " << result[1].spills << ", channel " << result[0].spills;
  ::testing::Test::RecordProperty(
      "uneven_spills_channel_process",
      std::to_string(result[0].spills) + "/" +
          std::to_string(result[1].spills) + " of 40000, over the bound " +
          std::to_string(result[0].over_bound) + "/" +
          std::to_string(result[1].over_bound));
}

// The same channels picking at once, one thread each (as channels do: gRPC
// serialises picks per channel, not across them). A bound checked when the
// choice is made could be overtaken by another channel's slot; it is held
// at the slot, so no backend's count ever passes the bound of all 16 calls.
TEST(LoadScopeChannels, ChannelsPickingAtOnceHoldTheBoundAtTheSlot) {
  const std::vector<uint32_t> weights = {1, 2, 3, 6};
  Channels channels(4, weights, true, "load-scope-test-race");
  const std::string key = channels.KeyOwnedBy(0);
  std::vector<std::thread> threads;
  threads.reserve(channels.size());
  for (size_t c = 0; c < channels.size(); ++c) {
    threads.emplace_back([&channels, &key, c] {
      const Picker& picker = channels.picker(c);
      std::deque<InFlightGuard> calls;
      for (int i = 0; i < 20000; ++i) {
        if (calls.size() == 4) calls.pop_front();
        PickOutcome outcome = picker.Pick(PickRequest{key});
        auto* done = std::get_if<PickOutcome::Complete>(&outcome.result);
        ASSERT_NE(done, nullptr);
        calls.push_back(std::move(done->slot));
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t b = 0; b < weights.size(); ++b) {
    const InFlightCounter& counter =
        *channels.set(0).backends()[b].cell->in_flight;
    // L + 1 <= 16 at every pick.
    EXPECT_LE(counter.Peak(), channels.ProcessWideBound(b, 15)) << b;
    EXPECT_EQ(counter.Load(), 0u);
  }
  EXPECT_EQ(channels.set(0).load_scope()->total().Load(), 0u);
}

// Channels close in every order, calls still in flight on some: every
// counter and the scope's total end at zero, and the scope goes with its
// last holder.
TEST(LoadScopeChannels, CountersReturnToZeroWhenChannelsCloseInAnyOrder) {
  const std::vector<size_t> orders[] = {
      {0, 1, 2, 3}, {3, 2, 1, 0}, {2, 0, 3, 1}};
  for (const std::vector<size_t>& order : orders) {
    std::weak_ptr<LoadScope> weak;
    {
      auto channels = std::make_unique<Channels>(
          4, std::vector<uint32_t>{1, 1, 1}, true, "load-scope-test-close");
      channels->Drive(4, 64, [](size_t c, size_t step) {
        return "k" + std::to_string(c * 100 + step);
      });
      const LoadScope& scope = *channels->set(0).load_scope();
      weak = channels->set(0).load_scope();
      ASSERT_EQ(scope.total().Load(), 16u);
      uint64_t expected = 16;
      for (const size_t c : order) {
        channels->Close(c);
        expected -= 4;  // the closed channel's calls ended
        EXPECT_EQ(scope.total().Load(), expected);
      }
      EXPECT_EQ(scope.findable_counters(), 0u);
    }
    EXPECT_TRUE(weak.expired());
  }
}

// A weighted channel and a bounded one in one process scope: the weighted
// channel's calls count in the scope too (they hold slots, although it reads
// no loads), so the bounded channel sees them on the owner and spills.
TEST(LoadScopeChannels,
     AWeightedChannelsCallsCountForABoundedChannelInTheScope) {
  const std::string scope_name = "load-scope-test-mixed";
  std::vector<ResolverEntry> entries;
  for (size_t i = 0; i < 5; ++i) entries.push_back(Entry(AddressOf(i), 1));
  struct Channel {
    BackendSet set;
    std::unique_ptr<Picker> picker;
  };
  Channel channels[2];  // [0] weighted, [1] bounded
  for (const bool bounded : {false, true}) {
    Config config = ValidConfig(bounded);
    config.load_scope = LoadScopeKind::kProcess;
    config.balance_factor_percent = 100;
    ASSERT_TRUE(NormalizeAndValidate(config).empty());
    Channel& c = channels[bounded];
    c.set.SetLoadScope(
        LoadScopeForChannel(config.load_scope, scope_name, c.set.load_scope()));
    c.set.Update(entries, config);
    c.picker = std::make_unique<Picker>(
        std::make_shared<const Config>(config), c.set.list(),
        States(entries.size(), RoutingState::kReady),
        std::make_shared<PolicyStats>(scope_name,
                                      bounded ? "bounded" : "weighted"));
  }
  const std::string key = "tenant-42";
  std::vector<InFlightGuard> weighted_calls;
  size_t owner = SIZE_MAX;
  for (int i = 0; i < 6; ++i) {
    PickOutcome outcome = channels[0].picker->Pick(PickRequest{key});
    auto* done = std::get_if<PickOutcome::Complete>(&outcome.result);
    ASSERT_NE(done, nullptr);
    EXPECT_TRUE(done->slot.held()) << "weighted call " << i;
    owner = done->backend;
    weighted_calls.push_back(std::move(done->slot));
  }
  const LoadScope& scope = *channels[0].set.load_scope();
  EXPECT_EQ(&scope, channels[1].set.load_scope().get());
  EXPECT_EQ(scope.total().Load(), 6u);
  EXPECT_EQ(channels[1].set.backends()[owner].cell->in_flight->Load(), 6u);
  // Bound over the scope: ceil(1.00 * (6 + 1) * 1 / 5) = 2, and the owner
  // holds 6: the bounded channel's call goes elsewhere.
  PickOutcome outcome = channels[1].picker->Pick(PickRequest{key});
  auto* done = std::get_if<PickOutcome::Complete>(&outcome.result);
  ASSERT_NE(done, nullptr);
  EXPECT_NE(done->backend, owner);
  EXPECT_TRUE(done->spilled);
  done->slot = InFlightGuard();
  weighted_calls.clear();
  EXPECT_EQ(scope.total().Load(), 0u);
}

}  // namespace
}  // namespace poise::router
