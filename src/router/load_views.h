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
    return (limit_ == InFlightCounter::kNoLimit ||
            counters_[i]->Load() < limit_) &&
           (lost_.empty() || !Lost(i));
  }
  void Lose(size_t i) { lost_.push_back(static_cast<uint32_t>(i)); }
  bool limited() const { return limit_ != InFlightCounter::kNoLimit; }

 private:
  bool Lost(size_t i) const {
    return std::find(lost_.begin(), lost_.end(), i) != lost_.end();
  }
  const InFlightCounter* const* counters_;
  uint64_t limit_;
  std::vector<uint32_t> lost_;  // empty on every pick that loses no slot
};

// weighted_rendezvous: no bound, so no load is read (every backend has
// room); only the filter chooses.
class NoLoads final {
 public:
  explicit NoLoads(SlotFilter filter) : filter_(std::move(filter)) {}
  static uint64_t Load(size_t) { return 0; }
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

  // A first attempt's view (the herding rule, fleet_load.h: each visit is
  // an ask) or, after the rule left no room anywhere or for a retry, the
  // bound alone over the estimates.
  class View final {
   public:
    View(const FleetLoads& fleet, int64_t now_ns, uint64_t total,
         uint64_t own_total, bool herding, SlotFilter filter);
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
    bool herding_;
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

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_LOAD_VIEWS_H_
