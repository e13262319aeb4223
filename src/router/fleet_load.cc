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

uint64_t HerdingLoad(const std::optional<FreshReport>& report, uint64_t own_now,
                     UInt128 capacity, double own_share, double own_asks_per_ns,
                     double uniform) {
  const uint64_t load = FleetEstimate(report, own_now);
  if (!report.has_value() || capacity <= load || (capacity >> 64) != 0) {
    return load;
  }
  const auto cap = static_cast<uint64_t>(capacity);
  return TakesRoom(*report, own_now, cap, own_share, own_asks_per_ns, uniform)
             ? load
             : cap;
}

std::optional<uint64_t> MostAtItsBound(uint32_t factor_percent, uint64_t rest,
                                       uint32_t weight, uint64_t total_weight) {
  const UInt128 fw = UInt128{factor_percent} * weight;
  const UInt128 hundred_w = UInt128{100} * total_weight;
  if (fw >= hundred_w) return std::nullopt;
  // No overflow: f w < 2^64 - 2^32 and R + 1 <= 2^64 keep the product below
  // 2^128 - 2^96, and 100 W < 2^71.
  const UInt128 numerator = fw * (UInt128{rest} + 1) + (hundred_w - 1);
  const UInt128 most = numerator / (hundred_w - fw);
  return most > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(most);
}

uint64_t OthersPartOfL(std::vector<LoadPart>& parts, uint64_t own_total,
                       uint32_t factor_percent, uint64_t total_weight) {
  // Each report is below 2^40: the sums stay far below 2^64 for any list a
  // channel can hold.
  uint64_t raw = own_total;
  for (const LoadPart& p : parts) raw += p.others;
  uint64_t sum = 0;
  for (LoadPart& p : parts) {
    const uint64_t estimate = p.others + p.own;
    uint64_t counted = estimate;
    if (total_weight != 0) {
      const std::optional<uint64_t> most =
          MostAtItsBound(factor_percent, raw > estimate ? raw - estimate : 0,
                         p.weight, total_weight);
      if (most.has_value() && estimate > *most) {
        counted = std::max(*most, p.own);
      }
    }
    p.capped = counted < estimate;
    sum += counted - p.own;
  }
  return sum;
}

namespace {

// A count decayed from `at_ns` to `now_ns` over `horizon`.
double Decayed(double count, int64_t at_ns, int64_t now_ns, double horizon) {
  return now_ns > at_ns
             ? count * std::exp(-static_cast<double>(now_ns - at_ns) / horizon)
             : count;
}

// Over the horizon, or the time since the first ask while shorter (then the
// count has not decayed much): not low for a client that just began.
double PerNs(double count, int64_t first_ns, int64_t now_ns, double horizon) {
  return count /
         std::min(horizon,
                  std::max(1.0, static_cast<double>(now_ns - first_ns)));
}

}  // namespace

double AskRate::Ask(int64_t now_ns, int64_t horizon_ns) {
  int64_t first = first_ns_.load(std::memory_order_relaxed);
  if (first == std::numeric_limits<int64_t>::min()) {
    first = now_ns;
    first_ns_.store(now_ns, std::memory_order_relaxed);
  }
  const auto horizon = static_cast<double>(horizon_ns);
  const double before =
      Decayed(count_.load(std::memory_order_relaxed),
              at_ns_.load(std::memory_order_relaxed), now_ns, horizon);
  count_.store(before + 1.0, std::memory_order_relaxed);
  at_ns_.store(now_ns, std::memory_order_relaxed);
  return PerNs(before, first, now_ns, horizon);
}

double AskRate::Rate(int64_t now_ns, int64_t horizon_ns) const {
  const int64_t first = first_ns_.load(std::memory_order_relaxed);
  if (first == std::numeric_limits<int64_t>::min()) return 0.0;
  const auto horizon = static_cast<double>(horizon_ns);
  return PerNs(Decayed(count_.load(std::memory_order_relaxed),
                       at_ns_.load(std::memory_order_relaxed), now_ns, horizon),
               first, now_ns, horizon);
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
