// The weighted_rendezvous and bounded_load_rendezvous LB policies.
//
// Both give every request key (the value of a configured metadata header) a
// stable owner among the backends by weighted rendezvous hashing (poise core).
// bounded_load_rendezvous also counts each backend's calls in flight and sends
// a call past its owner to the key's next choice while the owner is at its
// bound. Everything gRPC-specific lives here; the decisions are the core's.
#include "src/grpc/internal_guard.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "poise/identity_table.h"
#include "poise/in_flight.h"
#include "poise/prepared_candidates.h"
#include "poise/rendezvous.h"
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
#include "src/grpc/registration.h"
#include "src/grpc/rendezvous_config.h"
#include "src/grpc/stats_registry.h"

namespace poise::grpc_lb {

// GRPC_TRACE=poise_rendezvous logs decisions and state changes.
grpc_core::TraceFlag poise_rendezvous_trace(false, "poise_rendezvous");

namespace {

using grpc_core::ChannelArgs;
using grpc_core::Json;
using grpc_core::LoadBalancingPolicy;
using grpc_core::RefCountedPtr;
using grpc_core::ServerAddress;
using grpc_core::SubchannelInterface;
using poise::Candidate;
using poise::IdentityTable;
using poise::PreparedCandidates;

// The channel's target, as the client channel sets it (GRPC_ARG_SERVER_URI).
constexpr char kServerUriArg[] = "grpc.server_uri";

#define POISE_TRACE(...)                                   \
  do {                                                     \
    if (GRPC_TRACE_FLAG_ENABLED(poise_rendezvous_trace)) { \
      gpr_log(GPR_INFO, __VA_ARGS__);                      \
    }                                                      \
  } while (0)

// ---------------------------------------------------------------------------
// Config

class RendezvousLbConfig final : public LoadBalancingPolicy::Config {
 public:
  explicit RendezvousLbConfig(RendezvousConfig config)
      : config_(std::move(config)) {}

  absl::string_view name() const override {
    return config_.bounded ? kBoundedLoadRendezvousPolicy
                           : kWeightedRendezvousPolicy;
  }
  const RendezvousConfig& config() const { return config_; }

 private:
  RendezvousConfig config_;
};

// ---------------------------------------------------------------------------
// Picker snapshot

// Rare paths of a pick: out of line and apart from the hot code, because a
// pick runs with cold caches (between two calls gRPC runs tens of thousands of
// instructions) and every cache line of code it spans costs a miss.
#define POISE_COLD ABSL_ATTRIBUTE_NOINLINE ABSL_ATTRIBUTE_COLD

// Why the core could not route, in the terms of the config a user can change.
POISE_COLD absl::Status RouteError(PickError error) {
  if (error == PickError::kWeightOverflow) {
    return absl::InternalError(
        "poise: cannot route: the READY backends' weights sum past "
        "4294967295; lower defaultWeight or endpoints[].weight");
  }
  return absl::InternalError(
      absl::StrCat("poise: cannot route: ", ToString(error)));
}

// What the picker knows of one backend. Immutable once the picker exists.
struct PickEntry {
  std::string identity;
  uint32_t weight;
  bool ready;
  // Never READY yet, or IDLE after a clean disconnect: calls for keys it
  // owns wait for it instead of moving (it is about to be READY).
  bool pending;
  RefCountedPtr<SubchannelInterface> subchannel;  // as CreateSubchannel made it
  std::shared_ptr<BackendCell> cell;
};

// Counts a call against its backend from the pick to Finish(). The slot is
// taken at the pick, under the same lock as the decision, so concurrent picks
// see each other and the hard limit is exact; a tracker destroyed without
// Start() (the call died before it began) gives the slot back.
class CallTracker final
    : public LoadBalancingPolicy::SubchannelCallTrackerInterface {
 public:
  explicit CallTracker(InFlightGuard guard) : guard_(std::move(guard)) {}

  void Start() override {}
  void Finish(FinishArgs /*args*/) override { guard_.Release(); }

 private:
  InFlightGuard guard_;
};

// The data-plane side: an immutable snapshot plus shared atomic counters, so
// concurrent Pick() calls are safe (gRPC 1.51 serialises them under the
// channel's data-plane lock; newer releases do not).
class RendezvousPicker final : public LoadBalancingPolicy::SubchannelPicker {
 public:
  using PickArgs = LoadBalancingPolicy::PickArgs;
  using PickResult = LoadBalancingPolicy::PickResult;

