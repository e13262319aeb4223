// The weighted_rendezvous and bounded_load_rendezvous LB policies: gRPC's
// side of poise::router, whose rules (src/router) decide everything. This
// file turns ServerAddresses into router entries, keeps a subchannel per
// listed backend, maps connectivity, publishes pickers that turn the router's
// PickOutcome into a PickResult (rendezvous_picker.h), sets slow start's step
// timer (slow_start_timer.h), and traces (GRPC_TRACE=poise_rendezvous).
#include "src/grpc/require_undebug.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include <grpc/support/log.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "poise/grpc_lb.h"
#include "src/core/lib/address_utils/sockaddr_utils.h"
#include "src/core/lib/channel/channel_args.h"
#include "src/core/lib/config/core_configuration.h"
#include "src/core/lib/debug/trace.h"
#include "src/core/lib/gprpp/debug_location.h"
#include "src/core/lib/gprpp/orphanable.h"
#include "src/core/lib/gprpp/ref_counted.h"
#include "src/core/lib/gprpp/ref_counted_ptr.h"
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
#include "src/grpc/rendezvous_picker.h"
#include "src/grpc/rendezvous_trace.h"
#include "src/grpc/server_load.h"
#include "src/grpc/slow_start_clock.h"
#include "src/grpc/slow_start_timer.h"
#include "src/router/backend_set.h"
#include "src/router/config.h"
#include "src/router/connectivity.h"
#include "src/router/slow_start.h"
#include "src/router/stats_registry.h"

namespace poise::grpc_lb {

// Declared in rendezvous_trace.h.
grpc_core::TraceFlag poise_rendezvous_trace(false, "poise_rendezvous");

namespace {

using grpc_core::ChannelArgs;
using grpc_core::Json;
using grpc_core::LoadBalancingPolicy;
using grpc_core::RefCountedPtr;
using grpc_core::ServerAddress;
using grpc_core::SubchannelInterface;

// The channel's target, as the client channel sets it (GRPC_ARG_SERVER_URI).
constexpr char kServerUriArg[] = "grpc.server_uri";

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
  // B5: an invalid zone is dropped by the backend set.
  if (auto zone = address.args().GetString(kZoneAddressArg); zone.has_value()) {
    entry.zone.emplace(zone->data(), zone->size());
  }
  return entry;
}

// The config pickers route by: the service config's, with kLocalZoneArg in
// place of its localZone when the channel has that argument. A value that
// is not a zone (C10) is refused, naming the argument: the config's
// localZone stays (`*error` says why).
std::shared_ptr<const router::Config> WithLocalZoneArg(
    const std::shared_ptr<const router::Config>& config,
    const ChannelArgs& args, absl::Status* error) {
  *error = absl::OkStatus();
  const auto arg = args.GetString(kLocalZoneArg);
  if (!arg.has_value()) return config;
  const std::string zone(arg->data(), arg->size());
  if (!router::IsValidZone(zone)) {
    *error = absl::InvalidArgumentError(absl::StrCat(
        "channel argument ", kLocalZoneArg, ": ", router::kZoneRule));
    return config;
  }
  if (config->local_zone == zone) return config;
  auto replaced = std::make_shared<router::Config>(*config);
  replaced->local_zone = zone;
  return replaced;
}

// The router's entries for the resolved addresses (those gRPC can print),
// each with the address it came from.
struct ResolvedEntries {
  std::vector<router::ResolverEntry> entries;
  std::vector<const ServerAddress*> sources;  // entries[i]'s source
};

ResolvedEntries EntriesOf(
    const absl::StatusOr<grpc_core::ServerAddressList>& addresses) {
  ResolvedEntries resolved;
  if (!addresses.ok()) return resolved;
  resolved.entries.reserve(addresses->size());
  resolved.sources.reserve(addresses->size());
  for (const ServerAddress& address : *addresses) {
    auto text = grpc_sockaddr_to_string(&address.address(), false);
    if (!text.ok()) continue;
    resolved.entries.push_back(EntryOf(address, std::move(*text)));
    resolved.sources.push_back(&address);
  }
  return resolved;
}

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
  // One listed backend's subchannel and its connectivity watcher, held by
  // value in backends_: three pointers and no allocation of its own (one per
  // backend and channel). Its watcher names it by its index in backends_,
  // which UpdateBackendsLocked keeps current.
  class BackendSubchannel final {
   public:
    explicit BackendSubchannel(RefCountedPtr<SubchannelInterface> subchannel)
        : subchannel_(std::move(subchannel)) {}
    // Leaves `other` empty: its ShutdownLocked() then does nothing.
    BackendSubchannel(BackendSubchannel&& other) noexcept
        : subchannel_(std::move(other.subchannel_)),
          oob_sink_(std::exchange(other.oob_sink_, nullptr)),
          watcher_(std::exchange(other.watcher_, nullptr)) {}

