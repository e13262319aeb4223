// Ended calls counted by status and duration bucket: the buckets' edges, a
// code outside gRPC's, the per-backend counts allocated once under
// concurrent first calls, and the statistics that show them.
#include "src/router/call_metrics.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/router/made_on_first_use.h"
#include "src/router/stats_registry.h"
#include "test/router/router_test_util.h"

namespace poise::router {
namespace {

constexpr int kOk = 0;
constexpr int kDeadlineExceeded = 4;
constexpr int kUnavailable = 14;

TEST(CallMetrics, ADurationOnABoundCountsInThatBoundsBucket) {
  const auto& bounds = grpc_lb::kCallDurationBucketBoundsNs;
  EXPECT_EQ(DurationBucketOf(0), 0u);
  EXPECT_EQ(DurationBucketOf(bounds[0]), 0u);  // le="0.0005" holds 0.5 ms
  EXPECT_EQ(DurationBucketOf(bounds[0] + 1), 1u);
  EXPECT_EQ(DurationBucketOf(bounds[6]), 6u);
  EXPECT_EQ(DurationBucketOf(bounds.back()), bounds.size() - 1);
  EXPECT_EQ(DurationBucketOf(bounds.back() + 1), bounds.size());  // +Inf only
  for (size_t i = 1; i < bounds.size(); ++i) {
    EXPECT_LT(bounds[i - 1], bounds[i]);
  }
}

TEST(CallMetrics, CountsByStatusAndDuration) {
  CallMetrics metrics;
  metrics.Record(kOk, 400'000);                       // 0.4 ms
  metrics.Record(kOk, 3'000'000);                     // 3 ms
  metrics.Record(kUnavailable, 3'000'000);            // 3 ms
  metrics.Record(kDeadlineExceeded, 20'000'000'000);  // 20 s
  metrics.Record(99, 1);  // not a gRPC code: UNKNOWN
  metrics.Record(-1, 1);
  const grpc_lb::CallStats s = metrics.Read();
  EXPECT_EQ(s.by_status[kOk], 2u);
  EXPECT_EQ(s.by_status[kUnavailable], 1u);
  EXPECT_EQ(s.by_status[kDeadlineExceeded], 1u);
  EXPECT_EQ(s.by_status[2], 2u);         // UNKNOWN
  EXPECT_EQ(s.duration_buckets[0], 3u);  // 0.4 ms and the two 1 ns
  EXPECT_EQ(s.duration_buckets[3], 2u);  // (2.5 ms, 5 ms]
  EXPECT_EQ(s.duration_buckets.back(), 1u);
  EXPECT_EQ(s.duration_sum_ns, 400'000u + 6'000'000u + 20'000'000'000u + 2u);
}

TEST(CallMetrics, FirstUseAllocatesOnceUnderConcurrentCalls) {
  MadeOnFirstUse<CallMetrics> lazy;
  EXPECT_EQ(lazy.IfMade(), nullptr);
  constexpr int kThreads = 4;
  constexpr int kCalls = 2000;
  std::vector<CallMetrics*> seen(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&lazy, &seen, t] {
      seen[static_cast<size_t>(t)] = &lazy.Get();
      for (int i = 0; i < kCalls; ++i) lazy.Get().Record(kOk, 1000);
    });
  }
  for (auto& t : threads) t.join();
  for (CallMetrics* m : seen) EXPECT_EQ(m, seen[0]);
  EXPECT_EQ(lazy.IfMade(), seen[0]);
  EXPECT_EQ(lazy.IfMade()->Read().by_status[kOk], uint64_t{kThreads} * kCalls);
  EXPECT_EQ(lazy.IfMade()->Read().duration_sum_ns,
            uint64_t{kThreads} * kCalls * 1000);
}

TEST(CallMetrics, SnapshotsShowStatesAndCalls) {
  auto stats = std::make_shared<PolicyStats>("call-metrics-snapshot", "p");
  RegisterPolicyStats(stats);
  BackendSet set;
  set.Update({test::Entry("10.0.0.1:80"), test::Entry("10.0.0.2:80")},
             test::ValidConfig());
  stats->SetBackends(set.list());
  set.backends()[0].cell->connectivity = Connectivity::kReady;
  set.backends()[1].cell->connectivity = Connectivity::kTransientFailure;
  stats->connectivity = Connectivity::kReady;
  set.backends()[0].cell->counts.Get().calls.Record(kOk, 1'000'000);
  stats->calls.Record(kOk, 1'000'000);

  grpc_lb::ChannelStats s;
  for (auto& c : SnapshotAllPolicies()) {
    if (c.label == "call-metrics-snapshot") s = c;
  }
  EXPECT_EQ(s.connectivity, "READY");
  EXPECT_EQ(s.calls.by_status[kOk], 1u);
  ASSERT_EQ(s.backends.size(), 2u);
  EXPECT_EQ(s.backends[0].connectivity, "READY");
  EXPECT_EQ(s.backends[0].calls.by_status[kOk], 1u);
  EXPECT_EQ(s.backends[0].calls.duration_buckets[1], 1u);
  EXPECT_EQ(s.backends[1].connectivity, "TRANSIENT_FAILURE");
  EXPECT_EQ(s.backends[1].calls.by_status[kOk], 0u);  // never allocated
}

grpc_lb::ChannelStats* Labelled(std::vector<grpc_lb::ChannelStats>& all,
                                const std::string& label) {
  for (auto& s : all) {
    if (s.label == label) return &s;
  }
  return nullptr;
}

TEST(CallMetrics, AChannelsTotalsOutliveItForItsLabel) {
  const std::string label = "call-metrics-retired";
  auto first = std::make_shared<PolicyStats>(label, "p");
  auto second = std::make_shared<PolicyStats>(label, "p");
  RegisterPolicyStats(first);
  RegisterPolicyStats(second);
  first->picks = 5;
  first->calls.Record(kUnavailable, 10);
  second->picks = 2;
  second->calls.Record(kOk, 10);

  MetricsSnapshot before = SnapshotForMetrics();
  EXPECT_EQ(Labelled(before.retired, label), nullptr);
  first.reset();
  MetricsSnapshot after = SnapshotForMetrics();
  grpc_lb::ChannelStats* retired = Labelled(after.retired, label);
  ASSERT_NE(retired, nullptr);
  EXPECT_EQ(retired->picks, 5u);
  EXPECT_EQ(retired->calls.by_status[kUnavailable], 1u);
  grpc_lb::ChannelStats* live = Labelled(after.live, label);
  ASSERT_NE(live, nullptr);
  EXPECT_EQ(live->picks, 2u);  // the other channel, still alive

  // An instance never registered leaves nothing.
  { PolicyStats unregistered("call-metrics-unregistered", "p"); }
  MetricsSnapshot last = SnapshotForMetrics();
  EXPECT_EQ(Labelled(last.retired, "call-metrics-unregistered"), nullptr);
}

// Channels destroyed while snapshots are taken: a label's totals never go
// backwards, though each channel moves from live to retired in between.
TEST(CallMetrics, TotalsNeverGoBackwardsWhileChannelsGo) {
  const std::string label = "call-metrics-churn";
  std::atomic<bool> done{false};
  std::thread churn([&] {
    for (int i = 0; i < 300; ++i) {
      auto stats = std::make_shared<PolicyStats>(label, "p");
      RegisterPolicyStats(stats);
      stats->picks = 1;
    }
    done = true;
  });
  uint64_t last = 0;
  bool backwards = false;
  while (!done) {
    MetricsSnapshot s = SnapshotForMetrics();
    uint64_t total = 0;
    for (const auto& c : s.live) total += c.label == label ? c.picks : 0;
    for (const auto& c : s.retired) total += c.label == label ? c.picks : 0;
    backwards |= total < last;
    last = total;
  }
  churn.join();
  EXPECT_FALSE(backwards);
  MetricsSnapshot s = SnapshotForMetrics();
  EXPECT_EQ(Labelled(s.retired, label)->picks, 300u);
}

}  // namespace
}  // namespace poise::router