  // `table` holds the identities of `entries`, in order. A missing or
  // mismatched table is a bug: every pick then fails with kTableMismatch.
  RendezvousPicker(const void* policy, RefCountedPtr<RendezvousLbConfig> config,
                   std::vector<PickEntry> entries,
                   std::shared_ptr<const IdentityTable> table,
                   std::shared_ptr<PolicyStats> stats)
      : policy_(policy),
        config_(std::move(config)),
        bounded_(*BoundedLoadRendezvous::Create(
            config_->config().bounded
                ? config_->config().balance_factor_percent
                : BoundedLoadRendezvous::kDefaultFactorPercent)),
        track_load_(config_->config().bounded ||
                    config_->config().max_in_flight_per_backend != 0),
        entries_(std::move(entries)),
        all_(CandidatesOf(entries_, /*ready_only=*/false), table),
        ready_(CandidatesOf(entries_, /*ready_only=*/true), std::move(table)),
        stats_(std::move(stats)) {
    for (const PickEntry& e : entries_) {
      counters_.push_back(&e.cell->in_flight);
      any_pending_ |= e.pending;
    }
  }

  PickResult Pick(PickArgs args) override;

 private:
  static std::vector<Candidate> CandidatesOf(
      const std::vector<PickEntry>& entries, bool ready_only) {
    std::vector<Candidate> candidates;
    candidates.reserve(entries.size());
    for (const PickEntry& e : entries) {
      candidates.push_back(
          Candidate{e.identity, e.weight, !ready_only || e.ready});
    }
    return candidates;
  }

  // The core's scratch is per thread: the picker itself stays immutable.
  static DecisionScratch& Scratch() {
    thread_local DecisionScratch scratch;
    return scratch;
  }

  POISE_COLD PickResult Fail(absl::Status status) const {
    stats_->failed_picks.fetch_add(1, std::memory_order_relaxed);
    POISE_TRACE("[poise %p] pick failed: %s", policy_,
                status.ToString().c_str());
    // Drop, not Fail: the call must end now even when it is wait_for_ready,
    // because a new picker would not change the answer.
    return PickResult::Drop(std::move(status));
  }

  // Whether the key's owner among all backends is waiting for its first
  // connection (then the key waits too, rather than land elsewhere).
  POISE_COLD bool OwnerIsPending(std::string_view key) const {
    const Result<size_t> owner = all_.Pick(key);
    return owner.ok() && entries_[owner.value()].pending;
  }
  // A slot on entries_[index]'s in-flight counter, unless it is at
  // maxInFlightPerBackend (0: no limit). The guard keeps the counter alive.
  InFlightGuard TryAcquire(size_t index) const {
    const PickEntry& entry = entries_[index];
    return InFlightGuard::TryAcquireWithin(
        std::shared_ptr<InFlightCounter>(entry.cell, &entry.cell->in_flight),
        config_->config().max_in_flight_per_backend);
  }
  PickResult Complete(size_t index, bool spilled, InFlightGuard guard) const;
  POISE_COLD void TracePick(size_t index, bool spilled) const;
  PickResult PickUnbounded(std::string_view key, bool keyed);
  PickResult PickBounded(std::string_view key, bool keyed);
  // A call without the header: fails or routes a random key (missingKey).
  POISE_COLD PickResult PickWithoutKey();
  // The slow path of a configured hard limit: retries without the backends
  // found at it.
  POISE_COLD PickResult PickWithinLimit(std::string_view key, size_t affinity);