    const RefCountedPtr<SubchannelInterface>& subchannel() const {
      return subchannel_;
    }
    // Watches the subchannel, reporting its changes to `policy` as those of
    // backend `index`.
    void StartWatchingLocked(RefCountedPtr<RendezvousLb> policy,
                             uint32_t index);
    // The backend is now backend `index`.
    void SetIndexLocked(uint32_t index);
    void ShutdownLocked();
    // serverLoad: out-of-band reports into `cell` (null: ignored), the
    // stream opened at the first call with a nonzero interval.
    void RouteLoadReportsLocked(const RendezvousLb& policy,
                                std::shared_ptr<router::BackendCell> cell);

   private:
    class Watcher;

    RefCountedPtr<SubchannelInterface> subchannel_;
    // Set once the stream is open. Owned by the stream's data watcher, which
    // the subchannel owns (gRPC 1.51 cannot remove one): alive while
    // subchannel_ holds the subchannel.
    OobReportSink* oob_sink_ = nullptr;
    // Owned by the subchannel until ShutdownLocked() cancels the watch.
    Watcher* watcher_ = nullptr;
  };

  ~RendezvousLb() override;
  void ShutdownLocked() override;

  // UpdateLocked's steps: the config's slowStart turns slow start on, off or
  // changes it;
  void ApplySlowStartConfigLocked();
  // `resolved` listed in set_, keeping the subchannels (and states) of the
  // addresses already listed unless `args_changed`, creating the others and
  // shutting down those no longer listed;
  router::BackendSet::UpdateReport UpdateBackendsLocked(
      const ResolvedEntries& resolved, bool args_changed);
  // what the update did, traced.
  void TraceUpdateLocked(const router::BackendSet::UpdateReport& report) const;

  // Backend `index`'s subchannel reported `state`.
  void OnBackendStateLocked(uint32_t index, grpc_connectivity_state state,
                            const absl::Status& status);
  // Publishes the channel's state and its picker.
  void UpdatePickerLocked();

  // Slow start: the effective weights now (empty when it is off), with the
  // step timer set for the next step and step changes traced.
  std::vector<uint32_t> EffectiveWeightsLocked();

  const bool bounded_;
  // Its label (the stats label, else the target) also names the load scope
  // loadScope PROCESS counts in: one copy (a target may list every address).
  std::shared_ptr<router::PolicyStats> stats_;
  RefCountedPtr<RendezvousLbConfig> config_;
  // config_'s with the channel's kLocalZoneArg (WithLocalZoneArg).
  std::shared_ptr<const router::Config> routing_config_;
  ChannelArgs args_;
  router::BackendSet set_;
  // Both by backend index in set_.backends().
  std::vector<BackendSubchannel> backends_;
  std::vector<router::BackendState> states_;
  std::string resolution_note_;
  absl::Status address_error_;
  bool shutdown_ = false;
  // Slow start (src/router/slow_start.h); empty when the config has none.
  std::optional<router::SlowStart> slow_start_;
  // The next step's timer and the steps' traces; idle when slow start is.
  SlowStartTimer slow_start_timer_;
};

class RendezvousLb::BackendSubchannel::Watcher final
    : public SubchannelInterface::ConnectivityStateWatcherInterface {
 public:
  Watcher(RefCountedPtr<RendezvousLb> policy, uint32_t index)
      : policy_(std::move(policy)), index_(index) {}

  // gRPC 1.51 delivers these in the policy's work serializer, also some
  // queued before the watch was cancelled: those are dropped.
  void OnConnectivityStateChange(grpc_connectivity_state state,
                                 absl::Status status) override {
    if (index_ != kCancelled) {
      policy_->OnBackendStateLocked(index_, state, status);
    }
  }
  grpc_pollset_set* interested_parties() override {
    return policy_->interested_parties();
  }

  void set_index(uint32_t index) { index_ = index; }
  // Called just before the watch is cancelled: the backend is gone.
  void Cancel() { index_ = kCancelled; }

 private:
  static constexpr uint32_t kCancelled = UINT32_MAX;

  RefCountedPtr<RendezvousLb> policy_;
  uint32_t index_;  // in backends_; kCancelled once the backend is gone
};

void RendezvousLb::BackendSubchannel::StartWatchingLocked(
    RefCountedPtr<RendezvousLb> policy, uint32_t index) {
  auto watcher = std::make_unique<Watcher>(std::move(policy), index);
  watcher_ = watcher.get();
  subchannel_->WatchConnectivityState(std::move(watcher));
  // Eager: spill targets must be warm before a hot key needs them.
  subchannel_->RequestConnection();
}

