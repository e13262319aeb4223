// Live statistics of every rendezvous policy instance in the process, read by
// poise::grpc_lb::StatsSnapshot(). No gRPC types: the policy publishes into
// it, the public API reads from it.
#ifndef POISE_SRC_ROUTER_STATS_REGISTRY_H_
#define POISE_SRC_ROUTER_STATS_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "poise/grpc_lb.h"
#include "src/router/backend_set.h"
#include "src/router/call_metrics.h"
#include "src/router/config.h"
#include "src/router/connectivity.h"

namespace poise::router {

class Picker;

// A stats label is kept to this many bytes; see BoundedStatsLabel. The
// number is stated in poise/grpc_lb.h and docs/metrics.md.
inline constexpr size_t kMaxStatsLabelBytes = 256;

// `label` as the statistics, the metrics, ExplainKey and the load scope name
// it: unchanged up to kMaxStatsLabelBytes; a longer one is its first bytes
// (cut before a UTF-8 character, not inside one), "~" and 16 lowercase hex
// digits of a 64-bit hash of the whole label (Mix64 of FNV-1a-64, the same
// in every process), kMaxStatsLabelBytes in all. Long labels that share
// their first bytes stay apart.
std::string BoundedStatsLabel(std::string label);

// How many labels whose channels are all gone keep totals of their own
// (stated in poise/grpc_lb.h and docs/metrics.md).
// Past that, the totals of the label whose last channel went longest ago
// are added to MetricsSnapshot::gone and the label is forgotten, so a
// process that dials ever new targets keeps a bounded text.
inline constexpr size_t kGoneLabelsKept = 32;

// One policy instance's counters and current backend list.
class PolicyStats final {
 public:
  // `label` is kept as BoundedStatsLabel(label).
  PolicyStats(std::string label, std::string policy);
  PolicyStats(const PolicyStats&) = delete;
  PolicyStats& operator=(const PolicyStats&) = delete;
  // A registered instance leaves its counters to its label's retired totals.
  ~PolicyStats();

  std::atomic<uint64_t> picks{0};
  std::atomic<uint64_t> spills{0};
  std::atomic<uint64_t> missing_key{0};
  std::atomic<uint64_t> failed_picks{0};
  std::atomic<uint64_t> retries{0};  // completed picks of retries (P6)
  // P8: completed picks to a backend of the local zone, and to one outside
  // it (counted only while the zone has a listed backend).
  std::atomic<uint64_t> zone_kept{0};
  std::atomic<uint64_t> zone_out{0};
  // serverLoad (fleet_load.h).
  std::atomic<bool> server_load{false};
  std::atomic<uint64_t> load_reports{0};
  std::atomic<uint64_t> refused_load_reports{0};
  std::atomic<uint64_t> picks_without_some_report{0};
  std::atomic<uint64_t> capped_load_reports{0};  // MostAtItsBound
  std::atomic<uint64_t> admission_refusals{0};   // serverLoad.admission
  // Every call of the channel that ended (call trackers), and the channel's
  // state as the policy last reported it.
  CallMetrics calls;
  std::atomic<Connectivity> connectivity{Connectivity::kIdle};

  // Publishes `backends` (null: none) as the current list.
  void SetBackends(std::shared_ptr<const BackendList> backends) {
    std::lock_guard<std::mutex> lock(mu_);
    backends_ = std::move(backends);
    effective_weights_.clear();
    weight_scale_ = 1;
  }

  // Publishes the weights routing uses (slow start): `weights[i]` of
  // backend i of the current list, all scaled by `scale`; empty: the list's.
  void SetEffectiveWeights(std::vector<uint32_t> weights, uint32_t scale) {
    std::lock_guard<std::mutex> lock(mu_);
    effective_weights_ = std::move(weights);
    weight_scale_ = scale;
  }

  // The config's balanceFactorPercent, for ExplainKey while no picker
  // routes.
  void SetBalanceFactor(uint32_t percent) {
    std::lock_guard<std::mutex> lock(mu_);
    balance_factor_percent_ = percent;
  }

  // What ExplainKey weighs while no picker routes (no backend READY): the
  // current list, the weights routing uses for it (slow start's, else the
  // list's: what the snapshot shows) and the balance factor, read together.
  struct Listed {
    std::shared_ptr<const BackendList> backends;  // null: none published
    std::vector<uint32_t> weights;                // by backend index
    uint32_t balance_factor_percent = Config::kDefaultBalanceFactorPercent;
  };
  Listed ListedNow() const;

  grpc_lb::ChannelStats Snapshot() const;
  // The channel's stats label, else its target (also the name its load
  // scope goes by).
  const std::string& label() const { return *label_; }

  // The channel's current picker, for ExplainKey: held weakly (the picker
  // holds these stats), so it is null once gRPC drops the picker; the policy
  // empties it when it publishes a picker of its own that queues or fails
  // (no backend READY), which gRPC may drop later.
  void SetPicker(std::weak_ptr<const Picker> picker) {
    std::lock_guard<std::mutex> lock(mu_);
    picker_ = std::move(picker);
  }
  std::shared_ptr<const Picker> picker() const {
    std::lock_guard<std::mutex> lock(mu_);
    return picker_.lock();
  }
  const std::string& policy() const { return policy_; }

 private:
  // The channel-wide part of Snapshot(): no load scope, no backends.
  grpc_lb::ChannelStats Counters() const;

  // Shared with every live instance of the same label (SharedLabel): by
  // default the label is the target, which may list every address, and many
  // channels to one target would each hold a copy.
  const std::shared_ptr<const std::string> label_;
  const std::string policy_;
  mutable std::mutex mu_;
  std::shared_ptr<const BackendList> backends_;
  std::vector<uint32_t> effective_weights_;
  uint32_t weight_scale_ = 1;
  uint32_t balance_factor_percent_ = Config::kDefaultBalanceFactorPercent;
  std::weak_ptr<const Picker> picker_;
};

// Registers `stats` until it is destroyed (the registry keeps weak pointers).
void RegisterPolicyStats(const std::shared_ptr<PolicyStats>& stats);

// A snapshot of every registered instance that is still alive.
std::vector<grpc_lb::ChannelStats> SnapshotAllPolicies();

// Every registered instance still alive whose label is `label` (compared
// as BoundedStatsLabel(label)).
std::vector<std::shared_ptr<PolicyStats>> PoliciesLabelled(
    std::string_view label);
// Adds `from`'s counters (not its gauges, states or backends) to `into`.
void AddChannelCounters(const grpc_lb::ChannelStats& from,
                        grpc_lb::ChannelStats& into);
void AddCallStats(const grpc_lb::CallStats& from, grpc_lb::CallStats& into);

// What the metrics read, taken at one moment: every registered instance
// alive, per label the counters its destroyed instances left (label and
// counters only), and the counters of the labels forgotten past
// kGoneLabelsKept. An instance is in exactly one of the three, so the sum of
// all totals never goes backwards; a label's own totals go backwards only
// when the label is forgotten, which happens only once it has no live
// instance.
struct MetricsSnapshot {
  std::vector<grpc_lb::ChannelStats> live;
  std::vector<grpc_lb::ChannelStats> retired;  // one per label, by label
  bool any_gone = false;       // whether any label was forgotten yet
  grpc_lb::ChannelStats gone;  // their counters, added; label empty
};
MetricsSnapshot SnapshotForMetrics();

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_STATS_REGISTRY_H_
