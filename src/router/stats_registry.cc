#include "src/router/stats_registry.h"

#include <algorithm>

namespace poise::router {
namespace {

struct Registry {
  std::mutex mu;
  std::vector<std::weak_ptr<PolicyStats>> entries;
};

Registry& GetRegistry() {
  static auto* registry = new Registry();  // never destroyed: safe at exit
  return *registry;
}

}  // namespace

grpc_lb::ChannelStats PolicyStats::Snapshot() const {
  grpc_lb::ChannelStats out;
  out.label = label_;
  out.policy = policy_;
  out.picks = picks.load(std::memory_order_relaxed);
  out.spills = spills.load(std::memory_order_relaxed);
  out.missing_key = missing_key.load(std::memory_order_relaxed);
  out.failed_picks = failed_picks.load(std::memory_order_relaxed);
  out.retries = retries.load(std::memory_order_relaxed);
  out.server_load = server_load.load(std::memory_order_relaxed);
  out.load_reports = load_reports.load(std::memory_order_relaxed);
  out.refused_load_reports =
      refused_load_reports.load(std::memory_order_relaxed);
  out.picks_without_some_report =
      picks_without_some_report.load(std::memory_order_relaxed);
  const int64_t now_ns = FleetNowNs();
  std::shared_ptr<const BackendList> backends;
  std::vector<uint32_t> effective;
  uint32_t scale = 1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    backends = backends_;
    effective = effective_weights_;
    scale = weight_scale_;
  }
  const bool has_effective =
      backends != nullptr && effective.size() == backends->backends.size();
  if (backends == nullptr) return out;
  out.load_scope = backends->scope->named() ? "PROCESS" : "CHANNEL";
  out.scope_in_flight = backends->scope->total().Load();
  out.scope_peak_in_flight = backends->scope->total().Peak();
  out.backends.reserve(backends->backends.size());
  for (size_t i = 0; i < backends->backends.size(); ++i) {
    const ListedBackend& b = backends->backends[i];
    grpc_lb::BackendStats s;
    s.identity = b.identity;
    s.address = b.address;
    s.weight = b.weight;
    s.effective_weight = has_effective ? effective[i] : b.weight;
    s.weight_scale = has_effective ? scale : 1;
    s.in_flight = b.cell->in_flight->Load();
    s.peak_in_flight = b.cell->in_flight->Peak();
    s.picks = b.cell->picks.load(std::memory_order_relaxed);
    s.spilled_in = b.cell->spilled_in.load(std::memory_order_relaxed);
    s.retried_in = b.cell->retried_in.load(std::memory_order_relaxed);
    const BackendCell::Fleet* fleet = b.cell->fleet_if_made();
    const int64_t received =
        fleet != nullptr ? fleet->report.received_ns() : ReportSlot::kNever;
    if (received != ReportSlot::kNever) {
      s.reported_load = fleet->report.last_reported();
      s.report_age_ms = (now_ns - received) / 1000000;
    }
    out.backends.push_back(std::move(s));
  }
  return out;
}

void RegisterPolicyStats(const std::shared_ptr<PolicyStats>& stats) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto& entries = registry.entries;
  entries.erase(std::remove_if(entries.begin(), entries.end(),
                               [](const std::weak_ptr<PolicyStats>& e) {
                                 return e.expired();
                               }),
                entries.end());
  entries.push_back(stats);
}

std::vector<grpc_lb::ChannelStats> SnapshotAllPolicies() {
  std::vector<std::shared_ptr<PolicyStats>> live;
  {
    Registry& registry = GetRegistry();
    std::lock_guard<std::mutex> lock(registry.mu);
    for (const auto& entry : registry.entries) {
      if (auto stats = entry.lock()) live.push_back(std::move(stats));
    }
  }
  std::vector<grpc_lb::ChannelStats> out;
  out.reserve(live.size());
  for (const auto& stats : live) out.push_back(stats->Snapshot());
  return out;
}

}  // namespace poise::router