void RendezvousLb::BackendSubchannel::SetIndexLocked(uint32_t index) {
  if (watcher_ != nullptr) watcher_->set_index(index);
}

void RendezvousLb::BackendSubchannel::ShutdownLocked() {
  if (watcher_ != nullptr) {
    watcher_->Cancel();
    subchannel_->CancelConnectivityStateWatch(watcher_);
    watcher_ = nullptr;
  }
  // gRPC 1.51 cannot remove the stream's watcher: its reports are dropped.
  if (oob_sink_ != nullptr) oob_sink_->Set(nullptr, {});
}

void RendezvousLb::BackendSubchannel::RouteLoadReportsLocked(
    const RendezvousLb& policy, std::shared_ptr<router::BackendCell> cell) {
  const std::optional<router::ServerLoadConfig>& server_load =
      policy.config_->config()->server_load;
  const bool wanted = policy.bounded_ && server_load.has_value() &&
                      server_load->out_of_band_interval > absl::ZeroDuration();
  if (oob_sink_ == nullptr) {
    if (!wanted) return;
    auto sink = std::make_shared<OobReportSink>(policy.stats_, &policy);
    oob_sink_ = sink.get();
    subchannel_->AddDataWatcher(MakeOobLoadReportWatcher(
        grpc_core::Duration::Milliseconds(
            absl::ToInt64Milliseconds(server_load->out_of_band_interval)),
        std::move(sink)));
  }
  // An interval changed later keeps the stream's first one (1.51 cannot
  // remove a data watcher); serverLoad turned off drops its reports.
  oob_sink_->Set(wanted ? std::move(cell) : nullptr,
                 wanted ? server_load->metric : std::string());
}

RendezvousLb::RendezvousLb(Args args, bool bounded)
    : LoadBalancingPolicy(std::move(args)),
      bounded_(bounded),
      slow_start_timer_(this, work_serializer(), [this]() {
        if (!shutdown_) UpdatePickerLocked();
      }) {
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
  slow_start_timer_.CancelStepTimerLocked();
  slow_start_.reset();
  for (auto& backend : backends_) backend.ShutdownLocked();
  backends_.clear();
  states_.clear();
  set_.Clear();
  stats_->SetBackends(nullptr);
  stats_->SetPicker({});
  stats_->connectivity.store(router::Connectivity::kShutdown,
                             std::memory_order_relaxed);
}

void RendezvousLb::ResetBackoffLocked() {
  for (auto& backend : backends_) backend.subchannel()->ResetBackoff();
}

absl::Status RendezvousLb::UpdateLocked(UpdateArgs args) {
  // The registry only hands this policy configs its factory parsed.
  config_ = RefCountedPtr<RendezvousLbConfig>(
      static_cast<RendezvousLbConfig*>(args.config.release()));
  resolution_note_ = std::move(args.resolution_note);
  absl::Status zone_error;
  routing_config_ = WithLocalZoneArg(config_->config(), args.args, &zone_error);
  if (!zone_error.ok()) {
    gpr_log(GPR_ERROR, "[poise %p] %s", this, zone_error.ToString().c_str());
  }
  stats_->SetBalanceFactor(config_->config()->balance_factor_percent);
  ApplySlowStartConfigLocked();
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
  const router::BackendSet::UpdateReport report =
      UpdateBackendsLocked(EntriesOf(args.addresses), args_changed);
  stats_->SetBackends(set_.list());
  TraceUpdateLocked(report);
  UpdatePickerLocked();
  if (set_.empty()) {
    return router::AggregateState({}, address_error_, resolution_note_).status;
  }
  return absl::OkStatus();
}

void RendezvousLb::ApplySlowStartConfigLocked() {
  const std::optional<router::SlowStartConfig>& slow =
      config_->config()->slow_start;
  if (!slow.has_value()) {
    slow_start_timer_.CancelStepTimerLocked();
    slow_start_.reset();
  } else if (!slow_start_.has_value()) {
    // Turned on now: what is listed before the next READY counts as the
    // start (it was serving, or about to, without slow start).
    slow_start_.emplace(*slow);
  } else {
    slow_start_->set_config(*slow);
  }
}

