// Slow start end to end: real backends on 127.0.0.1, one channel on gRPC's
// fake resolver, client threads under load through a resolver update that
// adds a fifth backend, which then goes through slow start over the window.
#include "src/grpc/require_undebug.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/core/ext/filters/client_channel/resolver/fake/fake_resolver.h"
#include "src/core/lib/address_utils/parse_address.h"
#include "src/core/lib/iomgr/exec_ctx.h"
#include "src/core/lib/resolver/server_address.h"
#include "test/support/e2e_harness.h"
#include "test/support/fake_resolved.h"

namespace poise::grpc_lb {
namespace {

using Clock = std::chrono::steady_clock;
using example::BackendSet;
using test_support::CallOptions;
using test_support::CallOutcome;
using test_support::Client;
using test_support::kHeader;
using test_support::LbConfig;
using test_support::OwnerId;
using test_support::StatsFor;
using test_support::TotalInFlight;
using test_support::WaitFor;

constexpr std::chrono::milliseconds kWindow{1500};  // "1.5s" below
constexpr size_t kOld = 4;  // backends 0..3 serve first; 4 joins
constexpr size_t kNew = 4;
constexpr int kKeys = 400;
constexpr int kThreads = 8;  // thread t calls the keys k with k % kThreads == t

using test_support::FakeResolved;

// The owner by the contract among backends 0..count-1 (identities = address
// texts, weight 1).
size_t OwnerAmongFirst(const BackendSet& set, size_t count,
                       const std::string& key) {
  std::vector<std::string> ids;
  ids.reserve(count);
  for (size_t i = 0; i < count; ++i) ids.push_back(set.backend(i).address());
  std::vector<Candidate> candidates;
  candidates.reserve(ids.size());
  for (const auto& id : ids) candidates.push_back({id, 1, true});
  return WeightedRendezvous::Pick(key, candidates).value();
}

// One call: which backend served it (-1: failed) and when it ran. Calls of
// one key come from one thread, one after the other, so a key's
// observations are in time order as recorded.
struct Observation {
  int backend = -1;
  Clock::time_point start;
  Clock::time_point end;
};

// kThreads threads calling their keys round robin until Stop(); the
// destructor stops and joins them (every exit path of the test).
class Load {
 public:
  Load(Client* client, const BackendSet* set,
       const std::vector<std::string>* keys)
      : client_(client), set_(set), keys_(keys), per_key_(keys->size()) {
    for (int t = 0; t < kThreads; ++t) {
      threads_.emplace_back([this, t] { Run(static_cast<size_t>(t)); });
    }
  }
  ~Load() { Join(); }
  Load(const Load&) = delete;
  Load& operator=(const Load&) = delete;

