// poise-grpc: the public API of the gRPC load-balancing policies.
//
// Call RegisterPolicies() once at start-up, before the first gRPC channel or
// server is created, then select a policy in the channel's service config:
//
//   {"loadBalancingConfig": [{"bounded_load_rendezvous": {
//       "hashHeader": "x-session-id", "balanceFactorPercent": 150}}]}
//
// This header needs no gRPC internals.
#ifndef POISE_GRPC_LB_H_
#define POISE_GRPC_LB_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace poise::grpc_lb {

inline constexpr char kWeightedRendezvousPolicy[] = "weighted_rendezvous";
inline constexpr char kBoundedLoadRendezvousPolicy[] =
    "bounded_load_rendezvous";

// Channel argument (string) naming a channel in StatsSnapshot(); without it
// the channel's target is used.
inline constexpr char kStatsLabelArg[] = "poise.stats_label";

// Registers both policies with gRPC's core configuration. Idempotent and
// thread-safe. It must run before the first channel or server exists: gRPC
// freezes its configuration then, and a later registration would abort the
// process, so a late call returns FailedPrecondition instead. It also refuses
// (FailedPrecondition) when the gRPC library loaded at run time is not the
// version this library was compiled against, because the policies depend on
// that version's internal ABI.
absl::Status RegisterPolicies();

// Parses a whole service config (the JSON given to
// grpc::ChannelArguments::SetServiceConfigJSON) exactly as a channel would and
// returns its errors. gRPC turns an invalid service config into a channel that
// fails every call while the real error only reaches the log; call this first.
// Requires RegisterPolicies().
absl::Status ValidateServiceConfig(std::string_view service_config_json);

// Statistics, safe to export as metrics: request keys never appear here.
struct BackendStats {
  std::string identity;  // the hashed identity (address text unless configured)
  std::string address;   // host:port
  uint64_t weight = 0;
  // The weight routing decides with now: weight * weight_scale, less while
  // slowStart ramps the backend up (then the exact integer the picker uses,
  // so poise-explain can replay a decision with it).
  uint64_t effective_weight = 0;
  uint64_t weight_scale = 1;    // 1 unless some backend is ramping
  uint64_t in_flight = 0;       // calls started and not finished
  uint64_t peak_in_flight = 0;  // highest in_flight since the counter existed
  uint64_t picks = 0;           // calls routed here
  uint64_t spilled_in = 0;      // of those, calls whose key's owner was full
};

struct ChannelStats {
  std::string label;  // kStatsLabelArg, or the channel target
  std::string
      policy;  // kWeightedRendezvousPolicy or kBoundedLoadRendezvousPolicy
  uint64_t picks = 0;         // completed picks
  uint64_t spills = 0;        // picks sent past a full owner
  uint64_t missing_key = 0;   // picks without the hash header
  uint64_t failed_picks = 0;  // picks failed by the policy (limit, missing key)
  std::vector<BackendStats> backends;  // the current address list, in order
};

// One entry per live policy instance (one per channel using the policies).
std::vector<ChannelStats> StatsSnapshot();

}  // namespace poise::grpc_lb

#endif  // POISE_GRPC_LB_H_