router::BackendSet::UpdateReport RendezvousLb::UpdateBackendsLocked(
    const ResolvedEntries& resolved, bool args_changed) {
  std::vector<BackendSubchannel> previous = std::move(backends_);
  std::vector<router::BackendState> previous_states = std::move(states_);
  backends_.clear();
  states_.clear();
  backends_.reserve(resolved.entries.size());
  states_.reserve(resolved.entries.size());
  // Whether each backend has a new subchannel (its cell, kept by identity,
  // still shows the old one's state).
  std::vector<bool> new_subchannel;
  // Called in list order: backends_ and states_ follow set_.backends().
  auto admit = [&](const router::BackendSet::Admission& admission) {
    const auto index = static_cast<uint32_t>(backends_.size());
    new_subchannel.push_back(!admission.previous.has_value() || args_changed);
    if (!new_subchannel.back()) {
      backends_.push_back(std::move(previous[*admission.previous]));
      states_.push_back(std::move(previous_states[*admission.previous]));
      backends_.back().SetIndexLocked(index);
    } else {
      auto subchannel = channel_control_helper()->CreateSubchannel(
          *resolved.sources[admission.entry], args_);
      if (subchannel == nullptr) {
        new_subchannel.pop_back();
        return false;
      }
      backends_.emplace_back(std::move(subchannel));
      states_.emplace_back();
      backends_.back().StartWatchingLocked(
          RefCountedPtr<RendezvousLb>(static_cast<RendezvousLb*>(
              Ref(DEBUG_LOCATION, "Watcher").release())),
          index);
    }
    return true;
  };
  set_.SetLoadScope(router::LoadScopeForChannel(
      config_->config()->load_scope, stats_->label(), set_.load_scope()));
  const router::BackendSet::UpdateReport report =
      set_.Update(resolved.entries, *config_->config(), admit);
  // Those not listed again (the others were moved from: nothing to do).
  for (auto& gone : previous) gone.ShutdownLocked();
  for (size_t i = 0; i < backends_.size(); ++i) {
    const std::shared_ptr<router::BackendCell>& cell = set_.backends()[i].cell;
    if (new_subchannel[i]) {
      cell->connectivity.store(router::Connectivity::kIdle,
                               std::memory_order_relaxed);
    }
    backends_[i].RouteLoadReportsLocked(*this, cell);
  }
  return report;
}

void RendezvousLb::TraceUpdateLocked(
    const router::BackendSet::UpdateReport& report) const {
  POISE_TRACE(
      "[poise %p] update: %zu backends, %zu of them at an address an earlier "
      "one has (left out: %zu duplicate identities, %zu without a "
      "subchannel)",
      this, set_.size(), report.shared_addresses, report.duplicate_identities,
      report.refused);
  if (report.table_rebuilt) {
    POISE_TRACE("[poise %p] identity table: %zu backends, %zu bytes", this,
                set_.table()->size(), set_.table()->memory_bytes());
  }
}

void RendezvousLb::OnBackendStateLocked(uint32_t index,
                                        grpc_connectivity_state state,
                                        const absl::Status& status) {
  if (shutdown_) return;  // a stale notification
  // By identity and address: one address may carry several identities.
  const router::ListedBackend& backend = set_.backends()[index];
  POISE_TRACE("[poise %p] %.*s at %.*s -> %s %s", this,
              static_cast<int>(backend.identity.size()),
              backend.identity.data(), static_cast<int>(backend.address.size()),
              backend.address.data(), grpc_core::ConnectivityStateName(state),
              status.ok() ? "" : status.ToString().c_str());
  if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    channel_control_helper()->RequestReresolution();
  }
  if (state == GRPC_CHANNEL_IDLE) {
    backends_[index].subchannel()->RequestConnection();
  }
  // Every change can flip a key between waiting and moving, so every change
  // publishes a picker; they are rare next to picks.
  const auto reported = static_cast<router::Connectivity>(state);
  set_.backends()[index].cell->connectivity.store(reported,
                                                  std::memory_order_relaxed);
  states_[index].Apply(reported, status);
  UpdatePickerLocked();
}

void RendezvousLb::UpdatePickerLocked() {
  const router::ChannelState channel =
      router::AggregateState(states_, address_error_, resolution_note_);
  stats_->connectivity.store(channel.state, std::memory_order_relaxed);
  const std::vector<uint32_t> effective = EffectiveWeightsLocked();
  if (channel.state == router::Connectivity::kReady) {
    std::vector<RefCountedPtr<SubchannelInterface>> subchannels;
    subchannels.reserve(backends_.size());
    for (const auto& b : backends_) subchannels.push_back(b.subchannel());
    channel_control_helper()->UpdateState(
        GRPC_CHANNEL_READY, absl::OkStatus(),
        std::make_unique<RendezvousPicker>(this, routing_config_, set_.list(),
                                           states_, stats_,
                                           std::move(subchannels), effective));
    return;
  }
  // Nothing READY: ExplainKey answers from the list the stats show, not from
  // a picker gRPC has not dropped yet.
  stats_->SetPicker({});
  if (channel.state == router::Connectivity::kConnecting) {
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
      slow_start_->Observe(*set_.list(), states_, internal::SlowStartNow());
  stats_->SetEffectiveWeights(w.effective, w.scale);
  slow_start_timer_.ObserveLocked(w, set_.backends(),
                                  Ref(DEBUG_LOCATION, "SlowStartTimer"));
  return std::move(w.effective);
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
