#include "src/router/fleet_load.h"

#include <atomic>
#include <chrono>
#include <cmath>

namespace poise::router {
namespace {

std::atomic<int64_t (*)()> test_clock{nullptr};

}  // namespace

std::optional<uint64_t> ReportedCount(double value) {
  // 2^40 calls in flight on one backend is far past anything real.
  constexpr double kMaxCount = 1099511627776.0;
  if (!(value >= 0.0 && value <= kMaxCount)) return std::nullopt;  // and NaN
  return static_cast<uint64_t>(std::llround(value));
}

int64_t FleetNowNs() {
  if (int64_t(*now)() = test_clock.load(std::memory_order_acquire)) {
    return now();
  }
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void SetFleetClockForTesting(int64_t (*now_ns)()) {
  test_clock.store(now_ns, std::memory_order_release);
}

}  // namespace poise::router
