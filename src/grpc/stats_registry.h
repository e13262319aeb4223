// Live statistics of every rendezvous policy instance in the process, read by
// poise::grpc_lb::StatsSnapshot(). No gRPC types: the policy publishes into
// it, the public API reads from it.
#ifndef POISE_SRC_GRPC_STATS_REGISTRY_H_
#define POISE_SRC_GRPC_STATS_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "poise/grpc_lb.h"
#include "poise/in_flight.h"

namespace poise::grpc_lb {

// Per-backend-identity state shared by the policy, every picker generation
// and every call still in flight to it, so a call that outlives its backend's
// removal still releases into the right counter.
struct BackendCell {
  InFlightCounter in_flight;  // first: it is cache-line aligned
  std::atomic<uint64_t> picks{0};
  std::atomic<uint64_t> spilled_in{0};
};

// One policy instance's counters and current backend list.
class PolicyStats final {
 public:
  struct Backend {
    std::string identity;
    std::string address;
    uint32_t weight;
    std::shared_ptr<BackendCell> cell;
  };

  PolicyStats(std::string label, std::string policy)
      : label_(std::move(label)), policy_(std::move(policy)) {}

  std::atomic<uint64_t> picks{0};
  std::atomic<uint64_t> spills{0};
  std::atomic<uint64_t> missing_key{0};
  std::atomic<uint64_t> failed_picks{0};

  void SetBackends(std::vector<Backend> backends) {
    std::lock_guard<std::mutex> lock(mu_);
    backends_ = std::move(backends);
  }

  ChannelStats Snapshot() const;

 private:
  const std::string label_;
  const std::string policy_;
  mutable std::mutex mu_;
  std::vector<Backend> backends_;
};

// Registers `stats` until it is destroyed (the registry keeps weak pointers).
void RegisterPolicyStats(const std::shared_ptr<PolicyStats>& stats);

}  // namespace poise::grpc_lb

#endif  // POISE_SRC_GRPC_STATS_REGISTRY_H_
