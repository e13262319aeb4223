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
#include <vector>

#include "poise/grpc_lb.h"
#include "src/router/backend_set.h"

namespace poise::router {

// One policy instance's counters and current backend list.
class PolicyStats final {
 public:
  PolicyStats(std::string label, std::string policy)
      : label_(std::move(label)), policy_(std::move(policy)) {}

  std::atomic<uint64_t> picks{0};
  std::atomic<uint64_t> spills{0};
  std::atomic<uint64_t> missing_key{0};
  std::atomic<uint64_t> failed_picks{0};
  std::atomic<uint64_t> retries{0};  // completed picks of retries (P6)
  // serverLoad (fleet_load.h).
  std::atomic<bool> server_load{false};
  std::atomic<uint64_t> load_reports{0};
  std::atomic<uint64_t> refused_load_reports{0};
  std::atomic<uint64_t> picks_without_some_report{0};

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

  grpc_lb::ChannelStats Snapshot() const;
  // The channel's stats label, else its target (also the name its load
  // scope goes by).
  const std::string& label() const { return label_; }

 private:
  const std::string label_;
  const std::string policy_;
  mutable std::mutex mu_;
  std::shared_ptr<const BackendList> backends_;
  std::vector<uint32_t> effective_weights_;
  uint32_t weight_scale_ = 1;
};

// Registers `stats` until it is destroyed (the registry keeps weak pointers).
void RegisterPolicyStats(const std::shared_ptr<PolicyStats>& stats);

// A snapshot of every registered instance that is still alive.
std::vector<grpc_lb::ChannelStats> SnapshotAllPolicies();

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_STATS_REGISTRY_H_
