// Bounds over a fleet of clients (serverLoad): the calls in flight each
// backend reports (ORCA named utilization, "rif" by default) turned into the
// loads a bounded pick compares.
//
// A client sees its own calls on a backend exactly and the other clients'
// only as the backend last reported them. Per READY backend i it estimates
//
//   E_i = others_i + own_i,  others_i = max(0, reported_i - own_then_i)
//
// where own_then_i is this client's count on i when the report arrived (the
// report counts those calls too), so its own part is always current and only
// the others' part is as old as the report. The bounds are the usual ones
// (poise/bound.h) with L = the sum of the E_i: E_i < ceil(f (L + 1) w_i /
// (100 W)).
//
// A backend without a fresh report (none yet, older than maxReportAge, or a
// value no backend can report) counts only this client's calls, as without
// serverLoad: E_i = own_i.
//
// Herding: every client reads the same kind of stale report, so the others'
// part lags. Out-of-band streams start at different moments on different
// clients, which spreads their reports in time; a per-call report reaches the
// one client whose call ended. docs/fleet-bounds.md has the simulation
// (poise-sim --fleet) and the rules tried against herding.
#ifndef POISE_SRC_ROUTER_FLEET_LOAD_H_
#define POISE_SRC_ROUTER_FLEET_LOAD_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>

namespace poise::router {

// The reported value as a count of calls, or nullopt for a value no backend
// can report: negative, NaN, infinite, or above 2^40 (a broken or hostile
// report, which then counts as none). Rounded to the nearest count.
std::optional<uint64_t> ReportedCount(double value);

// others_i of a report of `reported` calls that arrived while this client had
// `own_then` calls of its own on the backend.
inline uint64_t OthersOf(uint64_t reported, uint64_t own_then) {
  return reported > own_then ? reported - own_then : 0;
}

// E_i: the fleet's calls in flight on a backend as this client knows them,
// from the others' part of a fresh report (nullopt: none) and its own now.
inline uint64_t FleetEstimate(std::optional<uint64_t> others,
                              uint64_t own_now) {
  return others.value_or(0) + own_now;
}

// The latest report one channel holds for one backend. Written by the calls
// that end on the backend and by its out-of-band stream, from any thread;
// read by picks. A reader may see the value of one report with the time of
// the next: both are of the same backend, a moment apart.
class ReportSlot final {
 public:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::min();

  // A report of `reported` calls, arrived at `now_ns` (steady clock) while
  // this client had `own_then` calls on the backend.
  void Store(uint64_t reported, uint64_t own_then, int64_t now_ns) {
    reported_.store(reported, std::memory_order_relaxed);
    others_.store(OthersOf(reported, own_then), std::memory_order_relaxed);
    received_ns_.store(now_ns, std::memory_order_release);
  }

  // others_i of the latest report if it is at most `max_age_ns` old at
  // `now_ns`, else nullopt.
  std::optional<uint64_t> FreshOthers(int64_t now_ns,
                                      int64_t max_age_ns) const {
    const int64_t at = received_ns_.load(std::memory_order_acquire);
    if (at == kNever || now_ns - at > max_age_ns) return std::nullopt;
    return others_.load(std::memory_order_relaxed);
  }

  // For stats: the latest value and when it arrived (kNever: none yet).
  uint64_t last_reported() const {
    return reported_.load(std::memory_order_relaxed);
  }
  int64_t received_ns() const {
    return received_ns_.load(std::memory_order_acquire);
  }

 private:
  std::atomic<uint64_t> reported_{0};
  std::atomic<uint64_t> others_{0};
  std::atomic<int64_t> received_ns_{kNever};
};

// The steady clock in nanoseconds: what report ages are measured on.
// Tests replace it (SetFleetClockForTesting); null restores it.
int64_t FleetNowNs();
void SetFleetClockForTesting(int64_t (*now_ns)());

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_FLEET_LOAD_H_
