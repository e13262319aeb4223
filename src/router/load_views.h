// The loads a pick's walk compares (the core's load views, src/core/
// key_order.h): each answers "candidate i's load" (Load, read only for the
// candidates the walk visits) and "may i be chosen" (Admits). A picker
// chooses its view when it is built; the walk is the same for every view.
#ifndef POISE_SRC_ROUTER_LOAD_VIEWS_H_
#define POISE_SRC_ROUTER_LOAD_VIEWS_H_

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <vector>

#include "poise/bound.h"
#include "poise/in_flight.h"
#include "poise/types.h"
#include "src/router/backend_set.h"
#include "src/router/fleet_load.h"
#include "src/router/stats_registry.h"

namespace poise::router {

// This thread's generator for the router's random choices (a keyless call's
// key, the herding rule's draw), seeded once per thread.
std::mt19937_64& ThreadRandom();

// The hard limit (maxInFlightPerBackend, P4) and the slots a pick lost to
// other picks, as a filter every view applies: a backend at the limit, or
// one whose slot this pick lost at its bound, is passed over as full. A
// lost backend is read as full for the rest of the pick rather than read
// again: a faster picker could free and retake it every time.
class SlotFilter final {
 public:
  SlotFilter(const InFlightCounter* const* counters, uint64_t limit)
      : counters_(counters), limit_(limit) {}
  bool Admits(size_t i) const {
    return (in_zone_ == nullptr || in_zone_[i] == want_zone_) &&
           (limit_ == InFlightCounter::kNoLimit ||
            counters_[i]->Load() < limit_) &&
           (lost_.empty() || !Lost(i));
  }
  void Lose(size_t i) { lost_.push_back(static_cast<uint32_t>(i)); }
  // Every backend read again (a walk under new bounds).
  void ForgetLost() { lost_.clear(); }
  bool limited() const { return limit_ != InFlightCounter::kNoLimit; }
  // P8: admits only the backends inside the local zone (`inside`) or only
  // those outside it; `in_zone[i]` is 1 for a backend of the zone. A walk
  // over the key's order with this filter is the key's order over that
  // subset (the contract's K5 compares each pair on its own).
  SlotFilter& Within(const uint8_t* in_zone, bool inside) {
    in_zone_ = in_zone;
    want_zone_ = inside ? 1 : 0;
    return *this;
  }

 private:
  bool Lost(size_t i) const {
    return std::find(lost_.begin(), lost_.end(), i) != lost_.end();
  }
  const InFlightCounter* const* counters_;
  uint64_t limit_;
  const uint8_t* in_zone_ = nullptr;  // null: every zone
  uint8_t want_zone_ = 1;
  std::vector<uint32_t> lost_;  // empty on every pick that loses no slot
};

// weighted_rendezvous: no bound, so no load is read (every backend has
// room); only the filter chooses.
class NoLoads final {
 public:
  explicit NoLoads(SlotFilter filter) : filter_(std::move(filter)) {}
  static uint64_t Load(size_t /*i*/) { return 0; }
  bool Admits(size_t i) const { return filter_.Admits(i); }
  SlotFilter& filter() { return filter_; }
  static bool DropRule() { return false; }

 private:
  SlotFilter filter_;
};

// bounded_load_rendezvous (P3): the load scope's counters.
class ScopeLoads final {
 public:
  ScopeLoads(const InFlightCounter* const* counters, SlotFilter filter)
      : counters_(counters), filter_(std::move(filter)) {}
  uint64_t Load(size_t i) const { return counters_[i]->Load(); }
  bool Admits(size_t i) const { return filter_.Admits(i); }
  SlotFilter& filter() { return filter_; }
  static bool DropRule() { return false; }

 private:
  const InFlightCounter* const* counters_;
  SlotFilter filter_;
};

// serverLoad (P7): what a picker keeps of the fleet's loads, its READY
// backends' reports and the sum of the others' calls, and the views a pick
// reads them through.
class FleetLoads final {
 public:
  // `ready[i]`: backend i is READY; weights are the READY weights (W their
  // sum, 0: it does not fit).
  FleetLoads(const BackendList& list, std::vector<bool> ready,
             std::vector<uint32_t> weights, uint64_t ready_weight,
             uint32_t factor_percent, int64_t max_report_age_ns,
             std::shared_ptr<PolicyStats> stats);

  // E_i of READY backend i at `now_ns`.
  uint64_t EstimateOf(size_t i, int64_t now_ns) const {
    return FleetEstimate(ReportOf(i, now_ns),
                         list_->backends[i].cell->in_flight->Load());
  }

