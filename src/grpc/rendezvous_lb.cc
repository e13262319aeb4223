// The weighted_rendezvous and bounded_load_rendezvous LB policies: gRPC's
// side of poise::router, whose rules (src/router) decide everything. This
// file turns ServerAddresses into router entries, keeps a subchannel per
// listed address, maps connectivity, publishes pickers that turn the router's
// PickOutcome into a PickResult, and traces (GRPC_TRACE=poise_rendezvous).
#include "src/grpc/internal_guard.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "poise/grpc_lb.h"
#include "poise/in_flight.h"
#include "src/core/lib/address_utils/sockaddr_utils.h"
#include "src/core/lib/channel/channel_args.h"
#include "src/core/lib/config/core_configuration.h"
#include "src/core/lib/debug/trace.h"
#include "src/core/lib/event_engine/default_event_engine.h"
#include "src/core/lib/gprpp/debug_location.h"
#include "src/core/lib/gprpp/orphanable.h"
#include "src/core/lib/gprpp/ref_counted.h"
#include "src/core/lib/gprpp/ref_counted_ptr.h"
#include "src/core/lib/iomgr/exec_ctx.h"
#include "src/core/lib/json/json.h"
#include "src/core/lib/load_balancing/lb_policy.h"
#include "src/core/lib/load_balancing/lb_policy_factory.h"
#include "src/core/lib/load_balancing/lb_policy_registry.h"
#include "src/core/lib/load_balancing/subchannel_interface.h"
#include "src/core/lib/resolver/server_address.h"
#include "src/core/lib/transport/connectivity_state.h"
#include "src/grpc/identity_attribute.h"
#include "src/grpc/registration.h"
#include "src/grpc/rendezvous_config.h"
#include "src/grpc/slow_start_clock.h"
#include "src/router/backend_set.h"
#include "src/router/config.h"
#include "src/router/connectivity.h"
#include "src/router/picker.h"
#include "src/router/slow_start.h"
#include "src/router/stats_registry.h"

namespace poise::grpc_lb {

// GRPC_TRACE=poise_rendezvous logs decisions and state changes.
grpc_core::TraceFlag poise_rendezvous_trace(false, "poise_rendezvous");

namespace internal {
namespace {
std::atomic<RampClock> g_ramp_clock{nullptr};
std::atomic<int> g_pending_ramp_timers{0};
}  // namespace

void SetRampClockForTesting(RampClock clock) { g_ramp_clock.store(clock); }
absl::Time RampNow() {
  const RampClock clock = g_ramp_clock.load();
  return clock != nullptr ? clock() : absl::Now();
}
int PendingRampTimersForTesting() { return g_pending_ramp_timers.load(); }
}  // namespace internal

namespace {

using grpc_core::ChannelArgs;
using grpc_core::Json;
using grpc_core::LoadBalancingPolicy;
using grpc_core::RefCountedPtr;
using grpc_core::ServerAddress;
using grpc_core::SubchannelInterface;

// The channel's target, as the client channel sets it (GRPC_ARG_SERVER_URI).
constexpr char kServerUriArg[] = "grpc.server_uri";

#define POISE_TRACE(...)                                   \
  do {                                                     \
    if (GRPC_TRACE_FLAG_ENABLED(poise_rendezvous_trace)) { \
      gpr_log(GPR_INFO, __VA_ARGS__);                      \
    }                                                      \
  } while (0)

// ---------------------------------------------------------------------------
// Config and addresses

class RendezvousLbConfig final : public LoadBalancingPolicy::Config {
 public:
  explicit RendezvousLbConfig(router::Config config)
      : config_(std::make_shared<const router::Config>(std::move(config))) {}

  absl::string_view name() const override {
    return config_->bounded ? kBoundedLoadRendezvousPolicy
                            : kWeightedRendezvousPolicy;
  }
  // Shared with every picker built from it.
  const std::shared_ptr<const router::Config>& config() const {
    return config_;
  }

