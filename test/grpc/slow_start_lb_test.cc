// Slow start in the policies, over gRPC 1.51's fake subchannels: the config,
// a slow start driven by a fake monotonic clock (also with the wall clock
// stepped both ways: the binary re-executes itself with the wall-clock shim
// preloaded, test/support/wall_clock_shift.h), the real event-engine timers,
// and shutdown with a slow start in progress.
// First: it includes src/grpc/require_undebug.h, then port_platform.h.
// clang-format off
#include "test/support/policy_fixture.h"
// clang-format on

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "poise/grpc_lb.h"
#include "poise/rendezvous.h"
#include "src/grpc/slow_start_clock.h"
#include "src/router/slow_start.h"
#include "test/support/wall_clock_shift.h"

namespace poise::grpc_lb {
namespace {

using test_support::ParseConfig;
using test_support::WallClockShift;

// Before main(): this process again with the shim, unless it has it.
const bool kShimLoaded =
    WallClockShift::LoadOrReexec(POISE_WALL_CLOCK_SHIFT_PATH);

std::string WithSlowStart(const char* policy, const std::string& slow) {
  return absl::StrCat(R"([{")", policy, R"(":{"hashHeader":"k","slowStart":)",
                      slow, "}}]");
}

TEST(SlowStartConfig, AcceptedOnBothPolicies) {
  for (const char* policy :
       {kWeightedRendezvousPolicy, kBoundedLoadRendezvousPolicy}) {
    EXPECT_TRUE(ParseConfig(WithSlowStart(policy, R"({"window":"60s",
                                             "minWeightPercent":10})"))
                    .ok())
        << policy;
    EXPECT_TRUE(
        ParseConfig(WithSlowStart(policy, R"({"window":"3600s"})")).ok())
        << policy;
  }
}

constexpr char kWindow[] =
    "must be a duration in seconds with an s suffix (like \"60s\"), longer "
    "than 0s and at most 3600s (1 h)";

TEST(SlowStartConfig, RejectedValuesNameTheField) {
  const char* p = kWeightedRendezvousPolicy;
  const std::string prefix =
      "errors validating weighted_rendezvous LB policy config: ";
  EXPECT_EQ(ParseConfig(WithSlowStart(p, R"({"window":"0s"})")).message(),
            prefix + "[field:slowStart.window error:" + kWindow + "]");
  EXPECT_EQ(
      ParseConfig(WithSlowStart(p, R"({"window":"3600.001s"})")).message(),
      prefix + "[field:slowStart.window error:" + kWindow + "]");
  // Exact, not whole milliseconds: neither rounds into range.
  for (const char* window : {"0.0009s", "3599.9999s"}) {
    EXPECT_TRUE(ParseConfig(WithSlowStart(p, absl::StrCat(R"({"window":")",
                                                          window, R"("})")))
                    .ok())
        << window;
  }
  for (const char* window : {"3600.0009s", "2h", "60", "-1s"}) {
    EXPECT_EQ(ParseConfig(WithSlowStart(p, absl::StrCat(R"({"window":")",
                                                        window, R"("})")))
                  .message(),
              prefix + "[field:slowStart.window error:" + kWindow + "]")
        << window;
  }
  EXPECT_EQ(
      ParseConfig(WithSlowStart(p, R"({"window":"1s","minWeightPercent":0})"))
          .message(),
      prefix +
          "[field:slowStart.minWeightPercent error:must be between 1 and 100]");
  EXPECT_EQ(
      ParseConfig(WithSlowStart(p, R"({"window":"1s","minWeightPercent":101})"))
          .message(),
      prefix +
          "[field:slowStart.minWeightPercent error:must be between 1 and 100]");
  EXPECT_EQ(ParseConfig(WithSlowStart(p, R"({})")).message(),
            prefix + "[field:slowStart.window error:field not present]");
  EXPECT_NE(ParseConfig(WithSlowStart(p, R"({"window":"soon"})"))
                .message()
                .find("field:slowStart.window error:"),
            std::string::npos);
  EXPECT_EQ(
      ParseConfig(WithSlowStart(p, R"({"window":"1s","minWeight":5})"))
          .message(),
      prefix +
          "[field:slowStart.minWeight error:unknown field (known: window, "
          "minWeightPercent)]");
}

// A monotonic clock the test moves.
router::RampTime g_now = router::RampTime::AfterOrigin(absl::Hours(1000));
router::RampTime FakeNow() { return g_now; }

class SlowStartLbTest : public test_support::PolicyFixture {
 protected:
  SlowStartLbTest() : PolicyFixture(541) {}
  void TearDown() override {
    PolicyFixture::TearDown();
    internal::SetSlowStartClockForTesting(nullptr);
  }