  // L at `now_ns`: the others' calls over the READY backends with a fresh
  // report, each capped at its own bound (MostAtItsBound), plus this
  // client's own (`own_total`, its scope's). The others' part is summed
  // again at most every kSumPeriodNs: reading every READY backend's report
  // on every pick would cost O(n), and a sum a millisecond old moves the
  // bounds by little (the loads compared are read at the pick). Whether
  // some READY backend had no fresh report at that sum: `*without_report`.
  uint64_t Total(int64_t now_ns, uint64_t own_total,
                 bool* without_report) const;

  // Backend i's capacity under the fleet-wide bound of `total` calls (0
  // when W does not fit).
  UInt128 CapacityOf(size_t i, uint64_t total) const {
    if (ready_weight_ == 0) return 0;
    return Bound(factor_percent_, total, weights_[i], ready_weight_).Capacity();
  }

  // A pick's view, first attempt or retry: the herding rule (fleet_load.h),
  // or, after the rule left no room anywhere, the bound alone over the
  // estimates. A first attempt's visits are asks (`visits_ask`); a retry's
  // are not: retries are few, and their longer walks counted as asks would
  // inflate this client's demand for every backend they pass, so that the
  // rule refused the owners' room to first attempts.
  class View final {
   public:
    View(const FleetLoads& fleet, int64_t now_ns, uint64_t total,
         uint64_t own_total, bool visits_ask, SlotFilter filter);
    uint64_t Load(size_t i);
    bool Admits(size_t i) const { return filter_.Admits(i); }
    SlotFilter& filter() { return filter_; }
    // The herding rule yields to the bound alone (once): whether it did.
    bool DropRule() {
      const bool was = herding_;
      herding_ = false;
      return was;
    }

   private:
    const FleetLoads& fleet_;
    int64_t now_ns_;
    uint64_t total_;
    double share_;  // this client's part of the fleet's calls, its own one in
    bool visits_ask_;
    bool herding_ = true;
    SlotFilter filter_;
  };

 private:
  std::optional<FreshReport> ReportOf(size_t i, int64_t now_ns) const {
    return list_->backends[i].cell->fleet().report.Fresh(now_ns,
                                                         max_report_age_ns_);
  }

  static constexpr int64_t kSumPeriodNs = 1'000'000;
  const BackendList* list_;  // the picker owns it
  std::vector<bool> ready_;
  std::vector<uint32_t> weights_;
  uint64_t ready_weight_;
  uint32_t factor_percent_;
  int64_t max_report_age_ns_;
  std::shared_ptr<PolicyStats> stats_;
  // The last sum of the others' part; picks on any thread refresh it.
  mutable std::atomic<int64_t> sum_at_ns_{ReportSlot::kNever};
  mutable std::atomic<uint64_t> others_sum_{0};
  mutable std::atomic<bool> sum_without_report_{false};
};

// P8's walk inside the local zone under serverLoad: the zone's bound reads
// the scope's counts (the walk's Load), and a backend of the zone is chosen
// only while its fleet estimate E_i is also below its fleet-wide bound
// (Admits, read only for a backend with room by the zone's bound), so a
// zone with more callers than capacity sends its excess out. The fleet's
// bound is read without the herding rule: the zone's own callers are the
// ones that fill it, and the check must not depend on a draw.
class ZoneLoads final {
 public:
  ZoneLoads(const InFlightCounter* const* counters, const FleetLoads& fleet,
            int64_t now_ns, uint64_t fleet_total, SlotFilter filter)
      : counters_(counters),
        fleet_(fleet),
        now_ns_(now_ns),
        fleet_total_(fleet_total),
        filter_(std::move(filter)) {}
  uint64_t Load(size_t i) const { return counters_[i]->Load(); }
  bool Admits(size_t i) const {
    return filter_.Admits(i) &&
           fleet_.EstimateOf(i, now_ns_) < FleetCapacityOf(i);
  }
  SlotFilter& filter() { return filter_; }
  static bool DropRule() { return false; }
  // The bound a call to i carries (serverLoad.admission): the fleet-wide
  // one, the bound the backend can see.
  uint64_t FleetCapacityOf(size_t i) const {
    const UInt128 c = fleet_.CapacityOf(i, fleet_total_);
    return c > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(c);
  }

 private:
  const InFlightCounter* const* counters_;
  const FleetLoads& fleet_;
  int64_t now_ns_;
  uint64_t fleet_total_;
  SlotFilter filter_;
};

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_LOAD_VIEWS_H_
