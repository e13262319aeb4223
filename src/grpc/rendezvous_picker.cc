// The rendezvous policies' picker and call tracker (rendezvous_picker.h).
#include "src/grpc/rendezvous_picker.h"

#include <chrono>
#include <optional>
#include <string_view>
#include <utility>
#include <variant>

#include "absl/strings/string_view.h"
#include "absl/types/optional.h"
#include "poise/in_flight.h"
#include "poise/load_reports.h"
#include "src/grpc/rendezvous_trace.h"
#include "src/grpc/server_load.h"

namespace poise::grpc_lb {

namespace {

using grpc_core::LoadBalancingPolicy;

// Holds a call's in-flight slot (when the policy counts calls in flight)
// from the pick to Finish(), and counts the call's end in its backend's and
// its channel's call metrics: its status, and its duration from Start()
// (gRPC 1.51 calls it as the pick completes) to Finish() on a steady clock.
// serverLoad: also takes the backend's report from the call's trailer, with
// this client's count still holding the call (the backend counted it too).
// A tracker destroyed without Finish() (the call died before it began)
// counts nothing and gives the slot back when the guard goes.
//
// It lives in the call's arena (CallState::Alloc, which gRPC offers for
// per-call objects), not on the heap: the call outlives the tracker (gRPC
// 1.51 holds it in the call's LoadBalancedCall, or in the PickResult while
// the pick runs) and frees the arena at its end, so deleting the tracker
// runs its destructor only.
class CallTracker final
    : public LoadBalancingPolicy::SubchannelCallTrackerInterface {
 public:
  static void* operator new(size_t size, LoadBalancingPolicy::CallState* call) {
    return call->Alloc(size);
  }
  // Called only if the constructor threw (it does not throw).
  static void operator delete(void* /*tracker*/,
                              LoadBalancingPolicy::CallState* /*call*/) {}
  // Only in an arena: no heap form, and deleting frees nothing (the check
  // does not count a deleted operator new as its pair).
  static void* operator new(size_t size) = delete;
  // NOLINTNEXTLINE(misc-new-delete-overloads)
  static void operator delete(void* /*tracker*/) {}

  // `reporting_config`: serverLoad's config, else null.
  CallTracker(InFlightGuard slot, std::shared_ptr<router::BackendCell> cell,
              std::shared_ptr<router::PolicyStats> stats,
              std::shared_ptr<const router::Config> reporting_config,
              const void* policy)
      : slot_(std::move(slot)),
        cell_(std::move(cell)),
        stats_(std::move(stats)),
        reporting_config_(std::move(reporting_config)),
        policy_(policy) {}

  void Start() override { start_ = std::chrono::steady_clock::now(); }
  void Finish(FinishArgs args) override {
    if (reporting_config_ != nullptr &&
        reporting_config_->server_load->admission) {
      // A refusal is the backend's word on its count, not a failure: it is
      // counted apart from the calls, which feed no health or outlier
      // state either way.
      if (const std::optional<uint64_t> count = RefusalCount(args.status)) {
        TakeRefusal(*count, *cell_, *stats_);
        slot_.Release();
        return;
      }
    }
    if (reporting_config_ != nullptr) TakeReport(args);
    // gRPC 1.51 finishes only started calls; one that was not took no time.
    const uint64_t duration_ns =
        start_.has_value()
            ? static_cast<uint64_t>(
                  std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - *start_)
                      .count())
            : 0;
    const int code = static_cast<int>(args.status.code());
    cell_->counts.Get().calls.Record(code, duration_ns);
    stats_->calls.Record(code, duration_ns);
    slot_.Release();
  }

 private:
  void TakeReport(const FinishArgs& args) {
    // Parsed here, lazily: only calls whose server sent the trailer pay.
    const grpc_core::BackendMetricData* data =
        args.backend_metric_accessor == nullptr
            ? nullptr
            : args.backend_metric_accessor->GetBackendMetricData();
    if (data != nullptr) {
      TakeLoadReport(*data, reporting_config_->server_load->metric, *cell_,
                     *stats_, policy_);
    } else {
      POISE_TRACE(
          "[poise %p] a call ended without a load report: its backend counts "
          "only this client's calls once its last report ages out",
          policy_);
    }
  }

  InFlightGuard slot_;
  const std::shared_ptr<router::BackendCell> cell_;
  const std::shared_ptr<router::PolicyStats> stats_;
  const std::shared_ptr<const router::Config> reporting_config_;
  const void* const policy_;
  std::optional<std::chrono::steady_clock::time_point> start_;
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
      admission_(reporting_config_ != nullptr &&
                 reporting_config_->server_load->admission),
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
    if (admission_ && c->bound > 0) AddBound(args, c->bound);
    // Every call gets a tracker: only a tracker tells the policy how a call
    // ended. It is owned by the returned PickResult.
    return PickResult::Complete(
        subchannels_[c->backend],
        std::unique_ptr<CallTracker>(new (args.call_state) CallTracker(
            std::move(c->slot), router_->backends()[c->backend].cell, stats_,
            reporting_config_, policy_)));
  }
  if (auto* f = std::get_if<router::PickOutcome::Fail>(&outcome.result)) {
    return Drop(std::move(f->status));
  }
  return PickResult::Queue();
}

void RendezvousPicker::AddBound(PickArgs& args, uint64_t bound) {
  // gRPC 1.51 keeps the value by reference (Slice::FromStaticString): it
  // lives in the call's arena, as long as the call.
  constexpr size_t kMaxDigits = 18;  // poise::server reads no more
  char digits[20];
  size_t n = 0;
  for (uint64_t rest = bound; rest > 0; rest /= 10) {
    digits[n++] = static_cast<char>('0' + rest % 10);
  }
  if (n > kMaxDigits) return;  // no bound a backend could reach
  char* value = static_cast<char*>(args.call_state->Alloc(n));
  for (size_t i = 0; i < n; ++i) value[i] = digits[n - 1 - i];
  args.initial_metadata->Add(kBoundHeader, absl::string_view(value, n));
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
