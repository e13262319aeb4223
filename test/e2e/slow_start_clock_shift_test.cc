// Slow start while the wall clock is stepped (issue 29, item 2): the scale-out
// of slow_start_e2e_test.cc on the real clock, with CLOCK_REALTIME stepped an
// hour back a third of the way through the ramp, or forward at its start (an
// NTP correction, a VM resume). Asserted: no key moves twice (each key's
// serving backend changes at most once, and only for keys whose owner becomes
// the new backend), the ramp ends on time (its window after it was first seen,
// not at once and not an hour later), and no call fails. The binary
// re-executes itself with the wall-clock shim preloaded
// (test/support/wall_clock_shift.h).
#include "src/grpc/require_undebug.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include <grpc/support/time.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "test/support/e2e_harness.h"
#include "test/support/fake_resolved.h"
#include "test/support/slow_start_scale_out.h"
#include "test/support/wall_clock_shift.h"

namespace poise::grpc_lb {
namespace {

namespace scale_out = test_support::slow_start_scale_out;
using std::chrono::milliseconds;
using test_support::WaitFor;
using test_support::WallClockShift;
using Clock = scale_out::Clock;

constexpr milliseconds kWindow{3000};  // "3s" below
constexpr std::chrono::hours kStep{1};

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// Before main(): this process again with the shim, unless it has it.
const bool kShimLoaded =
    WallClockShift::LoadOrReexec(POISE_WALL_CLOCK_SHIFT_PATH);

#define POISE_REQUIRE_WALL_CLOCK_SHIFT()                                  \
  do {                                                                    \
    if (!kShimLoaded) {                                                   \
      GTEST_FAIL() << "the wall-clock shim is not loaded (LD_PRELOAD of " \
                   << POISE_WALL_CLOCK_SHIFT_PATH << ")";                 \
    }                                                                     \
  } while (false)

// The shim moves what the policies could read as "now" (absl::Now(),
// system_clock, gRPC's realtime clock) and leaves the monotonic clocks.
TEST(WallClockShift, StepsTheWallClockOnly) {
  POISE_REQUIRE_WALL_CLOCK_SHIFT();
  WallClockShift shift;
  const auto steady = std::chrono::steady_clock::now();
  const auto system = std::chrono::system_clock::now();
  const gpr_timespec realtime = gpr_now(GPR_CLOCK_REALTIME);
  WallClockShift::Set(-kStep);
  EXPECT_LT(std::chrono::system_clock::now() - system, -kStep / 2);
  EXPECT_LT(
      gpr_time_to_millis(gpr_time_sub(gpr_now(GPR_CLOCK_REALTIME), realtime)),
      -1800 * 1000);
  EXPECT_LT(std::chrono::steady_clock::now() - steady, milliseconds(1000));
  // absl::Now() interpolates between kernel readings: it follows within
  // its resampling interval.
  const absl::Time before = absl::FromChrono(system);
  EXPECT_TRUE(WaitFor([&] { return absl::Now() < before - absl::Minutes(30); },
                      std::chrono::seconds(10)));
}

// A scale-out with the wall clock stepped by `step` once the new backend is
// in slow start at `at_percent` of its weight or more.
void ScaleOutWithWallClockStep(std::chrono::nanoseconds step,
                               uint64_t at_percent, const std::string& label) {
  WallClockShift shift;
  example::BackendSet set;
  ASSERT_TRUE(set.Start(scale_out::kOld + 1, test_support::kHeader).ok());
  test_support::FakeResolved resolver;
  test_support::Client client("fake:///poise-slow-start",
                              scale_out::ScaleOutConfig("3s"), label,
                              resolver.Args());
  scale_out::ScaleOutRun run;
  bool stepped = false;
  const ::testing::AssertionResult ran = scale_out::ScaleOutUnderLoad(
      set, resolver, client, label,
      [&](const BackendStats& b) {
        if (!stepped && 100 * b.effective_weight >=
                            at_percent * b.weight * b.weight_scale) {
          stepped = true;
          WallClockShift::Set(step);
        }
      },
      &run);
  EXPECT_TRUE(stepped);
  EXPECT_EQ(run.failures, 0);

  // No key moves twice: a key's serving backend changes at most once, onto
  // the new backend, and only if that is its final owner.
  int moved_twice = 0;
  int moved_wrongly = 0;
  size_t moved = 0;
  for (size_t k = 0; k < run.per_key.size(); ++k) {
    int last = -1;
    int changes = 0;
    for (const auto& o : run.per_key[k]) {
      if (o.backend < 0) continue;
      if (last >= 0 && o.backend != last) {
        ++changes;
        if (o.backend != static_cast<int>(scale_out::kNew) ||
            run.final_owner[k] != scale_out::kNew) {
          ++moved_wrongly;
        }
      }
      last = o.backend;
    }
    moved_twice += changes > 1 ? 1 : 0;
    moved += changes > 0 ? 1 : 0;
  }
  // On time: the window after the poller first saw slow start (which is at
  // most a poll after it began), not at once and not an hour later.
  const double took =
      ran ? Ms(run.slow_start_done - run.slow_start_seen) : -1.0;
  std::printf(
      "[ wall clock %+lld s ] %d calls, %zu keys moved (%zu expected), %d "
      "moved twice, %d moved elsewhere; slow start done %.0f ms after it was "
      "seen (window %lld ms; -1: not within 20 s)\n",
      static_cast<long long>(
          std::chrono::duration_cast<std::chrono::seconds>(step).count()),
      run.calls, moved, run.moving, moved_twice, moved_wrongly, took,
      static_cast<long long>(kWindow.count()));
  EXPECT_EQ(moved_twice, 0);
  EXPECT_EQ(moved_wrongly, 0);
  ASSERT_TRUE(ran);
  EXPECT_EQ(moved, run.moving);
  EXPECT_GE(took, Ms(kWindow) / 2);
  EXPECT_LE(took, Ms(kWindow + milliseconds(1000)));
}

TEST(SlowStartWallClockStep, BackAnHourDuringTheRamp) {
  POISE_REQUIRE_WALL_CLOCK_SHIFT();
  // A third of the way: keys have moved onto the new backend, and a ramp
  // on the wall clock would send them back.
  ScaleOutWithWallClockStep(-kStep, 33, "wall-clock-back");
}

TEST(SlowStartWallClockStep, ForwardAnHourDuringTheRamp) {
  POISE_REQUIRE_WALL_CLOCK_SHIFT();
  // At once: a ramp on the wall clock would end with this step.
  ScaleOutWithWallClockStep(kStep, 0, "wall-clock-forward");
}

}  // namespace
}  // namespace poise::grpc_lb
