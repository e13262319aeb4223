// The rendezvous policies' picker and call tracker (rendezvous_picker.h).
#include "src/grpc/rendezvous_picker.h"

#include <string_view>
#include <utility>
#include <variant>

#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "poise/in_flight.h"
#include "src/grpc/rendezvous_trace.h"
#include "src/grpc/server_load.h"

namespace poise::grpc_lb {

namespace {

using grpc_core::LoadBalancingPolicy;

// Holds a call's in-flight slot from the pick to Finish(). A tracker
// destroyed without Start() (the call died before it began) gives the slot
// back when the guard goes.
class CallTracker final
    : public LoadBalancingPolicy::SubchannelCallTrackerInterface {
 public:
  explicit CallTracker(InFlightGuard slot) : slot_(std::move(slot)) {}

  void Start() override {}
  void Finish(FinishArgs /*args*/) override { slot_.Release(); }

 private:
  InFlightGuard slot_;
};

// serverLoad: also takes the backend's report from the call's trailer, with
// this client's count still holding the call (the backend counted it too).
class ReportingCallTracker final
    : public LoadBalancingPolicy::SubchannelCallTrackerInterface {
 public:
  ReportingCallTracker(InFlightGuard slot,
                       std::shared_ptr<router::BackendCell> cell,
                       std::shared_ptr<const router::Config> config,
                       std::shared_ptr<router::PolicyStats> stats,
                       const void* policy)
      : slot_(std::move(slot)),
        cell_(std::move(cell)),
        config_(std::move(config)),
        stats_(std::move(stats)),
        policy_(policy) {}

  void Start() override {}
  void Finish(FinishArgs args) override {
    // Parsed here, lazily: only calls whose server sent the trailer pay.
    const grpc_core::BackendMetricData* data =
        args.backend_metric_accessor == nullptr
            ? nullptr
            : args.backend_metric_accessor->GetBackendMetricData();
    if (data != nullptr) {
      TakeLoadReport(*data, config_->server_load->metric, *cell_, *stats_,
                     policy_);
    } else {
      POISE_TRACE(
          "[poise %p] a call ended without a load report: its backend counts "
          "only this client's calls once its last report ages out",
          policy_);
    }
    slot_.Release();
  }

 private:
  InFlightGuard slot_;
  const std::shared_ptr<router::BackendCell> cell_;
  const std::shared_ptr<const router::Config> config_;
  const std::shared_ptr<router::PolicyStats> stats_;
  const void* const policy_;
};

}  // namespace

RendezvousPicker::RendezvousPicker(
    const void* policy, const std::shared_ptr<const router::Config>& config,
    std::shared_ptr<const router::BackendList> list,
    const std::vector<router::BackendState>& states,
    std::shared_ptr<router::PolicyStats> stats, Subchannels subchannels,
    const std::vector<uint32_t>& effective_weights)
    : policy_(policy),
      header_(config->hash_header),
      reporting_config_(config->bounded && config->server_load.has_value()
                            ? config
                            : nullptr),
      stats_(stats),
      router_(std::make_shared<const router::Picker>(config, std::move(list),
                                                     states, std::move(stats),
                                                     effective_weights)),
      subchannels_(std::move(subchannels)) {
  stats_->SetPicker(router_);
}

RendezvousPicker::PickResult RendezvousPicker::Pick(PickArgs args) {
  std::string buffer;
  const absl::optional<absl::string_view> header =
      args.initial_metadata->Lookup(header_, &buffer);
  router::PickRequest request;
  if (header.has_value()) request.key.emplace(header->data(), header->size());
  // Attempt k + 1 of a configured retry carries k (retry_filter.cc); a
  // first attempt and a transparent retry carry nothing.
  std::string attempts_buffer;
  const absl::optional<absl::string_view> attempts =
      args.initial_metadata->Lookup(router::kPreviousAttemptsHeader,
                                    &attempts_buffer);
  if (attempts.has_value()) {
    request.previous_attempts = router::ParsePreviousAttempts(
        std::string_view(attempts->data(), attempts->size()));
  }
  router::PickOutcome outcome = router_->Pick(request);
  if (auto* c = std::get_if<router::PickOutcome::Complete>(&outcome.result)) {
    if (GRPC_TRACE_FLAG_ENABLED(poise_rendezvous_trace)) {
      TracePick(c->backend, c->spilled);
    }
    const grpc_core::RefCountedPtr<grpc_core::SubchannelInterface>& subchannel =
        subchannels_[c->backend];
    if (!c->slot.held()) return PickResult::Complete(subchannel);
    if (reporting_config_ != nullptr) {
      // NOLINTNEXTLINE(clang-analyzer-cplusplus.NewDeleteLeaks): as below
      return PickResult::Complete(
          subchannel,
          std::make_unique<ReportingCallTracker>(
              std::move(c->slot), router_->backends()[c->backend].cell,
              reporting_config_, stats_, policy_));
    }
    // The tracker is owned by the returned PickResult; the analyzer loses
    // it in absl::variant's move.
    // NOLINTNEXTLINE(clang-analyzer-cplusplus.NewDeleteLeaks)
    return PickResult::Complete(
        subchannel, std::make_unique<CallTracker>(std::move(c->slot)));
  }
  if (auto* f = std::get_if<router::PickOutcome::Fail>(&outcome.result)) {
    return Drop(std::move(f->status));
  }
  return PickResult::Queue();
}

void RendezvousPicker::TracePick(size_t index, bool spilled) const {
  const std::string_view identity = router_->backends()[index].identity;
  gpr_log(GPR_INFO, "[poise %p] pick -> %.*s%s", policy_,
          static_cast<int>(identity.size()), identity.data(),
          spilled ? " (spilled)" : "");
}

RendezvousPicker::PickResult RendezvousPicker::Drop(absl::Status status) const {
  POISE_TRACE("[poise %p] pick failed: %s", policy_, status.ToString().c_str());
  return PickResult::Drop(std::move(status));
}

}  // namespace poise::grpc_lb