 private:
  std::shared_ptr<const router::Config> config_;
};

// router::Connectivity mirrors grpc_connectivity_state value for value.
static_assert(static_cast<int>(router::Connectivity::kIdle) ==
                      GRPC_CHANNEL_IDLE &&
                  static_cast<int>(router::Connectivity::kConnecting) ==
                      GRPC_CHANNEL_CONNECTING &&
                  static_cast<int>(router::Connectivity::kReady) ==
                      GRPC_CHANNEL_READY &&
                  static_cast<int>(router::Connectivity::kTransientFailure) ==
                      GRPC_CHANNEL_TRANSIENT_FAILURE &&
                  static_cast<int>(router::Connectivity::kShutdown) ==
                      GRPC_CHANNEL_SHUTDOWN,
              "router::Connectivity must mirror grpc_connectivity_state");

// What the router reads of a resolved address: its text and attributes.
router::ResolverEntry EntryOf(const ServerAddress& address, std::string text) {
  router::ResolverEntry entry{std::move(text), std::nullopt, std::nullopt};
  const auto* weight =
      static_cast<const grpc_core::ServerAddressWeightAttribute*>(
          address.GetAttribute(grpc_core::ServerAddressWeightAttribute::
                                   kServerAddressWeightAttributeKey));
  if (weight != nullptr) entry.weight = weight->weight();
  const auto* identity = static_cast<const IdentityAttribute*>(
      address.GetAttribute(IdentityAttribute::kKey));
  if (identity != nullptr) {
    entry.identity = identity->identity();
  } else if (auto arg = address.args().GetString(kIdentityAddressArg);
             arg.has_value()) {
    entry.identity.emplace(arg->data(), arg->size());
  }
  return entry;
}

// ---------------------------------------------------------------------------
// Picker

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

// A router::Picker and the subchannel of each of its backends.
class RendezvousPicker final : public LoadBalancingPolicy::SubchannelPicker {
 public:
  using PickArgs = LoadBalancingPolicy::PickArgs;
  using PickResult = LoadBalancingPolicy::PickResult;

  // `subchannels[i]` is the subchannel of list->backends[i], as
  // CreateSubchannel returned it.
  RendezvousPicker(const void* policy,
                   const std::shared_ptr<const router::Config>& config,
                   std::shared_ptr<const router::BackendList> list,
                   const std::vector<router::BackendState>& states,
                   std::shared_ptr<router::PolicyStats> stats,
                   std::vector<RefCountedPtr<SubchannelInterface>> subchannels,
                   const std::vector<uint32_t>& effective_weights)
      : policy_(policy),
        header_(config->hash_header),
        router_(config, std::move(list), states, std::move(stats),
                effective_weights),
        subchannels_(std::move(subchannels)) {}