  const void* policy_;
  RefCountedPtr<RendezvousLbConfig> config_;
  const BoundedLoadRendezvous bounded_;
  const bool track_load_;
  const std::vector<PickEntry> entries_;
  // Both over the entries' identities hashed ahead (an IdentityTable shared
  // with every picker of the same backend list).
  const PreparedCandidates all_;    // every backend: who owns the key
  const PreparedCandidates ready_;  // READY backends: who may serve it
  // entries_[i].cell->in_flight, in one array: a bounded pick may read all.
  std::vector<const InFlightCounter*> counters_;
  // Whether some owner could make its keys wait. Without one, the owner's
  // state never changes the answer (READY: it leads the READY order; failed:
  // its keys go to their next READY choice), so the owner is not computed.
  bool any_pending_ = false;
  std::shared_ptr<PolicyStats> stats_;
};

RendezvousPicker::PickResult RendezvousPicker::Pick(PickArgs args) {
  const RendezvousConfig& config = config_->config();
  std::string buffer;
  const absl::optional<absl::string_view> header =
      args.initial_metadata->Lookup(config.hash_header, &buffer);
  if (!header.has_value()) return PickWithoutKey();
  const std::string_view key(header->data(), header->size());
  // The tracker is owned by the returned PickResult; the analyzer loses it
  // in absl::variant's move.
  // NOLINTBEGIN(clang-analyzer-cplusplus.NewDeleteLeaks)
  return config.bounded ? PickBounded(key, true) : PickUnbounded(key, true);
}
// NOLINTEND(clang-analyzer-cplusplus.NewDeleteLeaks)

RendezvousPicker::PickResult RendezvousPicker::PickWithoutKey() {
  const RendezvousConfig& config = config_->config();
  stats_->missing_key.fetch_add(1, std::memory_order_relaxed);
  if (config.missing_key == MissingKey::kFail) {
    return Fail(absl::InternalError(
        absl::StrCat("poise: the call has no \"", config.hash_header,
                     "\" header and missingKey is FAIL")));
  }
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string random_key =
      absl::StrCat(absl::Hex(rng(), absl::kZeroPad16));
  // NOLINTBEGIN(clang-analyzer-cplusplus.NewDeleteLeaks)
  return config.bounded ? PickBounded(random_key, false)
                        : PickUnbounded(random_key, false);
}
// NOLINTEND(clang-analyzer-cplusplus.NewDeleteLeaks)

void RendezvousPicker::TracePick(size_t index, bool spilled) const {
  gpr_log(GPR_INFO, "[poise %p] pick -> %s%s", policy_,
          entries_[index].identity.c_str(), spilled ? " (spilled)" : "");
}

RendezvousPicker::PickResult RendezvousPicker::Complete(
    size_t index, bool spilled, InFlightGuard guard) const {
  const PickEntry& entry = entries_[index];
  stats_->picks.fetch_add(1, std::memory_order_relaxed);
  entry.cell->picks.fetch_add(1, std::memory_order_relaxed);
  if (spilled) {
    stats_->spills.fetch_add(1, std::memory_order_relaxed);
    entry.cell->spilled_in.fetch_add(1, std::memory_order_relaxed);
  }
  if (GRPC_TRACE_FLAG_ENABLED(poise_rendezvous_trace)) {
    TracePick(index, spilled);
  }
  if (!guard.held()) return PickResult::Complete(entry.subchannel);
  return PickResult::Complete(entry.subchannel,
                              std::make_unique<CallTracker>(std::move(guard)));
}

RendezvousPicker::PickResult RendezvousPicker::PickUnbounded(
    std::string_view key, bool keyed) {
  // Rule: the owner over every backend decides. A pending owner holds its
  // keys (queue); a failed one passes them to their next READY choice.
  if (keyed && any_pending_ && OwnerIsPending(key)) return PickResult::Queue();
  const Result<size_t> chosen = ready_.Pick(key);
  if (!chosen.ok()) return Fail(RouteError(chosen.error()));
  if (!track_load_) return Complete(chosen.value(), false, InFlightGuard());
  InFlightGuard guard = TryAcquire(chosen.value());
  if (guard.held()) return Complete(chosen.value(), false, std::move(guard));
  return PickWithinLimit(key, chosen.value());
}

RendezvousPicker::PickResult RendezvousPicker::PickBounded(std::string_view key,
                                                           bool keyed) {
  if (keyed && any_pending_ && OwnerIsPending(key)) return PickResult::Queue();
  // Route, not Decide: an idle owner is taken without reading every
  // backend's counter (each on its own cache line, cold at every call).
  const Result<PreparedCandidates::Routed> routed = ready_.Route(
      bounded_, key, [this](size_t i) { return counters_[i]->Load(); },
      Scratch());
  if (!routed.ok()) return Fail(RouteError(routed.error()));
  const PreparedCandidates::Routed& d = routed.value();
  InFlightGuard guard = TryAcquire(d.selection);
  if (guard.held()) return Complete(d.selection, d.spilled, std::move(guard));
  return PickWithinLimit(key, d.affinity);
}

RendezvousPicker::PickResult RendezvousPicker::PickWithinLimit(
    std::string_view key, size_t affinity) {
  const uint64_t limit = config_->config().max_in_flight_per_backend;
  thread_local std::vector<Candidate> candidates;
  candidates = ready_.candidates();
  for (;;) {
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (candidates[i].eligible && counters_[i]->Load() >= limit) {
        candidates[i].eligible = false;
      }
    }
    size_t selection;
    if (config_->config().bounded) {
      const Result<Decision> d = bounded_.Decide(
          key, candidates, ready_.table(),
          [this](size_t i) { return counters_[i]->Load(); }, Scratch());
      if (!d.ok()) break;
      selection = d.value().selection;
    } else {
      const Result<size_t> owner =
          WeightedRendezvous::Pick(key, candidates, ready_.table());
      if (!owner.ok()) break;
      selection = owner.value();
    }
    InFlightGuard guard = TryAcquire(selection);
    if (guard.held()) {
      return Complete(selection, selection != affinity, std::move(guard));
    }
    candidates[selection].eligible = false;  // filled up since it was read
  }
  return Fail(absl::ResourceExhaustedError(
      absl::StrCat("poise: every READY backend is at maxInFlightPerBackend (",
                   limit, " calls in flight)")));
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
  // One backend address and its connection.
  class Backend final : public grpc_core::RefCounted<Backend> {
   public:
    Backend(std::string address, RefCountedPtr<SubchannelInterface> subchannel)
        : address_(std::move(address)), subchannel_(std::move(subchannel)) {}

