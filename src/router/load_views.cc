#include "src/router/load_views.h"

#include <utility>

namespace poise::router {

std::mt19937_64& ThreadRandom() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return rng;
}

FleetLoads::FleetLoads(const BackendList& list, std::vector<bool> ready,
                       std::vector<uint32_t> weights, uint64_t ready_weight,
                       uint32_t factor_percent, int64_t max_report_age_ns,
                       std::shared_ptr<PolicyStats> stats)
    : list_(&list),
      ready_(std::move(ready)),
      weights_(std::move(weights)),
      ready_weight_(ready_weight),
      factor_percent_(factor_percent),
      max_report_age_ns_(max_report_age_ns),
      stats_(std::move(stats)) {}

uint64_t FleetLoads::Total(int64_t now_ns, uint64_t own_total,
                           bool* without_report) const {
  const int64_t at = sum_at_ns_.load(std::memory_order_acquire);
  bool without = false;
  uint64_t others = 0;
  if (at != ReportSlot::kNever && now_ns - at < kSumPeriodNs && now_ns >= at) {
    without = sum_without_report_.load(std::memory_order_relaxed);
    others = others_sum_.load(std::memory_order_relaxed);
  } else {
    // Every READY backend's others part (0 without a fresh report) and own
    // count, then L from them with each capped (OthersPartOfL).
    thread_local std::vector<LoadPart> parts;
    thread_local std::vector<size_t> backends;
    parts.clear();
    backends.clear();
    for (size_t i = 0; i < ready_.size(); ++i) {
      if (!ready_[i]) continue;
      const std::optional<FreshReport> report = ReportOf(i, now_ns);
      without |= !report.has_value();
      parts.push_back({report.has_value() ? report->others : 0,
                       list_->backends[i].cell->in_flight->Load(),
                       weights_[i]});
      backends.push_back(i);
    }
    others = OthersPartOfL(parts, own_total, factor_percent_, ready_weight_);
    for (size_t p = 0; p < parts.size(); ++p) {
      if (!parts[p].capped) continue;
      stats_->capped_load_reports.fetch_add(1, std::memory_order_relaxed);
      list_->backends[backends[p]].cell->fleet().capped.fetch_add(
          1, std::memory_order_relaxed);
    }
    others_sum_.store(others, std::memory_order_relaxed);
    sum_without_report_.store(without, std::memory_order_relaxed);
    sum_at_ns_.store(now_ns, std::memory_order_release);
  }
  *without_report = without;
  return others + own_total;
}

FleetLoads::View::View(const FleetLoads& fleet, int64_t now_ns, uint64_t total,
                       uint64_t own_total, bool visits_ask, SlotFilter filter)
    : fleet_(fleet),
      now_ns_(now_ns),
      total_(total),
      share_(static_cast<double>(own_total + 1) /
             static_cast<double>(total + 1)),
      visits_ask_(visits_ask),
      filter_(std::move(filter)) {}

uint64_t FleetLoads::View::Load(size_t i) {
  if (!herding_) return fleet_.EstimateOf(i, now_ns_);
  // A first attempt's read is an ask: the walk reads only the backends it
  // visits, or the rule would see this client ask for every backend and
  // refuse the owners' room.
  BackendCell& cell = *fleet_.list_->backends[i].cell;
  AskRate& rate = cell.fleet().asks;
  const double asks = visits_ask_
                          ? rate.Ask(now_ns_, fleet_.max_report_age_ns_)
                          : rate.Rate(now_ns_, fleet_.max_report_age_ns_);
  return HerdingLoad(fleet_.ReportOf(i, now_ns_), cell.in_flight->Load(),
                     fleet_.CapacityOf(i, total_), share_, asks,
                     static_cast<double>(ThreadRandom()() >> 11) * 0x1p-53);
}

}  // namespace poise::router
