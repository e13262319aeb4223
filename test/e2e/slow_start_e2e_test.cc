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
#include "test/support/e2e_harness.h"
#include "test/support/fake_resolved.h"
#include "test/support/slow_start_scale_out.h"

namespace poise::grpc_lb {
namespace {

using example::BackendSet;
using test_support::CallOutcome;
using test_support::Client;
using test_support::FakeResolved;
using test_support::OwnerId;
using test_support::StatsFor;
using test_support::TotalInFlight;
using test_support::WaitFor;
using test_support::slow_start_scale_out::Clock;
using test_support::slow_start_scale_out::Find;
using test_support::slow_start_scale_out::kNew;
using test_support::slow_start_scale_out::kOld;
using test_support::slow_start_scale_out::ScaleOutConfig;
using test_support::slow_start_scale_out::ScaleOutRun;
using test_support::slow_start_scale_out::ScaleOutUnderLoad;

constexpr std::chrono::milliseconds kWindow{1500};  // "1.5s" below

TEST(SlowStartE2E, ResolverAddsABackendUnderLoadAndItsKeysMoveOnceGradually) {
  BackendSet set;
  ASSERT_TRUE(set.Start(kOld + 1, test_support::kHeader).ok());
  FakeResolved resolver;
  const std::string label = "slow-start-e2e";
  const std::string config = ScaleOutConfig("1.5s");
  ASSERT_TRUE(ValidateServiceConfig(config).ok());
  Client client("fake:///poise-slow-start", config, label, resolver.Args());
  ScaleOutRun run;
  ASSERT_TRUE(ScaleOutUnderLoad(set, resolver, client, label, {}, &run));
  const std::vector<std::string>& keys = run.keys;
  const std::vector<size_t>& old_owner = run.old_owner;
  const std::vector<size_t>& final_owner = run.final_owner;
  const size_t moving = run.moving;
  const Clock::time_point update = run.update;
  const Clock::time_point slow_start_seen = run.slow_start_seen;
  const Clock::time_point slow_start_done = run.slow_start_done;
  const Clock::time_point settled = run.settled;
  const uint64_t first_slow_start_weight = run.first_slow_start_weight;
  ASSERT_GT(moving, 40u);  // about a fifth of 400
  // At least minWeightPercent of weight 1 at scale 1024 from the start.
  EXPECT_GE(first_slow_start_weight, 102u);
  EXPECT_EQ(run.failures, 0);

  const auto& per_key = run.per_key;
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
      run.calls, moving, quarter_share,
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
  const BackendStats* added = Find(stats, set.backend(kNew).address());
  ASSERT_NE(added, nullptr);
  EXPECT_EQ(added->effective_weight, 1u);
  EXPECT_EQ(stats.spills, 0u);
}

}  // namespace
}  // namespace poise::grpc_lb
