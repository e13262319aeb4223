// The rendezvous policies' picker: a router::Picker and the subchannel of
// each of its backends, turning the router's PickOutcome into a PickResult;
// a call's in-flight slot rides on its call tracker until the call ends.
#ifndef POISE_SRC_GRPC_RENDEZVOUS_PICKER_H_
#define POISE_SRC_GRPC_RENDEZVOUS_PICKER_H_

#include "src/grpc/require_undebug.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "src/core/lib/gprpp/ref_counted_ptr.h"
#include "src/core/lib/load_balancing/lb_policy.h"
#include "src/core/lib/load_balancing/subchannel_interface.h"
#include "src/router/backend_set.h"
#include "src/router/config.h"
#include "src/router/connectivity.h"
#include "src/router/picker.h"
#include "src/router/stats_registry.h"

namespace poise::grpc_lb {

class RendezvousPicker final
    : public grpc_core::LoadBalancingPolicy::SubchannelPicker {
 public:
  using PickArgs = grpc_core::LoadBalancingPolicy::PickArgs;
  using PickResult = grpc_core::LoadBalancingPolicy::PickResult;
  using Subchannels =
      std::vector<grpc_core::RefCountedPtr<grpc_core::SubchannelInterface>>;

  // `subchannels[i]` is the subchannel of list->backends[i], as
  // CreateSubchannel returned it. `policy` only names the traces.
  RendezvousPicker(const void* policy,
                   const std::shared_ptr<const router::Config>& config,
                   std::shared_ptr<const router::BackendList> list,
                   const std::vector<router::BackendState>& states,
                   std::shared_ptr<router::PolicyStats> stats,
                   Subchannels subchannels,
                   const std::vector<uint32_t>& effective_weights);

  PickResult Pick(PickArgs args) override;

 private:
  POISE_COLD void TracePick(size_t index, bool spilled) const;
  // serverLoad.admission: the call's bound for its backend, as the request
  // header poise::kBoundHeader.
  static void AddBound(PickArgs& args, uint64_t bound);
  // Drop, not Fail: the call must end now even when it is wait_for_ready,
  // because a new picker would not change the answer.
  POISE_COLD PickResult Drop(absl::Status status) const;

  const void* policy_;
  const std::string header_;
  // serverLoad: the config its trackers read the metric from; else null.
  const std::shared_ptr<const router::Config> reporting_config_;
  const bool admission_;  // serverLoad.admission: calls carry their bound
  const std::shared_ptr<router::PolicyStats> stats_;
  // Shared with the stats (weakly), for ExplainKey.
  const std::shared_ptr<const router::Picker> router_;
  const Subchannels subchannels_;
};

}  // namespace poise::grpc_lb

#endif  // POISE_SRC_GRPC_RENDEZVOUS_PICKER_H_