  std::vector<std::string> First(size_t n) const {
    return {uris_.begin(), uris_.begin() + static_cast<std::ptrdiff_t>(n)};
  }
  // Three backends serving, then the fourth added and READY.
  void ScaleOut(const std::string& name, const std::string& slow) {
    MakePolicy(name);
    const std::string config =
        Config(name, absl::StrCat(R"("slowStart":)", slow));
    ASSERT_TRUE(Update(config, First(3)).ok());
    for (int i = 0; i < 3; ++i) SetState(i, GRPC_CHANNEL_READY);
    Drain();
    ASSERT_EQ(state_, GRPC_CHANNEL_READY);
    config_ = config;
    ASSERT_TRUE(Update(config, uris_).ok());
    SetState(3, GRPC_CHANNEL_READY);
    Drain();
  }
  // A re-resolution with the same list: a new picker at the clock's time.
  void Refresh() {
    ASSERT_TRUE(Update(config_, uris_).ok());
    Drain();
  }
  std::vector<BackendStats> Backends() {
    for (ChannelStats& s : StatsSnapshot()) {
      if (s.label == label_) return s.backends;
    }
    ADD_FAILURE() << "no stats for " << label_;
    return {};
  }
  // Every key routes as the core does with the stats' effective weights.
  void ExpectRoutingMatchesEffectiveWeights(size_t keys) {
    const std::vector<BackendStats> stats = Backends();
    ASSERT_EQ(stats.size(), 4u);
    std::vector<Candidate> candidates;
    candidates.reserve(stats.size());
    for (const BackendStats& b : stats) {
      candidates.push_back(
          {b.identity, static_cast<uint32_t>(b.effective_weight), true});
    }
    for (size_t k = 0; k < keys; ++k) {
      const std::string key = absl::StrCat("key-", k);
      ASSERT_EQ(
          Pick(key).backend,
          static_cast<int>(WeightedRendezvous::Pick(key, candidates).value()))
          << key;
    }
  }