  void Join() {
    stop_.store(true);
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  int calls() const { return calls_.load(); }
  int failures() const { return failures_.load(); }
  // Whether every key has a call that started after `t`.
  bool EveryKeyCalledAfter(Clock::time_point t) {
    std::lock_guard<std::mutex> lock(mu_);
    return std::all_of(per_key_.begin(), per_key_.end(), [&](const auto& obs) {
      return !obs.empty() && obs.back().start > t;
    });
  }
  // After Join().
  const std::vector<std::vector<Observation>>& per_key() const {
    return per_key_;
  }

 private:
  void Run(size_t t) {
    CallOptions options;
    options.deadline = std::chrono::seconds(10);
    for (size_t k = t; !stop_.load(); k += kThreads) {
      if (k >= keys_->size()) k = t;
      Observation obs;
      obs.start = Clock::now();
      const CallOutcome out = client_->Call((*keys_)[k], options);
      obs.end = Clock::now();
      if (out.status.ok()) {
        obs.backend = set_->IndexOf(out.backend_id);
      } else {
        failures_.fetch_add(1);
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        per_key_[k].push_back(obs);
      }
      calls_.fetch_add(1);
    }
  }

  Client* const client_;
  const BackendSet* const set_;
  const std::vector<std::string>* const keys_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<int> calls_{0};
  std::atomic<int> failures_{0};
  std::mutex mu_;  // guards per_key_ while the threads run
  std::vector<std::vector<Observation>> per_key_;
};

const BackendStats* Find(const ChannelStats& stats,
                         const std::string& identity) {
  for (const auto& b : stats.backends) {
    if (b.identity == identity) return &b;
  }
  return nullptr;
}

TEST(SlowStartE2E, ResolverAddsABackendUnderLoadAndItsKeysMoveOnceGradually) {
  BackendSet set;
  ASSERT_TRUE(set.Start(kOld + 1, kHeader).ok());
  FakeResolved resolver;
  const std::string label = "slow-start-e2e";
  const std::string config =
      LbConfig("weighted_rendezvous",
               R"("slowStart":{"window":"1.5s","minWeightPercent":10})");
  ASSERT_TRUE(ValidateServiceConfig(config).ok());
  Client client("fake:///poise-slow-start", config, label, resolver.Args());
  resolver.SetFirst(set, kOld);

  std::vector<std::string> keys;
  std::vector<size_t> old_owner(kKeys);
  std::vector<size_t> final_owner(kKeys);
  for (int k = 0; k < kKeys; ++k) {
    keys.push_back(absl::StrCat("session-", k));
    const auto i = static_cast<size_t>(k);
    old_owner[i] = OwnerAmongFirst(set, kOld, keys[i]);
    final_owner[i] = OwnerAmongFirst(set, kOld + 1, keys[i]);
    ASSERT_TRUE(final_owner[i] == old_owner[i] || final_owner[i] == kNew);
  }
  const auto moving = static_cast<size_t>(
      std::count(final_owner.begin(), final_owner.end(), kNew));
  ASSERT_GT(moving, 40u);  // about a fifth of 400

  // All four READY (each has served a call), then every key at its owner.
  int warm = 0;
  ASSERT_TRUE(WaitFor([&] {
    client.Call(absl::StrCat("warm-up-", warm++));
    for (size_t i = 0; i < kOld; ++i) {
      if (set.backend(i).calls() == 0) return false;
    }
    return true;
  }));
  for (size_t i = 0; i < keys.size(); ++i) {
    const CallOutcome out = client.Call(keys[i]);
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
    ASSERT_EQ(out.backend_id, set.backend(old_owner[i]).id()) << keys[i];
  }

  Load load(&client, &set, &keys);
  ASSERT_TRUE(WaitFor([&] { return load.calls() >= 2 * kKeys; }));
  const Clock::time_point update = Clock::now();
  resolver.SetFirst(set, kOld + 1);

  // The new backend's effective weight, polled: first in slow start (scale
  // > 1 only while some backend is), then full at scale 1 (slow start over).
  const std::string new_identity = set.backend(kNew).address();
  bool saw_slow_start = false;
  uint64_t first_slow_start_weight = 0;
  Clock::time_point slow_start_seen = Clock::time_point::max();
  ASSERT_TRUE(WaitFor(
      [&] {
        const ChannelStats stats = StatsFor(label);
        const BackendStats* b = Find(stats, new_identity);
        if (b == nullptr || b->weight == 0) return false;
        if (b->weight_scale > 1 &&
            b->effective_weight < b->weight * b->weight_scale) {
          if (!saw_slow_start) {
            first_slow_start_weight = b->effective_weight;
            slow_start_seen = Clock::now();
          }
          saw_slow_start = true;
          return false;
        }
        return saw_slow_start && b->weight_scale == 1;
      },
      std::chrono::seconds(20), std::chrono::milliseconds(5)))
      << "the new backend never reached its full weight";
  const Clock::time_point slow_start_done = Clock::now();
  // At least minWeightPercent of weight 1 at scale 1024 from the start.
  EXPECT_GE(first_slow_start_weight, 102u);
  // Keep the load on a bit after: every key called again from the final
  // picker (the policy publishes the stats just before the picker; the
  // margin covers a preempted work serializer).
  const Clock::time_point settled =
      slow_start_done + std::chrono::milliseconds(200);
  ASSERT_TRUE(WaitFor([&] { return load.EveryKeyCalledAfter(settled); }));
  load.Join();
  EXPECT_EQ(load.failures(), 0);

  const auto& per_key = load.per_key();
  // The first call the new backend served, by its start time.
  Clock::time_point first_new = Clock::time_point::max();
  Clock::time_point first_new_end = Clock::time_point::max();
  for (const auto& obs : per_key) {
    for (const auto& o : obs) {
      if (o.backend == static_cast<int>(kNew) && o.start < first_new) {
        first_new = o.start;
        first_new_end = o.end;
      }
    }
  }
  ASSERT_NE(first_new, Clock::time_point::max());
  EXPECT_GT(first_new, update);
  // Slow start's start is before both the first call the new backend served
  // and the first poll that saw it in slow start: the earlier of the two
  // starts the first quarter of the window (so a stall of the client threads
  // or of the poller alone does not move it later into slow start).
  const Clock::time_point quarter_start = std::min(first_new, slow_start_seen);
  const auto first_quarter_end = quarter_start + kWindow / 4;

  int moved_keys = 0;
  int old_owner_after_first_new = 0;  // calls of moving keys, see (4)
  uint64_t quarter_calls = 0, quarter_new = 0, after_calls = 0, after_new = 0;
  for (size_t k = 0; k < per_key.size(); ++k) {
    const auto& obs = per_key[k];
    bool on_new = false;
    for (const auto& o : obs) {
      if (o.backend < 0) continue;
      const auto b = static_cast<size_t>(o.backend);
      // (1) An old backend serves a key only as its owner among the old
      // four: no key moves between two old backends.
      if (b != kNew) {
        EXPECT_EQ(b, old_owner[k]) << keys[k] << " on an old non-owner";
      }
      // (2) Once on the new backend, never on an old one again.
      if (on_new) {
        EXPECT_EQ(b, kNew) << keys[k] << " moved back from the new backend";
      }
      if (b == kNew && !on_new) {
        on_new = true;
        ++moved_keys;
      }
      // (3) From the final picker on, every key at its contract owner.
      if (o.start > settled) {
        EXPECT_EQ(b, final_owner[k]) << keys[k] << " after slow start";
        ++after_calls;
        if (b == kNew) ++after_new;
      }
      // (4) Calls of keys that end on the new backend, still at their old
      // owner although the new backend was READY and picked already.
      if (final_owner[k] == kNew && b != kNew && o.start > first_new_end) {
        ++old_owner_after_first_new;
      }
      if (o.start >= quarter_start && o.start < first_quarter_end) {
        ++quarter_calls;
        if (b == kNew) ++quarter_new;
      }
    }
    // Only keys whose owner is now the new backend moved, each once.
    EXPECT_EQ(on_new, final_owner[k] == kNew) << keys[k];
  }
  EXPECT_EQ(static_cast<size_t>(moved_keys), moving);

  // (4) Gradual: not everything moved at once, and the new backend's share
  // of calls in the first quarter of the window stayed well below its final
  // share.
  EXPECT_GT(old_owner_after_first_new, 0)
      << "every key of the new backend moved at once";
  ASSERT_GT(after_calls, 0u);
  const double after_share =
      static_cast<double>(after_new) / static_cast<double>(after_calls);
  const double quarter_share = quarter_calls == 0
                                   ? 0.0
                                   : static_cast<double>(quarter_new) /
                                         static_cast<double>(quarter_calls);
  EXPECT_LT(quarter_share, 0.75 * after_share)
      << quarter_new << " of " << quarter_calls
      << " calls in the first quarter";
  std::printf(
      "slow start e2e: %d calls, %zu keys moved; new backend's share "
      "%.3f in the window's first quarter (%llu calls), %.3f after; first "
      "slow-start weight seen %llu; slow start seen done %.0f ms after the "
      "first call on "
      "it (window %lld ms); %d calls of moving keys at the old owner after "
      "it\n",
      load.calls(), moving, quarter_share,
      static_cast<unsigned long long>(quarter_calls), after_share,
      static_cast<unsigned long long>(first_slow_start_weight),
      std::chrono::duration<double, std::milli>(slow_start_done - first_new)
          .count(),
      static_cast<long long>(kWindow.count()), old_owner_after_first_new);

  // (3) Sequentially, on the idle channel: every key at its owner by the
  // contract over the five identities.
  for (const std::string& key : keys) {
    const CallOutcome out = client.Call(key);
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
    EXPECT_EQ(out.backend_id, OwnerId(set, key)) << key;
  }

  // (5) The new backend at its full weight, every counter back to zero.
  EXPECT_TRUE(WaitFor([&] { return TotalInFlight(label) == 0; }));
  const ChannelStats stats = StatsFor(label);
  ASSERT_EQ(stats.backends.size(), kOld + 1);
  for (const auto& b : stats.backends) {
    EXPECT_EQ(b.in_flight, 0u) << b.identity;
    EXPECT_EQ(b.weight_scale, 1u) << b.identity;
    EXPECT_EQ(b.effective_weight, b.weight) << b.identity;
    EXPECT_GT(b.picks, 0u) << b.identity;
  }
  const BackendStats* added = Find(stats, new_identity);
  ASSERT_NE(added, nullptr);
  EXPECT_EQ(added->effective_weight, 1u);
  EXPECT_EQ(stats.spills, 0u);
}

}  // namespace
}  // namespace poise::grpc_lb