    const std::string& address() const { return address_; }
    const RefCountedPtr<SubchannelInterface>& subchannel() const {
      return subchannel_;
    }

    // Routing state: READY serves; pending holds its keys; failed passes
    // them on. Failed is sticky until READY again (a reconnect attempt's
    // CONNECTING does not make its keys wait).
    bool ready() const { return state_ == GRPC_CHANNEL_READY; }
    bool failed() const { return failed_; }
    bool removed() const { return watcher_ == nullptr; }

    // Returns whether the routing state changed.
    bool UpdateStateLocked(grpc_connectivity_state state,
                           const absl::Status& status);
    void StartWatchingLocked(RefCountedPtr<RendezvousLb> policy);
    void ShutdownLocked();

    std::string identity;
    uint32_t weight = 1;
    std::shared_ptr<BackendCell> cell;
    absl::Status last_failure;

   private:
    class Watcher;

    const std::string address_;
    RefCountedPtr<SubchannelInterface> subchannel_;
    SubchannelInterface::ConnectivityStateWatcherInterface* watcher_ = nullptr;
    grpc_connectivity_state state_ = GRPC_CHANNEL_IDLE;
    bool failed_ = false;
  };

  ~RendezvousLb() override;
  void ShutdownLocked() override;

  void OnBackendStateLocked(Backend* backend, grpc_connectivity_state state,
                            const absl::Status& status);
  // Rebuilds table_ unless backends_ still has `previous` identities, in
  // order.
  void UpdateTableLocked(const std::vector<std::string>& previous);
  // Publishes the aggregate state and a new picker.
  void UpdatePickerLocked();
  std::shared_ptr<BackendCell> CellFor(const std::string& identity);