  std::string config_;
};

TEST_F(SlowStartLbTest, AFakeClockSlowStartPublishesEachStepsWeights) {
  internal::SetSlowStartClockForTesting(&FakeNow);
  ScaleOut(kWeightedRendezvousPolicy, R"({"window":"60s"})");
  std::vector<BackendStats> stats = Backends();
  ASSERT_EQ(stats.size(), 4u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(stats[i].effective_weight, 1024u);
  EXPECT_EQ(stats[3].effective_weight, 102u);  // 10 % of 1 x 1024
  EXPECT_EQ(stats[3].weight_scale, 1024u);
  EXPECT_EQ(internal::PendingSlowStartTimersForTesting(), 1);
  ExpectRoutingMatchesEffectiveWeights(5000);
  g_now += absl::Seconds(30);  // step 25 of 50
  Refresh();
  EXPECT_EQ(Backends()[3].effective_weight, 1024u * (10 * 50 + 90 * 25) / 5000);
  ExpectRoutingMatchesEffectiveWeights(5000);
  // A short failure keeps the position.
  SetState(3, GRPC_CHANNEL_TRANSIENT_FAILURE, absl::UnavailableError("x"));
  g_now += absl::Seconds(6);
  SetState(3, GRPC_CHANNEL_READY);
  Drain();
  EXPECT_EQ(Backends()[3].effective_weight, 1024u * (10 * 50 + 90 * 30) / 5000);
  g_now += absl::Seconds(24);  // the end
  Refresh();
  stats = Backends();
  for (const BackendStats& b : stats) {
    EXPECT_EQ(b.effective_weight, 1u);
    EXPECT_EQ(b.weight_scale, 1u);
  }
  EXPECT_EQ(internal::PendingSlowStartTimersForTesting(), 0);
  for (int k = 0; k < 2000; ++k) {
    const std::string key = absl::StrCat("key-", k);
    EXPECT_EQ(Pick(key).backend, Owner(key)) << key;
  }
}

// Every step of a slow start on the injected monotonic clock while the wall
// clock jumps an hour back and forward between steps: each step's weight is
// exactly e_j, keys only ever move onto the new backend and at most once, and
// the ramp ends exactly at the window with no timer left.
TEST_F(SlowStartLbTest, WallClockStepsMoveNoStepAndNoKeyTwice) {
  ASSERT_TRUE(kShimLoaded) << "the wall-clock shim is not loaded";
  WallClockShift shift;
  internal::SetSlowStartClockForTesting(&FakeNow);
  const router::RampTime start = g_now;
  ScaleOut(kWeightedRendezvousPolicy, R"({"window":"60s"})");
  constexpr size_t kKeys = 3000;
  const uint32_t steps = router::SlowStart::StepsFor(10);
  std::vector<int> owner(kKeys);
  std::vector<int> moves(kKeys, 0);
  for (size_t k = 0; k < kKeys; ++k) {
    owner[k] = Pick(absl::StrCat("key-", k)).backend;
  }
  for (uint32_t j = 1; j <= steps; ++j) {
    // -1 h, +1 h, back to 0, ... from one step to the next.
    WallClockShift::Set(std::chrono::hours(j % 3 == 0   ? 0
                                           : j % 3 == 1 ? -1
                                                        : 1));
    g_now = start + router::SlowStart::StepOffset(absl::Seconds(60), j, steps);
    Refresh();
    const BackendStats added = Backends()[3];
    if (j < steps) {
      ASSERT_EQ(added.effective_weight,
                router::SlowStart::EffectiveWeight(1, 1024, 10, j, steps))
          << "step " << j;
    } else {
      EXPECT_EQ(added.effective_weight, 1u);
      EXPECT_EQ(added.weight_scale, 1u);
    }
    for (size_t k = 0; k < kKeys; ++k) {
      const int now = Pick(absl::StrCat("key-", k)).backend;
      if (now == owner[k]) continue;
      ASSERT_EQ(now, 3) << "key-" << k << " moved between old backends";
      ++moves[k];
      owner[k] = now;
    }
  }
  for (size_t k = 0; k < kKeys; ++k) ASSERT_LE(moves[k], 1) << "key-" << k;
  for (size_t k = 0; k < kKeys; ++k) {
    ASSERT_EQ(owner[k], Owner(absl::StrCat("key-", k))) << "key-" << k;
  }
  EXPECT_EQ(internal::PendingSlowStartTimersForTesting(), 0);
}

TEST_F(SlowStartLbTest, BackendsAtTheChannelsStartSkipSlowStart) {
  internal::SetSlowStartClockForTesting(&FakeNow);
  MakePolicy(kBoundedLoadRendezvousPolicy);
  ASSERT_TRUE(Update(Config(kBoundedLoadRendezvousPolicy,
                            R"("slowStart":{"window":"60s"})"),
                     uris_)
                  .ok());
  SetState(0, GRPC_CHANNEL_READY);
  g_now += absl::Seconds(1);
  for (int i = 1; i < 4; ++i) SetState(i, GRPC_CHANNEL_READY);
  Drain();
  for (const BackendStats& b : Backends()) EXPECT_EQ(b.effective_weight, 1u);
  EXPECT_EQ(internal::PendingSlowStartTimersForTesting(), 0);
}

TEST_F(SlowStartLbTest, TheEventEngineTimersRunSlowStartToItsEnd) {
  // Real clock and timers: 50 steps of 4 ms.
  ScaleOut(kBoundedLoadRendezvousPolicy, R"({"window":"0.2s"})");
  int pickers = 0;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (Backends()[3].weight_scale != 1 &&
         std::chrono::steady_clock::now() < deadline) {
    ExecCtx exec_ctx;
    while (auto event = helper_->GetEvent()) {
      if (auto* u = absl::get_if<FakeHelper::StateUpdate>(&*event)) {
        picker_ = std::move(u->picker);
        ++pickers;
      }
    }
    absl::SleepFor(absl::Milliseconds(2));
  }
  Drain();
  EXPECT_EQ(Backends()[3].weight_scale, 1u);
  EXPECT_EQ(Backends()[3].effective_weight, 1u);
  EXPECT_GE(pickers, 2);  // at least some steps published on their own
  EXPECT_EQ(internal::PendingSlowStartTimersForTesting(), 0);
}

TEST_F(SlowStartLbTest, ShutdownDuringSlowStartCancelsItsTimer) {
  internal::SetSlowStartClockForTesting(&FakeNow);
  ScaleOut(kWeightedRendezvousPolicy, R"({"window":"3600s"})");
  ASSERT_EQ(internal::PendingSlowStartTimersForTesting(), 1);
  {
    ExecCtx exec_ctx;
    picker_.reset();
    policy_.reset();
  }
  EXPECT_EQ(internal::PendingSlowStartTimersForTesting(), 0);
}

}  // namespace
}  // namespace poise::grpc_lb