  PickResult Pick(PickArgs args) override {
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
    router::PickOutcome outcome = router_.Pick(request);
    if (auto* c = std::get_if<router::PickOutcome::Complete>(&outcome.result)) {
      if (GRPC_TRACE_FLAG_ENABLED(poise_rendezvous_trace)) {
        TracePick(c->backend, c->spilled);
      }
      const RefCountedPtr<SubchannelInterface>& subchannel =
          subchannels_[c->backend];
      if (!c->slot.held()) return PickResult::Complete(subchannel);
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

 private:
  POISE_COLD void TracePick(size_t index, bool spilled) const {
    gpr_log(GPR_INFO, "[poise %p] pick -> %s%s", policy_,
            router_.backends()[index].identity.c_str(),
            spilled ? " (spilled)" : "");
  }
  // Drop, not Fail: the call must end now even when it is wait_for_ready,
  // because a new picker would not change the answer.
  POISE_COLD PickResult Drop(absl::Status status) const {
    POISE_TRACE("[poise %p] pick failed: %s", policy_,
                status.ToString().c_str());
    return PickResult::Drop(std::move(status));
  }

  const void* policy_;
  const std::string header_;
  const router::Picker router_;
  const std::vector<RefCountedPtr<SubchannelInterface>> subchannels_;
};

// ---------------------------------------------------------------------------
// Policy

class RendezvousLb final : public LoadBalancingPolicy {
 public:
  RendezvousLb(Args args, bool bounded);

  absl::string_view name() const override {
    return bounded_ ? kBoundedLoadRendezvousPolicy : kWeightedRendezvousPolicy;
  }
  absl::Status UpdateLocked(UpdateArgs args) override;
  void ResetBackoffLocked() override;

 private:
  // One listed address's connection.
  class Backend final : public grpc_core::RefCounted<Backend> {
   public:
    explicit Backend(RefCountedPtr<SubchannelInterface> subchannel)
        : subchannel_(std::move(subchannel)) {}

    const RefCountedPtr<SubchannelInterface>& subchannel() const {
      return subchannel_;
    }
    bool removed() const { return watcher_ == nullptr; }
    void StartWatchingLocked(RefCountedPtr<RendezvousLb> policy);
    void ShutdownLocked();

    size_t index = 0;  // in set_.backends(), states_ and backends_

   private:
    class Watcher;

    RefCountedPtr<SubchannelInterface> subchannel_;
    SubchannelInterface::ConnectivityStateWatcherInterface* watcher_ = nullptr;
  };

  ~RendezvousLb() override;
  void ShutdownLocked() override;

  void OnBackendStateLocked(Backend* backend, grpc_connectivity_state state,
                            const absl::Status& status);
  // Publishes the channel's state and its picker.
  void UpdatePickerLocked();

  // Slow start: the effective weights now (empty when it is off), with the
  // ramp timer set for the next step and ramp changes traced.
  std::vector<uint32_t> EffectiveWeightsLocked();
  void ScheduleRampTimerLocked(absl::Time at);
  void CancelRampTimerLocked();
  void OnRampTimerLocked();

  const bool bounded_;
  std::shared_ptr<router::PolicyStats> stats_;
  RefCountedPtr<RendezvousLbConfig> config_;
  ChannelArgs args_;
  router::BackendSet set_;
  // Both by backend index in set_.backends().
  std::vector<RefCountedPtr<Backend>> backends_;
  std::vector<router::BackendState> states_;
  std::string resolution_note_;
  absl::Status address_error_;
  bool shutdown_ = false;
  // Slow start (src/router/slow_start.h); empty when the config has none.
  std::optional<router::SlowStart> slow_start_;
  std::vector<std::optional<router::SlowStart::Ramp>> traced_ramps_;
  // gRPC's default event engine, held: the ramp's timers run on it.
  std::shared_ptr<grpc_event_engine::experimental::EventEngine> event_engine_ =
      grpc_event_engine::experimental::GetDefaultEventEngine();
  // The pending step timer on the event engine, and when it is due.
  std::optional<grpc_event_engine::experimental::EventEngine::TaskHandle>
      ramp_timer_;
  absl::Time ramp_timer_at_;
};

class RendezvousLb::Backend::Watcher final
    : public SubchannelInterface::ConnectivityStateWatcherInterface {
 public:
  Watcher(RefCountedPtr<RendezvousLb> policy, RefCountedPtr<Backend> backend)
      : policy_(std::move(policy)), backend_(std::move(backend)) {}

  // gRPC 1.51 delivers these in the policy's work serializer.
  void OnConnectivityStateChange(grpc_connectivity_state state,
                                 absl::Status status) override {
    policy_->OnBackendStateLocked(backend_.get(), state, status);
  }
  grpc_pollset_set* interested_parties() override {
    return policy_->interested_parties();
  }

 private:
  RefCountedPtr<RendezvousLb> policy_;
  RefCountedPtr<Backend> backend_;
};

void RendezvousLb::Backend::StartWatchingLocked(
    RefCountedPtr<RendezvousLb> policy) {
  auto watcher = std::make_unique<Watcher>(std::move(policy), Ref());
  watcher_ = watcher.get();
  subchannel_->WatchConnectivityState(std::move(watcher));
  // Eager: spill targets must be warm before a hot key needs them.
  subchannel_->RequestConnection();
}

void RendezvousLb::Backend::ShutdownLocked() {
  if (watcher_ != nullptr) {
    subchannel_->CancelConnectivityStateWatch(watcher_);
    watcher_ = nullptr;
  }
}

RendezvousLb::RendezvousLb(Args args, bool bounded)
    : LoadBalancingPolicy(std::move(args)), bounded_(bounded) {
  std::string label(channel_args().GetString(kStatsLabelArg).value_or(""));
  if (label.empty()) {
    label = std::string(channel_args().GetString(kServerUriArg).value_or(""));
  }
  stats_ = std::make_shared<router::PolicyStats>(
      std::move(label), std::string(name().data(), name().size()));
  router::RegisterPolicyStats(stats_);
  POISE_TRACE("[poise %p] created %s", this, std::string(name()).c_str());
}

RendezvousLb::~RendezvousLb() { POISE_TRACE("[poise %p] destroyed", this); }

void RendezvousLb::ShutdownLocked() {
  POISE_TRACE("[poise %p] shutting down", this);
  shutdown_ = true;
  CancelRampTimerLocked();
  slow_start_.reset();
  for (auto& backend : backends_) backend->ShutdownLocked();
  backends_.clear();
  states_.clear();
  set_.Clear();
  stats_->SetBackends(nullptr);
}

void RendezvousLb::ResetBackoffLocked() {
  for (auto& backend : backends_) backend->subchannel()->ResetBackoff();
}

absl::Status RendezvousLb::UpdateLocked(UpdateArgs args) {
  // The registry only hands this policy configs its factory parsed.
  config_ = RefCountedPtr<RendezvousLbConfig>(
      static_cast<RendezvousLbConfig*>(args.config.release()));
  resolution_note_ = std::move(args.resolution_note);
  const std::optional<router::SlowStartConfig>& slow =
      config_->config()->slow_start;
  if (!slow.has_value()) {
    CancelRampTimerLocked();
    slow_start_.reset();
  } else if (!slow_start_.has_value()) {
    // Turned on now: what is listed before the next READY counts as the
    // start (it was serving, or about to, without a ramp).
    slow_start_.emplace(*slow);
  } else {
    slow_start_->set_config(*slow);
  }
  if (!args.addresses.ok()) {
    POISE_TRACE("[poise %p] address error: %s", this,
                args.addresses.status().ToString().c_str());
    address_error_ = args.addresses.status();
    // Keep serving the last good list; fail only if there never was one.
    if (!set_.empty()) {
      UpdatePickerLocked();
      return args.addresses.status();
    }
  } else {
    address_error_ = absl::OkStatus();
  }
  // Subchannels carry the channel args; new args need new subchannels.
  const bool args_changed = !(args.args == args_);
  args_ = args.args;
  std::vector<router::ResolverEntry> entries;
  std::vector<const ServerAddress*> addresses;  // entries[i]'s source
  if (args.addresses.ok()) {
    entries.reserve(args.addresses->size());
    addresses.reserve(args.addresses->size());
    for (const ServerAddress& address : *args.addresses) {
      auto text = grpc_sockaddr_to_string(&address.address(), false);
      if (!text.ok()) continue;
      entries.push_back(EntryOf(address, std::move(*text)));
      addresses.push_back(&address);
    }
  }
  std::vector<RefCountedPtr<Backend>> previous = std::move(backends_);
  std::vector<router::BackendState> previous_states = std::move(states_);
  backends_.clear();
  states_.clear();
  // Called in list order: backends_ and states_ follow set_.backends().
  auto admit = [&](const router::BackendSet::Admission& admission) {
    if (admission.previous.has_value() && !args_changed) {
      backends_.push_back(std::move(previous[*admission.previous]));
      states_.push_back(std::move(previous_states[*admission.previous]));
    } else {
      auto subchannel = channel_control_helper()->CreateSubchannel(
          *addresses[admission.entry], args_);
      if (subchannel == nullptr) return false;
      backends_.push_back(
          grpc_core::MakeRefCounted<Backend>(std::move(subchannel)));
      states_.emplace_back();
      backends_.back()->StartWatchingLocked(
          RefCountedPtr<RendezvousLb>(static_cast<RendezvousLb*>(
              Ref(DEBUG_LOCATION, "Watcher").release())));
    }
    backends_.back()->index = backends_.size() - 1;
    return true;
  };
  const router::BackendSet::UpdateReport report =
      set_.Update(entries, *config_->config(), admit);
  for (auto& gone : previous) {
    if (gone != nullptr) gone->ShutdownLocked();
  }
  stats_->SetBackends(set_.list());
  POISE_TRACE(
      "[poise %p] update: %zu backends (left out: %zu duplicate addresses, "
      "%zu duplicate identities, %zu without a subchannel)",
      this, set_.size(), report.duplicate_addresses,
      report.duplicate_identities, report.refused);
  if (report.table_rebuilt) {
    POISE_TRACE("[poise %p] identity table: %zu backends, %zu bytes", this,
                set_.table()->size(), set_.table()->memory_bytes());
  }
  UpdatePickerLocked();
  if (set_.empty()) {
    return router::AggregateState({}, address_error_, resolution_note_).status;
  }
  return absl::OkStatus();
}

void RendezvousLb::OnBackendStateLocked(Backend* backend,
                                        grpc_connectivity_state state,
                                        const absl::Status& status) {
  if (shutdown_ || backend->removed()) return;  // a stale notification
  POISE_TRACE("[poise %p] %s -> %s %s", this,
              set_.backends()[backend->index].address.c_str(),
              grpc_core::ConnectivityStateName(state),
              status.ok() ? "" : status.ToString().c_str());
  if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    channel_control_helper()->RequestReresolution();
  }
  if (state == GRPC_CHANNEL_IDLE) backend->subchannel()->RequestConnection();
  // Every change can flip a key between waiting and moving, so every change
  // publishes a picker; they are rare next to picks.
  states_[backend->index].Apply(static_cast<router::Connectivity>(state),
                                status);
  UpdatePickerLocked();
}

void RendezvousLb::UpdatePickerLocked() {
  const router::ChannelState channel =
      router::AggregateState(states_, address_error_, resolution_note_);
  const std::vector<uint32_t> effective = EffectiveWeightsLocked();
  if (channel.state == router::Connectivity::kReady) {
    std::vector<RefCountedPtr<SubchannelInterface>> subchannels;
    subchannels.reserve(backends_.size());
    for (const auto& b : backends_) subchannels.push_back(b->subchannel());
    channel_control_helper()->UpdateState(
        GRPC_CHANNEL_READY, absl::OkStatus(),
        std::make_unique<RendezvousPicker>(this, config_->config(), set_.list(),
                                           states_, stats_,
                                           std::move(subchannels), effective));
  } else if (channel.state == router::Connectivity::kConnecting) {
    channel_control_helper()->UpdateState(
        GRPC_CHANNEL_CONNECTING, absl::OkStatus(),
        std::make_unique<QueuePicker>(Ref(DEBUG_LOCATION, "QueuePicker")));
  } else {
    channel_control_helper()->UpdateState(
        GRPC_CHANNEL_TRANSIENT_FAILURE, channel.status,
        std::make_unique<TransientFailurePicker>(channel.status));
  }
}

std::vector<uint32_t> RendezvousLb::EffectiveWeightsLocked() {
  if (!slow_start_.has_value()) return {};
  router::SlowStart::Weights w =
      slow_start_->Observe(*set_.list(), states_, internal::RampNow());
  stats_->SetEffectiveWeights(w.effective, w.scale);
  if (GRPC_TRACE_FLAG_ENABLED(poise_rendezvous_trace)) {
    // One line per ramp step, start and end, by identity.
    traced_ramps_.resize(w.ramps.size());
    for (size_t i = 0; i < w.ramps.size(); ++i) {
      const auto& now = w.ramps[i];
      const auto& before = traced_ramps_[i];
      const bool changed = now.has_value() != before.has_value() ||
                           (now.has_value() && now->step != before->step);
      if (!changed) continue;
      const router::Backend& b = set_.backends()[i];
      if (now.has_value()) {
        POISE_TRACE(
            "[poise %p] slow start: %s step %u/%u, weight %u of %llu", this,
            b.identity.c_str(), now->step, now->steps, w.effective[i],
            static_cast<unsigned long long>(uint64_t{b.weight} * w.scale));
      } else {
        POISE_TRACE("[poise %p] slow start: %s at full weight", this,
                    b.identity.c_str());
      }
    }
    traced_ramps_ = w.ramps;
  }
  if (w.next_step.has_value()) {
    ScheduleRampTimerLocked(*w.next_step);
  } else {
    CancelRampTimerLocked();
  }
  return std::move(w.effective);
}

void RendezvousLb::ScheduleRampTimerLocked(absl::Time at) {
  if (ramp_timer_.has_value() && ramp_timer_at_ == at) return;
  CancelRampTimerLocked();
  const absl::Duration delay =
      std::max(at - internal::RampNow(), absl::ZeroDuration());
  ramp_timer_at_ = at;
  internal::g_pending_ramp_timers.fetch_add(1);
  ramp_timer_ = event_engine_->RunAfter(
      std::chrono::nanoseconds(absl::ToInt64Nanoseconds(delay)),
      [self = RefCountedPtr<RendezvousLb>(static_cast<RendezvousLb*>(
           Ref(DEBUG_LOCATION, "RampTimer").release()))]() mutable {
        internal::g_pending_ramp_timers.fetch_sub(1);
        grpc_core::ApplicationCallbackExecCtx app_exec_ctx;
        grpc_core::ExecCtx exec_ctx;
        RendezvousLb* policy = self.get();
        policy->work_serializer()->Run(
            [self = std::move(self)]() { self->OnRampTimerLocked(); },
            DEBUG_LOCATION);
      });
}

void RendezvousLb::CancelRampTimerLocked() {
  if (!ramp_timer_.has_value()) return;
  // False: the callback is running or about to; OnRampTimerLocked then
  // finds no timer (or shutdown_) and does nothing.
  if (event_engine_->Cancel(*ramp_timer_)) {
    internal::g_pending_ramp_timers.fetch_sub(1);
  }
  ramp_timer_.reset();
}

void RendezvousLb::OnRampTimerLocked() {
  if (shutdown_ || !ramp_timer_.has_value()) return;
  ramp_timer_.reset();
  UpdatePickerLocked();  // the next step's picker (and the next timer)
}

// ---------------------------------------------------------------------------
// Factory

class RendezvousLbFactory final : public grpc_core::LoadBalancingPolicyFactory {
 public:
  explicit RendezvousLbFactory(bool bounded) : bounded_(bounded) {}

  grpc_core::OrphanablePtr<LoadBalancingPolicy> CreateLoadBalancingPolicy(
      LoadBalancingPolicy::Args args) const override {
    return grpc_core::MakeOrphanable<RendezvousLb>(std::move(args), bounded_);
  }

  absl::string_view name() const override {
    return bounded_ ? kBoundedLoadRendezvousPolicy : kWeightedRendezvousPolicy;
  }

  absl::StatusOr<RefCountedPtr<LoadBalancingPolicy::Config>>
  ParseLoadBalancingConfig(const Json& json) const override {
    auto config = ParseRendezvousConfig(json, bounded_);
    if (!config.ok()) return config.status();
    return grpc_core::MakeRefCounted<RendezvousLbConfig>(std::move(*config));
  }

 private:
  const bool bounded_;
};

}  // namespace

void RegisterRendezvousLbPolicies(
    grpc_core::CoreConfiguration::Builder* builder) {
  builder->lb_policy_registry()->RegisterLoadBalancingPolicyFactory(
      std::make_unique<RendezvousLbFactory>(false));
  builder->lb_policy_registry()->RegisterLoadBalancingPolicyFactory(
      std::make_unique<RendezvousLbFactory>(true));
}

}  // namespace poise::grpc_lb
