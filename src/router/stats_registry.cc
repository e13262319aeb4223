#include "src/router/stats_registry.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "poise/hash.h"
#include "src/core/weak_registry.h"

namespace poise::router {
namespace {

struct Registry {
  struct Entry {
    std::weak_ptr<PolicyStats> stats;
    const PolicyStats* instance;  // removed by its destructor
  };
  struct Retired {
    grpc_lb::ChannelStats counters;
    uint64_t last_retirement = 0;  // `retirements` when its last instance went
  };
  std::mutex mu;
  std::vector<Entry> entries;
  // Per label, the counters of its destroyed instances.
  std::map<std::string, Retired> retired;
  uint64_t retirements = 0;  // instances retired so far
  // The counters of the labels forgotten past kGoneLabelsKept.
  bool any_gone = false;
  grpc_lb::ChannelStats gone;
};

Registry& GetRegistry() {
  static auto* registry = new Registry();  // never destroyed: safe at exit
  return *registry;
}

// `label` as the string every live instance labelled so holds, else a new
// one (then found by the next instance of that label while anyone holds it).
// The registry's key is a second copy: one per label, not per instance.
std::shared_ptr<const std::string> SharedLabel(std::string label) {
  using Labels = internal::WeakRegistryLocked<std::string, const std::string>;
  static auto* labels = new Labels();  // never destroyed: safe at exit
  return labels->FindOrMake(label, [&label] {
    return std::make_shared<const std::string>(std::move(label));
  });
}

// While more than kGoneLabelsKept retired labels have no live instance,
// moves the one retired longest ago to the gone totals. A label with a live
// instance stays: its channel totals include its retired counters.
void ForgetOldestGoneLabels(Registry& registry) {
  if (registry.retired.size() <= kGoneLabelsKept) return;
  absl::flat_hash_set<std::string_view> live;
  for (const Registry::Entry& entry : registry.entries) {
    live.insert(entry.instance->label());
  }
  for (;;) {
    size_t gone_labels = 0;
    auto oldest = registry.retired.end();
    for (auto it = registry.retired.begin(); it != registry.retired.end();
         ++it) {
      if (live.contains(it->first)) continue;
      ++gone_labels;
      if (oldest == registry.retired.end() ||
          it->second.last_retirement < oldest->second.last_retirement) {
        oldest = it;
      }
    }
    if (gone_labels <= kGoneLabelsKept) return;
    AddChannelCounters(oldest->second.counters, registry.gone);
    registry.any_gone = true;
    registry.retired.erase(oldest);
  }
}

}  // namespace

std::string BoundedStatsLabel(std::string label) {
  if (label.size() <= kMaxStatsLabelBytes) return label;
  char hash[20];
  std::snprintf(hash, sizeof(hash), "~%016" PRIx64, Mix64(Fnv1a(label)));
  const size_t hash_size = std::strlen(hash);
  size_t keep = kMaxStatsLabelBytes - hash_size;
  // Back to a character's first byte: a cut inside a well-formed sequence
  // would make it ill-formed. A UTF-8 character has 3 continuation bytes at
  // most.
  for (int back = 0;
       back < 3 && (static_cast<uint8_t>(label[keep]) & 0xC0) == 0x80; ++back) {
    --keep;
  }
  label.resize(keep);
  label += hash;
  return label;
}

PolicyStats::PolicyStats(std::string label, std::string policy)
    : label_(SharedLabel(BoundedStatsLabel(std::move(label)))),
      policy_(std::move(policy)) {}

PolicyStats::~PolicyStats() {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  auto& entries = registry.entries;
  const auto it = std::find_if(
      entries.begin(), entries.end(),
      [this](const Registry::Entry& e) { return e.instance == this; });
  if (it == entries.end()) return;  // never registered
  entries.erase(it);
  Registry::Retired& retired = registry.retired[*label_];
  retired.counters.label = *label_;
  AddChannelCounters(Counters(), retired.counters);
  retired.last_retirement = ++registry.retirements;
  ForgetOldestGoneLabels(registry);
}

grpc_lb::ChannelStats PolicyStats::Counters() const {
  grpc_lb::ChannelStats out;
  out.label = *label_;
  out.policy = policy_;
  out.picks = picks.load(std::memory_order_relaxed);
  out.spills = spills.load(std::memory_order_relaxed);
  out.missing_key = missing_key.load(std::memory_order_relaxed);
  out.failed_picks = failed_picks.load(std::memory_order_relaxed);
  out.retries = retries.load(std::memory_order_relaxed);
  out.zone_kept = zone_kept.load(std::memory_order_relaxed);
  out.zone_out = zone_out.load(std::memory_order_relaxed);
  out.server_load = server_load.load(std::memory_order_relaxed);
  out.load_reports = load_reports.load(std::memory_order_relaxed);
  out.refused_load_reports =
      refused_load_reports.load(std::memory_order_relaxed);
  out.picks_without_some_report =
      picks_without_some_report.load(std::memory_order_relaxed);
  out.capped_load_reports = capped_load_reports.load(std::memory_order_relaxed);
  out.admission_refusals = admission_refusals.load(std::memory_order_relaxed);
  out.connectivity = ToString(connectivity.load(std::memory_order_relaxed));
  out.calls = calls.Read();
  return out;
}

PolicyStats::Listed PolicyStats::ListedNow() const {
  Listed out;
  std::lock_guard<std::mutex> lock(mu_);
  out.backends = backends_;
  out.balance_factor_percent = balance_factor_percent_;
  if (backends_ == nullptr) return out;
  const bool has_effective =
      effective_weights_.size() == backends_->backends.size();
  out.weights.reserve(backends_->backends.size());
  for (size_t i = 0; i < backends_->backends.size(); ++i) {
    out.weights.push_back(has_effective ? effective_weights_[i]
                                        : backends_->backends[i].weight);
  }
  return out;
}

grpc_lb::ChannelStats PolicyStats::Snapshot() const {
  grpc_lb::ChannelStats out = Counters();
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
    const BackendCell::Fleet* fleet = b.cell->fleet_if_made();
    const int64_t received =
        fleet != nullptr ? fleet->report.received_ns() : ReportSlot::kNever;
    if (received != ReportSlot::kNever) {
      s.reported_load = fleet->report.last_reported();
      s.capped_load_reports = fleet->capped.load(std::memory_order_relaxed);
      s.report_age_ms = (now_ns - received) / 1000000;
    }
    s.connectivity =
        ToString(b.cell->connectivity.load(std::memory_order_relaxed));
    if (const BackendCell::Counts* counts = b.cell->counts.IfMade()) {
      s.spilled_in = counts->spilled_in.load(std::memory_order_relaxed);
      s.retried_in = counts->retried_in.load(std::memory_order_relaxed);
      s.admission_refusals = counts->refused.load(std::memory_order_relaxed);
      s.calls = counts->calls.Read();
    }
    out.backends.push_back(std::move(s));
  }
  return out;
}

