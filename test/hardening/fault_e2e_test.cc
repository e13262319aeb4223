// Fault injection under load: real servers on 127.0.0.1, one channel, eight
// client threads, bounded in calls and seconds. For every fault: each call
// ends OK or with the expected status before its deadline, the policy's
// in-flight counters return to exactly zero, keys return to their owner after
// recovery, and no backend is admitted past its bound.
#include "src/grpc/require_undebug.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <set>
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

namespace poise::hardening {
namespace {

using grpc::StatusCode;
// The shared e2e harness.
using test_support::Bound;
using test_support::CallOptions;
using test_support::CallOutcome;
using test_support::Client;
using test_support::kHeader;
using test_support::LbConfig;
using test_support::OwnerId;
using test_support::StatsFor;
using test_support::TotalInFlight;
using test_support::WaitFor;

constexpr int kThreads = 8;
constexpr uint64_t kFactor = 150;

// What the load saw: statuses by code, calls that overran their deadline.
struct LoadReport {
  std::map<StatusCode, int> codes;
  int late = 0;
  int total = 0;
  int gate_timeouts = 0;  // see Load's `gate_label`
  std::string first_unexpected;
};

// Runs `kThreads` threads of up to `calls_per_thread` calls over `keys`
// until `stop` is set or the calls run out; `allowed` lists the acceptable
// statuses. `options_for` may vary the call options per call.
//
// A call that ends by cancellation (TryCancel, a deadline) returns to its
// thread before gRPC's transport has finished the stream, and the policy's
// in-flight slot is held until then: under a slow build the thread can start
// several more calls meanwhile, so the load the policy sees has no limit the
// test knows. With `gate_label`, each thread first waits until that
// channel's in-flight total is below kThreads; then the total can never
// exceed 2 * kThreads - 1 (at most kThreads - 1 seen at the latest gate,
// plus one call per thread between its gate and its pick).
class Load {
 public:
  Load(Client* client, std::vector<std::string> keys, int calls_per_thread,
       std::set<StatusCode> allowed,
       std::function<CallOptions(int thread, int call)> options_for,
       std::string gate_label = "")
      : client_(client),
        keys_(std::move(keys)),
        allowed_(std::move(allowed)),
        options_for_(std::move(options_for)),
        gate_label_(std::move(gate_label)) {
    for (int t = 0; t < kThreads; ++t) {
      threads_.emplace_back([this, t, calls_per_thread] {
        for (int i = 0; i < calls_per_thread && !stop_.load(); ++i) {
          const std::string& key =
              keys_[static_cast<size_t>(t * 7919 + i * 31) % keys_.size()];
          const bool gated =
              gate_label_.empty() || WaitFor([&] {
                return TotalInFlight(gate_label_) < uint64_t{kThreads};
              });
          const CallOutcome out = client_->Call(key, options_for_(t, i));
          std::lock_guard<std::mutex> lock(mu_);
          if (!gated) ++report_.gate_timeouts;
          ++report_.codes[out.status.error_code()];
          ++report_.total;
          if (!out.ended_in_time) ++report_.late;
          if (allowed_.count(out.status.error_code()) == 0 &&
              report_.first_unexpected.empty()) {
            report_.first_unexpected = absl::StrCat(
                out.status.error_code(), ": ", out.status.error_message());
          }
          done_.fetch_add(1);
        }
      });
    }
  }
  ~Load() { Join(); }