  const bool bounded_;
  std::shared_ptr<PolicyStats> stats_;
  RefCountedPtr<RendezvousLbConfig> config_;
  ChannelArgs args_;
  std::vector<RefCountedPtr<Backend>> backends_;  // resolver order, unique
  // backends_' identities hashed ahead (null while backends_ is empty). Built
  // here when the list changes, not per picker: pickers are rebuilt on every
  // connectivity change, and each build costs 0.5-1.3 us per backend.
  std::shared_ptr<const IdentityTable> table_;
  // Counters by identity, shared with pickers and calls in flight: an
  // identity that leaves and returns while its calls still run keeps them.
  std::map<std::string, std::weak_ptr<BackendCell>> cells_;
  std::string resolution_note_;
  absl::Status address_error_;
  bool shutdown_ = false;
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

bool RendezvousLb::Backend::UpdateStateLocked(grpc_connectivity_state state,
                                              const absl::Status& status) {
  const bool was_ready = ready();
  const bool was_failed = failed_;
  state_ = state;
  if (state == GRPC_CHANNEL_READY) {
    failed_ = false;
  } else if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    failed_ = true;
    last_failure = status;
  }
  return was_ready != ready() || was_failed != failed_;
}

RendezvousLb::RendezvousLb(Args args, bool bounded)
    : LoadBalancingPolicy(std::move(args)), bounded_(bounded) {
  std::string label(channel_args().GetString(kStatsLabelArg).value_or(""));
  if (label.empty()) {
    label = std::string(channel_args().GetString(kServerUriArg).value_or(""));
  }
  stats_ = std::make_shared<PolicyStats>(
      std::move(label), std::string(name().data(), name().size()));
  RegisterPolicyStats(stats_);
  POISE_TRACE("[poise %p] created %s", this, std::string(name()).c_str());
}

RendezvousLb::~RendezvousLb() { POISE_TRACE("[poise %p] destroyed", this); }

void RendezvousLb::ShutdownLocked() {
  POISE_TRACE("[poise %p] shutting down", this);
  shutdown_ = true;
  for (auto& backend : backends_) backend->ShutdownLocked();
  backends_.clear();
  table_.reset();
  stats_->SetBackends({});
}

void RendezvousLb::ResetBackoffLocked() {
  for (auto& backend : backends_) backend->subchannel()->ResetBackoff();
}

std::shared_ptr<BackendCell> RendezvousLb::CellFor(
    const std::string& identity) {
  std::weak_ptr<BackendCell>& slot = cells_[identity];
  std::shared_ptr<BackendCell> cell = slot.lock();
  if (cell == nullptr) {
    cell = std::make_shared<BackendCell>();
    slot = cell;
  }
  return cell;
}

absl::Status RendezvousLb::UpdateLocked(UpdateArgs args) {
  // The registry only hands this policy configs its factory parsed.
  config_ = RefCountedPtr<RendezvousLbConfig>(
      static_cast<RendezvousLbConfig*>(args.config.release()));
  const RendezvousConfig& config = config_->config();
  resolution_note_ = std::move(args.resolution_note);
  if (!args.addresses.ok()) {
    POISE_TRACE("[poise %p] address error: %s", this,
                args.addresses.status().ToString().c_str());
    address_error_ = args.addresses.status();
    // Keep serving the last good list; fail only if there never was one.
    if (!backends_.empty()) {
      UpdatePickerLocked();
      return args.addresses.status();
    }
  } else {
    address_error_ = absl::OkStatus();
  }
  // Subchannels carry the channel args; new args need new subchannels.
  const bool args_changed = !(args.args == args_);
  args_ = args.args;
  std::map<std::string, RefCountedPtr<Backend>> previous;
  std::vector<std::string> previous_identities;
  previous_identities.reserve(backends_.size());
  for (auto& backend : backends_) {
    previous_identities.push_back(backend->identity);
    previous.emplace(backend->address(), std::move(backend));
  }
  backends_.clear();
  std::map<std::string, const EndpointConfig*> endpoints;
  for (const EndpointConfig& e : config.endpoints) endpoints[e.address] = &e;
  if (args.addresses.ok()) {
    for (const ServerAddress& address : *args.addresses) {
      auto text = grpc_sockaddr_to_string(&address.address(), false);
      if (!text.ok()) continue;
      // Duplicates: the first occurrence wins, deterministically.
      bool duplicate = false;
      for (const auto& b : backends_) duplicate |= b->address() == *text;
      if (duplicate) continue;
      RefCountedPtr<Backend> backend;
      auto it = previous.find(*text);
      if (it != previous.end() && !args_changed) {
        backend = std::move(it->second);
        previous.erase(it);
      } else {
        auto subchannel =
            channel_control_helper()->CreateSubchannel(address, args_);
        if (subchannel == nullptr) continue;
        backend =
            grpc_core::MakeRefCounted<Backend>(*text, std::move(subchannel));
        backend->StartWatchingLocked(
            RefCountedPtr<RendezvousLb>(static_cast<RendezvousLb*>(
                Ref(DEBUG_LOCATION, "Watcher").release())));
      }
      // Weight: the config's endpoint, else the resolver's attribute, else
      // the default.
      const auto* weight_attribute =
          static_cast<const grpc_core::ServerAddressWeightAttribute*>(
              address.GetAttribute(grpc_core::ServerAddressWeightAttribute::
                                       kServerAddressWeightAttributeKey));
      backend->weight =
          weight_attribute != nullptr && weight_attribute->weight() > 0
              ? weight_attribute->weight()
              : config.default_weight;
      backend->identity = *text;
      auto endpoint = endpoints.find(*text);
      if (endpoint != endpoints.end()) {
        if (endpoint->second->weight.has_value()) {
          backend->weight = *endpoint->second->weight;
        }
        if (endpoint->second->identity.has_value()) {
          backend->identity = *endpoint->second->identity;
        }
      }
      backend->cell = CellFor(backend->identity);
      backends_.push_back(std::move(backend));
    }
  }
  for (auto& gone : previous) gone.second->ShutdownLocked();
  for (auto it = cells_.begin(); it != cells_.end();) {
    it = it->second.expired() ? cells_.erase(it) : std::next(it);
  }
  std::vector<PolicyStats::Backend> published;
  for (const auto& b : backends_) {
    published.push_back({b->identity, b->address(), b->weight, b->cell});
  }
  stats_->SetBackends(std::move(published));
  POISE_TRACE("[poise %p] update: %zu backends", this, backends_.size());
  UpdateTableLocked(previous_identities);
  UpdatePickerLocked();
  if (backends_.empty()) {
    return args.addresses.ok() ? absl::UnavailableError(absl::StrCat(
                                     "empty address list: ", resolution_note_))
                               : args.addresses.status();
  }
  return absl::OkStatus();
}

void RendezvousLb::OnBackendStateLocked(Backend* backend,
                                        grpc_connectivity_state state,
                                        const absl::Status& status) {
  if (shutdown_ || backend->removed()) return;  // a stale notification
  POISE_TRACE("[poise %p] %s -> %s %s", this, backend->address().c_str(),
              grpc_core::ConnectivityStateName(state),
              status.ok() ? "" : status.ToString().c_str());
  if (state == GRPC_CHANNEL_TRANSIENT_FAILURE) {
    channel_control_helper()->RequestReresolution();
  }
  if (state == GRPC_CHANNEL_IDLE) backend->subchannel()->RequestConnection();
  // Every change can flip a key between waiting and moving, so every change
  // publishes a picker; they are rare next to picks.
  backend->UpdateStateLocked(state, status);
  UpdatePickerLocked();
}

void RendezvousLb::UpdateTableLocked(const std::vector<std::string>& previous) {
  if (backends_.empty()) {
    table_.reset();
    return;
  }
  bool same = table_ != nullptr && previous.size() == backends_.size();
  for (size_t i = 0; same && i < backends_.size(); ++i) {
    same = previous[i] == backends_[i]->identity;
  }
  // A re-resolution that returns the same identities keeps the table.
  if (same) return;
  std::vector<std::string_view> identities;
  identities.reserve(backends_.size());
  for (const auto& b : backends_) identities.push_back(b->identity);
  table_ = std::make_shared<const IdentityTable>(identities);
  POISE_TRACE("[poise %p] identity table: %zu backends, %zu bytes", this,
              table_->size(), table_->memory_bytes());
}

void RendezvousLb::UpdatePickerLocked() {
  // The aggregate state, as gRPC's own policies compute it:
  // 1. any backend READY -> READY, with the rendezvous picker;
  // 2. else any backend IDLE or CONNECTING and not yet failed -> CONNECTING,
  //    queueing calls;
  // 3. else TRANSIENT_FAILURE with the last failure, failing calls (and
  //    re-resolution was requested when they failed).
  if (backends_.empty()) {
    absl::Status status = !address_error_.ok()
                              ? address_error_
                              : absl::UnavailableError(absl::StrCat(
                                    "empty address list: ", resolution_note_));
    channel_control_helper()->UpdateState(
        GRPC_CHANNEL_TRANSIENT_FAILURE, status,
        std::make_unique<TransientFailurePicker>(status));
    return;
  }
  size_t ready = 0;
  size_t waiting = 0;
  absl::Status last_failure;
  for (const auto& b : backends_) {
    if (b->ready()) {
      ++ready;
    } else if (!b->failed()) {
      ++waiting;
    } else {
      last_failure = b->last_failure;
    }
  }
  if (ready > 0) {
    std::vector<PickEntry> entries;
    entries.reserve(backends_.size());
    for (const auto& b : backends_) {
      // A failed backend is neither ready nor pending: it still owns its
      // keys (they come back when it recovers) but does not serve them.
      entries.push_back(PickEntry{b->identity, b->weight, b->ready(),
                                  !b->ready() && !b->failed(), b->subchannel(),
                                  b->cell});
    }
    // entries_ follows backends_, so the table's order is the picker's.
    auto picker = std::make_unique<RendezvousPicker>(
        this, config_, std::move(entries), table_, stats_);
    channel_control_helper()->UpdateState(GRPC_CHANNEL_READY, absl::OkStatus(),
                                          std::move(picker));
    return;
  }
  if (waiting > 0) {
    channel_control_helper()->UpdateState(
        GRPC_CHANNEL_CONNECTING, absl::OkStatus(),
        std::make_unique<QueuePicker>(Ref(DEBUG_LOCATION, "QueuePicker")));
    return;
  }
  absl::Status status = absl::UnavailableError(
      absl::StrCat("poise: connections to all ", backends_.size(),
                   " backends failing; last error: ", last_failure.ToString()));
  channel_control_helper()->UpdateState(
      GRPC_CHANNEL_TRANSIENT_FAILURE, status,
      std::make_unique<TransientFailurePicker>(status));
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
    auto config = RendezvousConfig::Parse(json, bounded_);
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
