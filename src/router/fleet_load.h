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
// (100 W)), each E_i counted in L at most up to its own bound (MostAtItsBound,
// below).
//
// A backend without a fresh report (none yet, older than maxReportAge, or a
// value no backend can report) counts only this client's calls, as without
// serverLoad: E_i = own_i.
//
// Herding. Every client reads reports of the same age, so a report that shows
// headroom H_i = cap_i - reported_i would draw, if each client took it whole,
// every client that asks for backend i until the next report: up to the
// fleet's asks in that time, not H_i calls. So a pick that finds room R_i =
// cap_i - E_i on a backend by a report of some age takes it at random, with
// probability R_i / A_i, where A_i estimates the other clients' asks for i
// since the report: this client's own rate of asks for i (picks that visited
// it) scaled by the others' share of the calls to its own, times the
// report's age. The fleet then takes about R_i calls per report, however
// many clients share it; a client alone (share 1) always takes it. Room the
// client made itself (its own calls that ended since the report) it takes
// back at once: no other client knows of it yet. docs/fleet-bounds.md has
// the simulation (poise-sim --fleet) that chose this rule over the others
// tried.
#ifndef POISE_SRC_ROUTER_FLEET_LOAD_H_
#define POISE_SRC_ROUTER_FLEET_LOAD_H_

#include <atomic>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "poise/types.h"

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

// A report young enough to count, as this client holds it.
struct FreshReport {
  uint64_t others;    // the reported calls less this client's own then
  uint64_t own_then;  // this client's calls on the backend when it arrived
  int64_t age_ns;
};

// E_i: the fleet's calls in flight on a backend as this client knows them,
// from a fresh report (nullopt: none) and its own calls now.
inline uint64_t FleetEstimate(const std::optional<FreshReport>& report,
                              uint64_t own_now) {
  return (report.has_value() ? report->others : 0) + own_now;
}

// The herding rule, for a backend with room by the bound (E_i below
// `capacity`) and a fresh report: whether this pick takes it. `own_share`
// is this client's part of the fleet's calls (in (0, 1]), `own_asks_per_ns`
// its own rate of asks for the backend and `uniform` a draw in [0, 1).
bool TakesRoom(const FreshReport& report, uint64_t own_now, uint64_t capacity,
               double own_share, double own_asks_per_ns, double uniform);

// The load a pick compares for a backend it visits: E_i, or its capacity
// (as full) when the herding rule does not take the room its fresh report
// shows. Without a report E_i is this client's own calls: no rule applies.
uint64_t HerdingLoad(const std::optional<FreshReport>& report, uint64_t own_now,
                     UInt128 capacity, double own_share, double own_asks_per_ns,
                     double uniform);

// Robust L. A report is the backend's word, and L sums them: one backend
// reporting 2^40 calls would raise every other backend's bound with it. So
// a backend counts in L at most as many calls as it could hold at its own
// bound, given what the other backends count: with R their estimates' sum,
// the largest E with E <= ceil(f (R + E + 1) w / (100 W)), which is
// floor((f w (R + 1) + 100 W - 1) / (100 W - f w)). A backend at or below
// its bound counts in full; one above it (a liar, or one the fleet
// overfilled) lifts the others' bounds no more than a backend at its own
// bound would. nullopt where f w >= 100 W (a backend holding 100 / f of the
// weight or more: its bound grows as fast as its own load, and no level
// caps it).
std::optional<uint64_t> MostAtItsBound(uint32_t factor_percent, uint64_t rest,
                                       uint32_t weight, uint64_t total_weight);

// One READY backend as L counts it: the others' part of its estimate (0
// without a fresh report) and this client's own calls on it.
struct LoadPart {
  uint64_t others;
  uint64_t own;
  uint32_t weight;
  bool capped = false;  // set by OthersPartOfL: counted below E_i
};

// L less this client's own calls (`own_total`, its load scope's: it may
// count calls on backends not in `parts`): each backend's E_i capped as
// above, but never below this client's own calls on it (those it knows
// exactly). `total_weight` is W (0: it does not fit; nothing is capped).
uint64_t OthersPartOfL(std::vector<LoadPart>& parts, uint64_t own_total,
                       uint32_t factor_percent, uint64_t total_weight);

// How often this client's picks ask for one backend (visit it in a key's
// order): a count decaying over `horizon_ns`, over the time since the first
// ask while that is shorter. Picks on several threads may lose one another's
// asks (no read-modify-write): an estimate, kept cheap.
class AskRate final {
 public:
  // Records an ask at `now_ns` and returns the rate before it, per ns.
  double Ask(int64_t now_ns, int64_t horizon_ns);
  // The rate at `now_ns`, per ns, without recording an ask.
  double Rate(int64_t now_ns, int64_t horizon_ns) const;

 private:
  std::atomic<double> count_{0.0};
  std::atomic<int64_t> at_ns_{0};
  std::atomic<int64_t> first_ns_{std::numeric_limits<int64_t>::min()};
};

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
    own_then_.store(own_then, std::memory_order_relaxed);
    received_ns_.store(now_ns, std::memory_order_release);
  }

  // The latest report if it is at most `max_age_ns` old at `now_ns`.
  std::optional<FreshReport> Fresh(int64_t now_ns, int64_t max_age_ns) const {
    const int64_t at = received_ns_.load(std::memory_order_acquire);
    if (at == kNever || now_ns - at > max_age_ns) return std::nullopt;
    const uint64_t own_then = own_then_.load(std::memory_order_relaxed);
    return FreshReport{
        OthersOf(reported_.load(std::memory_order_relaxed), own_then), own_then,
        now_ns - at};
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
  std::atomic<uint64_t> own_then_{0};
  std::atomic<int64_t> received_ns_{kNever};
};

// The steady clock in nanoseconds: what report ages are measured on.
// Tests replace it (SetFleetClockForTesting); null restores it.
int64_t FleetNowNs();
void SetFleetClockForTesting(int64_t (*now_ns)());

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_FLEET_LOAD_H_
