#include "src/router/fleet_load.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>

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

bool TakesRoom(const FreshReport& report, uint64_t own_now, uint64_t capacity,
               double own_share, double own_asks_per_ns, double uniform) {
  // Room this client made itself since the report: no one else knows of it.
  if (own_now < report.own_then) return true;
  const uint64_t load = report.others + own_now;
  if (load >= capacity) return false;
  const auto room = static_cast<double>(capacity - load);
  // The other clients' asks for the backend since the report: this client's
  // own rate scaled by their share of the calls to its own.
  const double others_asks = own_asks_per_ns * (1.0 / own_share - 1.0) *
                             static_cast<double>(report.age_ns);
  return others_asks <= room || uniform * others_asks < room;
}

double AskRate::Ask(int64_t now_ns, int64_t horizon_ns) {
  int64_t first = first_ns_.load(std::memory_order_relaxed);
  if (first == std::numeric_limits<int64_t>::min()) {
    first = now_ns;
    first_ns_.store(now_ns, std::memory_order_relaxed);
  }
  const int64_t at = at_ns_.load(std::memory_order_relaxed);
  const auto horizon = static_cast<double>(horizon_ns);
  const double decay =
      now_ns > at ? std::exp(-static_cast<double>(now_ns - at) / horizon) : 1.0;
  const double before = count_.load(std::memory_order_relaxed) * decay;
  count_.store(before + 1.0, std::memory_order_relaxed);
  at_ns_.store(now_ns, std::memory_order_relaxed);
  // Over the horizon, or the time since the first ask while shorter (then
  // the count has not decayed much): not low for a client that just began.
  const double span =
      std::min(horizon, std::max(1.0, static_cast<double>(now_ns - first)));
  return before / span;
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