void RegisterPolicyStats(const std::shared_ptr<PolicyStats>& stats) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.entries.push_back({stats, stats.get()});
}

namespace {

// Every registered instance still alive.
std::vector<std::shared_ptr<PolicyStats>> LivePolicies() {
  std::vector<std::shared_ptr<PolicyStats>> live;
  {
    Registry& registry = GetRegistry();
    std::lock_guard<std::mutex> lock(registry.mu);
    for (const auto& entry : registry.entries) {
      if (auto stats = entry.stats.lock()) live.push_back(std::move(stats));
    }
  }
  return live;
}

}  // namespace

std::vector<std::shared_ptr<PolicyStats>> PoliciesLabelled(
    std::string_view label) {
  const std::string bounded = BoundedStatsLabel(std::string(label));
  std::vector<std::shared_ptr<PolicyStats>> out;
  for (std::shared_ptr<PolicyStats>& stats : LivePolicies()) {
    if (stats->label() == bounded) out.push_back(std::move(stats));
  }
  return out;
}

std::vector<grpc_lb::ChannelStats> SnapshotAllPolicies() {
  const std::vector<std::shared_ptr<PolicyStats>> live = LivePolicies();
  std::vector<grpc_lb::ChannelStats> out;
  out.reserve(live.size());
  for (const auto& stats : live) out.push_back(stats->Snapshot());
  return out;
}

void AddCallStats(const grpc_lb::CallStats& from, grpc_lb::CallStats& into) {
  for (size_t i = 0; i < into.by_status.size(); ++i) {
    into.by_status[i] += from.by_status[i];
  }
  for (size_t i = 0; i < into.duration_buckets.size(); ++i) {
    into.duration_buckets[i] += from.duration_buckets[i];
  }
  into.duration_sum_ns += from.duration_sum_ns;
}

void AddChannelCounters(const grpc_lb::ChannelStats& from,
                        grpc_lb::ChannelStats& into) {
  into.picks += from.picks;
  into.spills += from.spills;
  into.missing_key += from.missing_key;
  into.failed_picks += from.failed_picks;
  into.retries += from.retries;
  into.zone_kept += from.zone_kept;
  into.zone_out += from.zone_out;
  into.load_reports += from.load_reports;
  into.refused_load_reports += from.refused_load_reports;
  into.picks_without_some_report += from.picks_without_some_report;
  into.capped_load_reports += from.capped_load_reports;
  into.admission_refusals += from.admission_refusals;
  AddCallStats(from.calls, into.calls);
}

MetricsSnapshot SnapshotForMetrics() {
  Registry& registry = GetRegistry();
  std::vector<std::shared_ptr<PolicyStats>> live;
  MetricsSnapshot out;
  for (;;) {
    bool retiring = false;
    {
      std::lock_guard<std::mutex> lock(registry.mu);
      for (const auto& entry : registry.entries) {
        auto stats = entry.stats.lock();
        // Expired but still listed: its destructor is about to move its
        // counters to the retired totals; taken now, they would be in
        // neither.
        if (stats == nullptr) {
          retiring = true;
          break;
        }
        live.push_back(std::move(stats));
      }
      if (!retiring) {
        out.retired.reserve(registry.retired.size());
        for (const auto& [label, retired] : registry.retired) {
          out.retired.push_back(retired.counters);
        }
        out.any_gone = registry.any_gone;
        out.gone = registry.gone;
      }
    }
    if (!retiring) break;
    // Outside the lock: dropping the last reference runs a destructor,
    // which takes it.
    live.clear();
    std::this_thread::yield();
  }
  out.live.reserve(live.size());
  for (const auto& stats : live) out.live.push_back(stats->Snapshot());
  return out;
}

}  // namespace poise::router