  int done() const { return done_.load(); }
  bool WaitForCalls(int n) {
    return WaitFor([&] { return done_.load() >= n || finished(); },
                   std::chrono::seconds(60));
  }
  bool finished() const { return finished_threads_.load() == kThreads; }
  void Stop() { stop_.store(true); }
  LoadReport Join() {
    for (auto& t : threads_) {
      if (t.joinable()) {
        t.join();
        finished_threads_.fetch_add(1);
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    return report_;
  }

 private:
  Client* client_;
  const std::vector<std::string> keys_;
  const std::set<StatusCode> allowed_;
  std::function<CallOptions(int, int)> options_for_;
  const std::string gate_label_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<int> done_{0};
  std::atomic<int> finished_threads_{0};
  std::mutex mu_;
  LoadReport report_;
};

std::vector<std::string> Keys(const std::string& prefix, int n) {
  std::vector<std::string> keys;
  keys.reserve(static_cast<size_t>(std::max(n, 0)));
  for (int k = 0; k < n; ++k) keys.push_back(absl::StrCat(prefix, k));
  return keys;
}

void ExpectReport(const LoadReport& r, const std::set<StatusCode>& allowed) {
  int accounted = 0;
  for (const auto& [code, n] : r.codes) {
    if (allowed.count(code) != 0) accounted += n;
  }
  EXPECT_EQ(accounted, r.total) << "unexpected status: " << r.first_unexpected;
  EXPECT_EQ(r.late, 0) << "calls ran past their deadline";
  EXPECT_EQ(r.gate_timeouts, 0) << "cancelled calls held their slots >20 s";
  EXPECT_GT(r.total, 0);
}

// Counters back to exactly zero, and no backend was admitted past the bound
// for `concurrency` calls at once over `ready` equal-weight READY backends
// (W counts only READY backends: with one down the others' bound grows).
void ExpectDrainedAndBounded(const std::string& label, size_t ready,
                             uint64_t concurrency) {
  EXPECT_TRUE(WaitFor([&] { return TotalInFlight(label) == 0; }))
      << "in-flight counters did not return to zero";
  const grpc_lb::ChannelStats stats = StatsFor(label);
  const uint64_t bound = Bound(kFactor, concurrency, 1, ready);
  for (const auto& b : stats.backends) {
    EXPECT_EQ(b.in_flight, 0u) << b.identity;
    EXPECT_LE(b.peak_in_flight, bound) << b.identity;
  }
}

// Sequential calls on an idle channel: every key at its core owner.
void ExpectKeysAtOwners(Client& c, const example::BackendSet& set,
                        const std::vector<std::string>& keys) {
  for (const auto& key : keys) {
    const CallOutcome out = c.Call(key);
    ASSERT_TRUE(out.status.ok()) << key << ": " << out.status.error_message();
    EXPECT_EQ(out.backend_id, OwnerId(set, key)) << key;
  }
}

std::string BoundedConfig() {
  return LbConfig("bounded_load_rendezvous",
                  absl::StrCat(R"("balanceFactorPercent":)", kFactor));
}

TEST(FaultE2E, BackendShutDownAndRestartedOnTheSamePortMidLoad) {
  example::BackendSet set;
  ASSERT_TRUE(set.Start(4, kHeader).ok());
  Client c(set.target(), BoundedConfig(), "restart");
  const auto keys = Keys("r", 64);
  ExpectKeysAtOwners(c, set, keys);
  // Calls in flight on the stopping server fail UNAVAILABLE (or CANCELLED
  // when the server cancels them at the end of its grace period); new calls
  // move to the keys' next choices (wait_for_ready).
  const std::set<StatusCode> allowed = {StatusCode::OK, StatusCode::UNAVAILABLE,
                                        StatusCode::CANCELLED};
  Load load(&c, keys, 400, allowed, [](int, int) {
    CallOptions o;
    o.delay_ms = 2;
    o.deadline = std::chrono::seconds(10);
    return o;
  });
  ASSERT_TRUE(load.WaitForCalls(200));
  const int port = set.backend(1).port();
  set.backend(1).Stop();
  ASSERT_TRUE(load.WaitForCalls(load.done() + 400));
  ASSERT_TRUE(set.backend(1).Restart().ok());
  EXPECT_EQ(set.backend(1).port(), port);
  ASSERT_TRUE(load.WaitForCalls(load.done() + 200));
  load.Stop();
  const LoadReport report = load.Join();
  ExpectReport(report, allowed);
  ExpectDrainedAndBounded("restart", 3, kThreads);  // one was down
  // Recovery: the restarted backend's keys come home once it reconnects.
  std::string probe;
  for (const auto& k : keys) {
    if (OwnerId(set, k) == set.backend(1).id()) probe = k;
  }
  ASSERT_FALSE(probe.empty());
  ASSERT_TRUE(
      WaitFor([&] { return c.Call(probe).backend_id == set.backend(1).id(); },
              std::chrono::seconds(30)));
  ExpectKeysAtOwners(c, set, keys);
  EXPECT_EQ(TotalInFlight("restart"), 0u);
}

TEST(FaultE2E, StallingBackendDeadlinesFire) {
  example::BackendSet set;
  ASSERT_TRUE(set.Start(3, kHeader).ok());
  Client c(set.target(), BoundedConfig(), "stall");
  const auto keys = Keys("s", 48);
  ExpectKeysAtOwners(c, set, keys);
  set.backend(0).set_stall_ms(2000);
  const std::set<StatusCode> allowed = {StatusCode::OK,
                                        StatusCode::DEADLINE_EXCEEDED};
  Load load(
      &c, keys, 40, allowed,
      [](int, int) {
        CallOptions o;
        o.deadline = std::chrono::milliseconds(200);
        return o;
      },
      "stall");
  const LoadReport report = load.Join();
  ExpectReport(report, allowed);
  EXPECT_GT(report.codes.count(StatusCode::DEADLINE_EXCEEDED), 0u);
  EXPECT_GT(report.codes.count(StatusCode::OK), 0u);
  ExpectDrainedAndBounded("stall", 3, 2 * static_cast<uint64_t>(kThreads));
  set.backend(0).set_stall_ms(0);
  ExpectKeysAtOwners(c, set, keys);
}

TEST(FaultE2E, BackendReturningErrors) {
  example::BackendSet set;
  ASSERT_TRUE(set.Start(3, kHeader).ok());
  Client c(set.target(), BoundedConfig(), "errors");
  const auto keys = Keys("e", 48);
  ExpectKeysAtOwners(c, set, keys);
  set.backend(2).set_fail(true);
  const std::set<StatusCode> allowed = {StatusCode::OK,
                                        StatusCode::UNAVAILABLE};
  Load load(&c, keys, 80, allowed, [](int, int) { return CallOptions{}; });
  const LoadReport report = load.Join();
  ExpectReport(report, allowed);
  // Application errors do not move keys: the failing backend's keys fail.
  EXPECT_GT(report.codes.count(StatusCode::UNAVAILABLE), 0u);
  ExpectDrainedAndBounded("errors", 3, kThreads);
  set.backend(2).set_fail(false);
  ExpectKeysAtOwners(c, set, keys);
}

TEST(FaultE2E, ClientCancellationsMidCall) {
  example::BackendSet set;
  ASSERT_TRUE(set.Start(3, kHeader).ok());
  Client c(set.target(), BoundedConfig(), "cancel");
  const auto keys = Keys("c", 48);
  ExpectKeysAtOwners(c, set, keys);
  const std::set<StatusCode> allowed = {StatusCode::OK, StatusCode::CANCELLED};
  Load load(
      &c, keys, 40, allowed,
      [](int t, int i) {
        CallOptions o;
        o.delay_ms = 20;
        // 0..29 ms: before the pick, during the call, or after it ended.
        o.cancel_after = std::chrono::milliseconds((t * 13 + i * 7) % 30 + 1);
        return o;
      },
      "cancel");
  const LoadReport report = load.Join();
  ExpectReport(report, allowed);
  EXPECT_GT(report.codes.count(StatusCode::CANCELLED), 0u);
  // Cancelled calls may hold their slots past their return (the gate in
  // Load): up to 2 * kThreads - 1 in flight.
  ExpectDrainedAndBounded("cancel", 3, 2 * static_cast<uint64_t>(kThreads));
  ExpectKeysAtOwners(c, set, keys);
}

using test_support::FakeResolved;

std::string OwnerAmong(const example::BackendSet& set,
                       const std::vector<size_t>& which,
                       const std::string& key) {
  std::vector<std::string> ids;
  ids.reserve(which.size());
  for (size_t i : which) ids.push_back(set.backend(i).address());
  std::vector<Candidate> candidates;
  candidates.reserve(ids.size());
  for (const auto& id : ids) candidates.push_back({id, 1, true});
  return set.backend(which[WeightedRendezvous::Pick(key, candidates).value()])
      .id();
}

TEST(FaultE2E, AddressListChangedMidLoad) {
  example::BackendSet set;
  ASSERT_TRUE(set.Start(5, kHeader).ok());
  FakeResolved resolver;
  Client c("fake:///poise-hardening", BoundedConfig(), "addresses",
           resolver.Args());
  const std::vector<size_t> first = {0, 1, 2, 3};
  const std::vector<size_t> second = {1, 2, 3, 4};  // 0 leaves, 4 joins
  resolver.Set(set, first);
  const auto keys = Keys("a", 48);
  for (const auto& k : keys) {
    const CallOutcome out = c.Call(k);
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
    EXPECT_EQ(out.backend_id, OwnerAmong(set, first, k)) << k;
  }
  // Removing an address does not stop its server: calls in flight there
  // finish normally, so everything ends OK.
  const std::set<StatusCode> allowed = {StatusCode::OK};
  Load load(&c, keys, 300, allowed, [](int, int) {
    CallOptions o;
    o.delay_ms = 2;
    return o;
  });
  ASSERT_TRUE(load.WaitForCalls(200));
  resolver.Set(set, second);
  ASSERT_TRUE(load.WaitForCalls(load.done() + 300));
  resolver.Set(set, first);
  ASSERT_TRUE(load.WaitForCalls(load.done() + 300));
  resolver.Set(set, second);
  const LoadReport report = load.Join();
  ExpectReport(report, allowed);
  // Counters of the backends in the final list drain to zero, and the
  // removed backend's counter was released into its own cell (the cell is
  // gone with it: nothing else can have leaked).
  EXPECT_TRUE(WaitFor([&] { return TotalInFlight("addresses") == 0; }));
  // A joining backend serves nothing until READY: W may be 3 meanwhile.
  ExpectDrainedAndBounded("addresses", 3, kThreads);
  ASSERT_EQ(StatsFor("addresses").backends.size(), 4u);
  // The new list routes every key to its owner among the new list (a new
  // backend may still be connecting: keys owned by it wait for it).
  for (const auto& k : keys) {
    const CallOutcome out = c.Call(k);
    ASSERT_TRUE(out.status.ok()) << out.status.error_message();
    EXPECT_EQ(out.backend_id, OwnerAmong(set, second, k)) << k;
  }
  EXPECT_EQ(set.backend(0).in_flight(), 0);
}

}  // namespace
}  // namespace poise::hardening
