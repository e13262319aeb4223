// Slow start end to end, shared by test/e2e/slow_start_e2e_test.cc and
// test/e2e/slow_start_clock_shift_test.cc: real backends on 127.0.0.1, one
// channel on gRPC's fake resolver, client threads calling 400 keys through a
// resolver update that adds a fifth backend, which then goes through slow
// start. Records every call (which backend, when) and when the poller saw the
// new backend in slow start and at full weight. Internal gRPC headers
// (fake_resolved.h): include after src/grpc/require_undebug.h and
// port_platform.h.
#ifndef POISE_TEST_SUPPORT_SLOW_START_SCALE_OUT_H_
#define POISE_TEST_SUPPORT_SLOW_START_SCALE_OUT_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "test/support/e2e_harness.h"
#include "test/support/fake_resolved.h"

namespace poise::test_support::slow_start_scale_out {

using Clock = std::chrono::steady_clock;

constexpr size_t kOld = 4;  // backends 0..3 serve first; 4 joins
constexpr size_t kNew = 4;
constexpr int kKeys = 400;
constexpr int kThreads = 8;  // thread t calls the keys k with k % kThreads == t

// The owner by the contract among backends 0..count-1 (identities = address
// texts, weight 1).
inline size_t OwnerAmongFirst(const example::BackendSet& set, size_t count,
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

// kThreads threads calling their keys round robin until Join(); the
// destructor stops and joins them (every exit path of the test).
class Load {
 public:
  Load(Client* client, const example::BackendSet* set,
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
  const example::BackendSet* const set_;
  const std::vector<std::string>* const keys_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<int> calls_{0};
  std::atomic<int> failures_{0};
  std::mutex mu_;  // guards per_key_ while the threads run
  std::vector<std::vector<Observation>> per_key_;
};

inline const grpc_lb::BackendStats* Find(const grpc_lb::ChannelStats& stats,
                                         const std::string& identity) {
  for (const auto& b : stats.backends) {
    if (b.identity == identity) return &b;
  }
  return nullptr;
}

// What one scale-out saw.
struct ScaleOutRun {
  std::vector<std::string> keys;
  std::vector<size_t> old_owner;    // among the first kOld
  std::vector<size_t> final_owner;  // among all kOld + 1
  size_t moving = 0;                // keys whose final owner is kNew
  Clock::time_point update;         // the resolver update
  // When the poller first saw the new backend in slow start, and at full
  // weight with no slow start left (scale 1).
  Clock::time_point slow_start_seen;
  Clock::time_point slow_start_done;
  uint64_t first_slow_start_weight = 0;
  // Every key called again this long after slow_start_done.
  Clock::time_point settled;
  int calls = 0;
  int failures = 0;
  std::vector<std::vector<Observation>> per_key;
};

// The channel's service config: weighted rendezvous, slowStart window
// `window_text` ("1.5s"), minWeightPercent 10.
inline std::string ScaleOutConfig(const std::string& window_text) {
  return LbConfig("weighted_rendezvous",
                  absl::StrCat(R"("slowStart":{"window":")", window_text,
                               R"(","minWeightPercent":10})"));
}

// `client` (stats label `label`, on `resolver`, ScaleOutConfig) routing to
// backends 0..kOld-1 of `set`, the load running, then backend kNew added.
// `during_ramp` (may be empty) runs at every poll that sees the new backend
// in slow start, with its stats. Fills `run` (without slow_start_done and
// settled if the new backend never reaches its full weight).
inline ::testing::AssertionResult ScaleOutUnderLoad(
    const example::BackendSet& set, FakeResolved& resolver, Client& client,
    const std::string& label,
    const std::function<void(const grpc_lb::BackendStats&)>& during_ramp,
    ScaleOutRun* run) {
  resolver.SetFirst(set, kOld);
  for (int k = 0; k < kKeys; ++k) {
    run->keys.push_back(absl::StrCat("session-", k));
    run->old_owner.push_back(OwnerAmongFirst(set, kOld, run->keys.back()));
    run->final_owner.push_back(
        OwnerAmongFirst(set, kOld + 1, run->keys.back()));
    if (run->final_owner.back() != run->old_owner.back() &&
        run->final_owner.back() != kNew) {
      return ::testing::AssertionFailure()
             << run->keys.back() << " would move between old backends";
    }
  }
  run->moving = static_cast<size_t>(
      std::count(run->final_owner.begin(), run->final_owner.end(), kNew));

  // All four READY (each has served a call), then every key at its owner.
  int warm = 0;
  if (!WaitFor([&] {
        client.Call(absl::StrCat("warm-up-", warm++));
        for (size_t i = 0; i < kOld; ++i) {
          if (set.backend(i).calls() == 0) return false;
        }
        return true;
      })) {
    return ::testing::AssertionFailure() << "the old backends never served";
  }
  for (size_t i = 0; i < run->keys.size(); ++i) {
    const CallOutcome out = client.Call(run->keys[i]);
    if (!out.status.ok() ||
        out.backend_id != set.backend(run->old_owner[i]).id()) {
      return ::testing::AssertionFailure()
             << run->keys[i]
             << " not at its owner before the update: " << out.ServedBy();
    }
  }

  Load load(&client, &set, &run->keys);
  if (!WaitFor([&] { return load.calls() >= 2 * kKeys; })) {
    return ::testing::AssertionFailure() << "the load did not start";
  }
  run->update = Clock::now();
  resolver.SetFirst(set, kOld + 1);

  // The new backend's effective weight, polled: first in slow start (scale
  // > 1 only while some backend is), then full at scale 1 (slow start over).
  const std::string new_identity = set.backend(kNew).address();
  bool seen = false;
  if (!WaitFor(
          [&] {
            const grpc_lb::ChannelStats stats = StatsFor(label);
            const grpc_lb::BackendStats* b = Find(stats, new_identity);
            if (b == nullptr || b->weight == 0) return false;
            if (b->weight_scale > 1 &&
                b->effective_weight < b->weight * b->weight_scale) {
              if (!seen) {
                seen = true;
                run->first_slow_start_weight = b->effective_weight;
                run->slow_start_seen = Clock::now();
              }
              if (during_ramp) during_ramp(*b);
              return false;
            }
            return seen && b->weight_scale == 1;
          },
          std::chrono::seconds(20), std::chrono::milliseconds(5))) {
    // What the calls saw so far, for the caller's report.
    load.Join();
    run->calls = load.calls();
    run->failures = load.failures();
    run->per_key = load.per_key();
    return ::testing::AssertionFailure()
           << "the new backend never reached its full weight";
  }
  run->slow_start_done = Clock::now();
  // Keep the load on a bit after: every key called again from the final
  // picker (the policy publishes the stats just before the picker; the
  // margin covers a preempted work serializer).
  run->settled = run->slow_start_done + std::chrono::milliseconds(200);
  if (!WaitFor([&] { return load.EveryKeyCalledAfter(run->settled); })) {
    return ::testing::AssertionFailure() << "the load stalled";
  }
  load.Join();
  run->calls = load.calls();
  run->failures = load.failures();
  run->per_key = load.per_key();
  return ::testing::AssertionSuccess();
}

}  // namespace poise::test_support::slow_start_scale_out

#endif  // POISE_TEST_SUPPORT_SLOW_START_SCALE_OUT_H_
