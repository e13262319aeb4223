// The pick rules: an immutable snapshot of the backends, their routing
// states and the config, answering one call at a time.
#ifndef POISE_SRC_ROUTER_PICKER_H_
#define POISE_SRC_ROUTER_PICKER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <variant>
#include <vector>

#include "absl/base/attributes.h"
#include "absl/status/status.h"
#include "poise/bound.h"
#include "poise/in_flight.h"
#include "poise/rendezvous.h"
#include "src/core/key_order.h"
#include "src/core/prepared_candidates.h"
#include "src/router/backend_set.h"
#include "src/router/config.h"
#include "src/router/connectivity.h"
#include "src/router/explain.h"
#include "src/router/fleet_load.h"
#include "src/router/key_cache.h"
#include "src/router/load_views.h"
#include "src/router/stats_registry.h"

// Rare paths of a pick: out of line and apart from the hot code, because a
// pick runs with cold caches (between two calls gRPC runs tens of thousands of
// instructions) and every cache line of code it spans costs a miss.
#ifndef POISE_COLD
#define POISE_COLD ABSL_ATTRIBUTE_NOINLINE ABSL_ATTRIBUTE_COLD
#endif

namespace poise::router {

// What the router is told about one call.
struct PickRequest {
  // The hash header's value; nullopt: the call has no such header.
  std::optional<std::string_view> key;
  // How many attempts of this call came before this one: gRPC's
  // grpc-previous-rpc-attempts header (configured retries only; a
  // transparent retry does not carry it). 0: the first attempt.
  uint32_t previous_attempts = 0;
};

// ---------------------------------------------------------------------------
// Retries

// The header gRPC's retry filter puts on a call's attempt k + 1 with the
// value k (configured retries only: a transparent retry adds nothing).
inline constexpr char kPreviousAttemptsHeader[] = "grpc-previous-rpc-attempts";

// PickRequest::previous_attempts from that header's value: decimal digits
// only, at most UINT32_MAX; anything else (empty, a sign, spaces, too
// large) is taken as a first attempt, 0.
uint32_t ParsePreviousAttempts(std::string_view value);

// What becomes of the call.
struct PickOutcome {
  // The key's owner is pending: the call waits for the next picker.
  struct Queue {};
  // The call ends now with `status` (also when it is wait_for_ready: a new
  // picker would not change the answer).
  struct Fail {
    absl::Status status;
  };
  // The call goes to backends()[backend]. `slot` is held when the policy
  // tracks load (bounded, or a hard limit): the caller keeps it until the
  // call finishes, or drops it if the call never starts.
  struct Complete {
    size_t backend;
    bool spilled;  // sent past its key's full owner
    InFlightGuard slot;
    bool from_cache = false;  // decided on the key's cached order
    // The capacity (Bound::Capacity, saturated) the pick's rule held the
    // backend to; 0 where the policy has no bound (weighted_rendezvous, or
    // a pick past every bound after it lost its slots).
    uint64_t bound = 0;
  };
  std::variant<Queue, Fail, Complete> result;
};

// The data-plane side of a policy: immutable once built, so concurrent
// Pick() calls are safe (gRPC 1.51 serialises them per channel; newer
// releases do not). Counters are shared atomics; the core's scratch is per
// thread.
//
// The rules of a pick, in order:
//   P1. A call without a key: missingKey FAIL fails it (INTERNAL, naming the
//      header); RANDOM routes it by a random key under the rules below,
//      except P2 (a random key has no home to wait for).
//   P2. The key's owner over every backend decides where it belongs. A
//      pending owner holds its keys: the call queues. (Only computed while
//      some backend is pending: otherwise the owner's state cannot change
//      the answer, see any_pending_.)
//   P3. Otherwise the key goes to its owner among the READY backends: a
//      failed owner passes its keys to their next READY choice.
//      bounded_load_rendezvous takes the first in the key's READY order
//      with room under its Bound, ceil(f (L + 1) w / (100 W)), L the load
//      scope's calls in flight (the channel's, or with loadScope PROCESS
//      every channel's of the scope) and W the READY weights; a spill when
//      that is not the owner. Should L be caught between a slot taken and
//      counted in it, so that no READY backend has room, the bounds come
//      from the sum of their loads (the core's walk, src/core/key_order.h).
//      The bound is held at the slot (taken only while the count is below
//      it); a pick that loses the slot goes on along the same order, and
//      where every backend with room lost it, walks again under L as the
//      others' picks have raised it.
//   P4. maxInFlightPerBackend: the slot is taken at the pick, so the limit is
//      exact. A backend at the limit is passed over as full; where every
//      READY backend with room is at the limit, the first below it in the
//      key's order takes the call past its bound (the limit is the hard
//      rule); with every READY backend at the limit the call fails with
//      RESOURCE_EXHAUSTED. It never waits.
//   P5. A route the core refuses (PickError) fails the call with INTERNAL.
//   P6. A retry (previous_attempts = k > 0) of a keyed call under retryRouting
//      NEXT_CHOICE goes to the key's (k + 1)-th choice among the READY
//      backends - for bounded_load_rendezvous the (k + 1)-th with room
//      under P3's bounds - wrapping around when k reaches their number. It
//      never queues (its first attempt found the owner settled), is not a
//      spill, and P4 applies. SAME_OWNER routes it like a first attempt.
//      Every completed retry counts in PolicyStats::retries and the
//      backend's retried_in.
//   P7. serverLoad (bounded_load_rendezvous): P3, P4 and P6 compare the
//      fleet's loads (src/router/fleet_load.h) instead of the scope's: a
//      READY backend's load is the others' calls as it last reported them
//      plus the scope's own now (only the scope's own without a fresh
//      report), and L is the sum of those loads. A pick, first attempt or
//      retry, takes a backend whose room only a report shows by the herding
//      rule (fleet_load.h: at random, so the fleet takes about the room the
//      report showed; a retry after a refusal is one of many drawn to the
//      same room); a rule that leaves no room anywhere yields to the bound
//      alone. The slot is not held to the bound (the others' part is
//      an estimate); P4's limit still is.
//   P8. Zones (localZone, or the channel argument poise.local_zone): with a
//      local zone Z that some listed backend is in (B5), the rules above
//      apply first to Z's backends, along the key's one order (a subset's
//      order is the global order with the others left out, K5): P2 queues
//      on the key's pending owner over Z's backends; P3 takes the first
//      READY backend of Z (weighted_rendezvous), or the first with room by
//      the zone's bound ceil(f (L_Z + 1) w / (100 W_Z)), L_Z the scope's
//      calls in flight on Z's backends, W_Z their READY weights (bounded:
//      some backend of Z has room, so the zone's bound alone never sends a
//      call out); under P7 a backend of Z must also have room by the
//      fleet-wide bound, read without the herding rule. Only where Z has no
//      READY backend, or none admitted (at the limit; under P7 over the
//      fleet's bound), does the same walk go on to the backends outside Z
//      by P3-P7 as without zones, and under P7, where they have no room
//      either, back to Z by its own bound. A spill is a pick past the key's
//      owner in Z. P6's k-th choice counts Z's backends with room first,
//      then the others', wrapping around after them all. Without a local
//      zone, or with no listed backend in it, every pick is the same as
//      without P8.
//
// Every mode is one walk along the key's order (src/core/key_order.h) over a
// load view (load_views.h) chosen when the picker is built.
//
// The key cache (keyCache, src/router/key_cache.h). P2, P3, P4's first try
// and P7 read a key's order only as far as its first READY backend (P3: its
// first with room), and P6 of weighted_rendezvous as far as its (k + 1)-th
// READY one; a key's order over a subset of the backends is the order over
// every backend with the others left out (the contract's K5 compares each
// pair on its own). So a pick reads the key's cached order prefix, over
// every backend, where it has one; where the prefix ends before the pick has
// its answer (every READY backend in it full or at the limit, the retry's
// choice beyond it), the walk goes on past it (hashing the key then). Either
// way the answer is the same. The cache is not used while slow start ramps
// weights (the weights are then not the list's), for lists with more than
// two distinct weights (no prefix is computed there) or of more than
// KeyOrderCache::kMaxBackends backends, or for calls without a key. A key's
// prefix is computed on its admission (key_cache.h), and only by a picker whose
// every backend is READY (whose READY order is the list's).
class Picker final {
 public:
  // `states[i]` is the state of list->backends[i]; `config` passed
  // NormalizeAndValidate. `effective_weights[i]`, when given (one per
  // backend), replaces list->backends[i].weight in every decision, owners
  // and capacities alike (slow start, src/router/slow_start.h); empty: the
  // list's weights.
  Picker(std::shared_ptr<const Config> config,
         std::shared_ptr<const BackendList> list,
         const std::vector<BackendState>& states,
         std::shared_ptr<PolicyStats> stats,
         const std::vector<uint32_t>& effective_weights = {});

  PickOutcome Pick(const PickRequest& request) const;

  const std::vector<ListedBackend>& backends() const { return list_->backends; }

  // What a pick weighs now, for ExplainKey: the READY backends with the
  // weights routing uses (slow start's included) and the loads a pick reads
  // (the load scope's counts; under serverLoad the fleet's estimates); and
  // the identities of the backends that are not READY.
  struct Inputs {
    std::vector<ExplainedBackend> ready;  // each with its zone
    std::vector<std::string> not_ready;
    // P8: the client's zone (nullopt: none), and whether a listed backend
    // is in it.
    std::optional<std::string> local_zone;
    bool zone_listed = false;
  };
  Inputs InputsNow() const;
  uint32_t factor_percent() const { return config_->balance_factor_percent; }

 private:
  // How a pick reads loads (its load view), chosen when it is built.
  enum class LoadRule : uint8_t {
    kNone,   // weighted_rendezvous
    kScope,  // bounded_load_rendezvous over the load scope's counts
    kFleet,  // bounded_load_rendezvous with serverLoad
  };

  // Whether some backend is pending (one without a state is).
  static bool AnyPending(size_t n, const std::vector<BackendState>& states);
  // The list as candidates: every backend eligible, or only the READY ones.
  static std::vector<Candidate> CandidatesOf(
      const BackendList& list, const std::vector<BackendState>& states,
      const std::vector<uint32_t>& weights, bool ready_only);

  // The cache of the list's key orders when the config, the list and the
  // weights allow one (above); null otherwise.
  static std::shared_ptr<KeyOrderCache> KeyCacheFor(
      const Config& config, const BackendList& list,
      const std::vector<uint32_t>& effective_weights);

  // The key's order prefix from the cache, or computed and inserted where
  // the cache admits the key; false when neither.
  bool CachedOrder(std::string_view key, KeyOrderPrefix* prefix) const;
  POISE_COLD bool InsertOrder(std::string_view key,
                              KeyOrderPrefix* prefix) const;
  // P3 (and P4) without P2: also for a random key. `prefix`: the key's
  // cached order prefix, or null.
  PickOutcome PickFirst(std::string_view key,
                        const KeyOrderPrefix* prefix) const;
  // weighted_rendezvous's first attempt: the owner, without reading a load.
  PickOutcome PickOwner(std::string_view key,
                        const KeyOrderPrefix* prefix) const;
  // P7's L at `now_ns` (FleetLoads::Total), a first attempt counted in
  // picks_without_some_report when some READY backend had no fresh report.
  uint64_t FleetTotal(int64_t now_ns, uint64_t own_total,
                      bool first_attempt) const;
  // P7's first attempt (nth 0) or retry.
  PickOutcome PickFleet(std::string_view key, const KeyOrderPrefix* prefix,
                        size_t nth) const;
  // What one walk's bounds count and what follows it when it admits
  // nobody: P8 walks the key's order in phases (inside the zone, then
  // outside it), each with its own L and W.
  struct WalkSpan {
    uint64_t total;  // L of the bounds
    // W of the bounds; nullopt: the READY weights.
    std::optional<uint64_t> weight = std::nullopt;
    // The key's owner a spill is counted against.
    enum class Owner : uint8_t {
      kWalks,   // the walk's own: the first READY backend in the key's order
      kInZone,  // the first backend of the local zone in the key's order
      kPassed,  // passed over in an earlier phase: every first attempt spills
    };
    Owner owner = Owner::kWalks;
    // Whether the pick ends with this walk (false: nullopt when it admits
    // nobody, for the next phase).
    bool last = true;
    // On a walk that admits nobody: the first of the filter's backends
    // below the limit takes the call past its bound (P4) before the next
    // phase.
    bool take_past_bound = true;
  };
  // The key's order over the READY backends, read first from `prefix`
  // where given (the key cache's), hashed when a walk goes past it; for a
  // walk to its (nth + 1)-th with room.
  internal::KeyOrder OrderOf(std::string_view key, const KeyOrderPrefix* prefix,
                             size_t nth) const {
    using Stop = internal::KeyOrder::Stop;
    return internal::KeyOrder::Of(ready_.list(), key,
                                  nth == 0 ? Stop::kAtOwner : Stop::kPastOwner,
                                  prefix != nullptr ? prefix->index : nullptr,
                                  prefix != nullptr ? prefix->size : 0);
  }
  // The walk of every mode and its slot (picker.cc). A walk never queues:
  // where `span` is not the last phase and admits nobody, its Queue says so
  // (PassedOn).
  template <typename View>
  PickOutcome WalkAlongOrder(std::string_view key, const KeyOrderPrefix* prefix,
                             View& view, const WalkSpan& span, size_t nth,
                             bool first_attempt) const;
  static bool PassedOn(const PickOutcome& outcome) {
    return std::holds_alternative<PickOutcome::Queue>(outcome.result);
  }
  // `outcome`, or a phase's Queue (PassedOn) where it has none.
  POISE_COLD static PickOutcome OrPassedOn(std::optional<PickOutcome> outcome);
  // A first attempt over the whole scope whose every backend with room by
  // `*total` lost its slot: where the others' picks have raised the scope's
  // L since it was read (so the bounds were too low), `*total` becomes L as
  // it stands, the lost backends are read again and `*walked` is `walk(0)`
  // (WalkAlongOrder's walk, which reads `order` and `*total`) from the start
  // under it. False where L has not risen, or that walk admits nobody.
  template <typename View, typename Walk>
  bool WalkUnderRisenTotal(std::string_view key, const KeyOrderPrefix* prefix,
                           View& view, const Walk& walk,
                           internal::KeyOrder& order, uint64_t* total,
                           Result<internal::Walked>* walked) const;
  // After every backend with room lost its slot: the first of `order` that
  // `filter` admits and whose slot can be taken; nullopt when none.
  POISE_COLD std::optional<PickOutcome> TakeAnyAlong(
      internal::KeyOrder& order, size_t owner, bool first_attempt,
      const SlotFilter& filter) const;
  // Every backend with room along `order` lost its slot or is at the
  // limit: TakeAnyAlong where `span` takes a call past its bound (or is the
  // last phase); RESOURCE_EXHAUSTED when that finds none in the last phase.
  POISE_COLD std::optional<PickOutcome> PastEveryBound(
      internal::KeyOrder& order, size_t owner, bool first_attempt,
      const SlotFilter& filter, const WalkSpan& span) const;
  // A walk along `order` (walked to its end) that found nobody: under the
  // limit, TakeAnyAlong (RESOURCE_EXHAUSTED when every READY backend is at
  // it); else P5. Before a next phase (`span.last` false): nullopt where
  // the next phase may answer.
  POISE_COLD std::optional<PickOutcome> NoneAdmitted(
      PickError error, internal::KeyOrder& order, bool first_attempt,
      const SlotFilter& filter, const WalkSpan& span) const;
  // P8.
  bool ZoneActive() const { return zone_ != kNoZone; }
  // Construction: the local zone, where some listed backend is in it, its
  // members and their READY weight.
  void FindLocalZone();
  // L_Z: the scope's calls in flight on the zone's backends.
  uint64_t ZoneTotal() const;
  // P8's first attempt (the zone has a READY backend).
  PickOutcome PickInZone(std::string_view key,
                         const KeyOrderPrefix* prefix) const;
  // P8's P2: the key's owner over the zone's backends is pending.
  POISE_COLD bool ZoneOwnerIsPending(std::string_view key) const;
  // P8's P6.
  POISE_COLD std::optional<PickOutcome> PickZoneNextChoice(
      std::string_view key, const KeyOrderPrefix* prefix, size_t nth) const;
  // The key's owner for a spill by `span` of a walk along `order` whose own
  // owner is `walked_owner`.
  size_t SpillOwner(const internal::KeyOrder& order, const WalkSpan& span,
                    size_t walked_owner) const {
    switch (span.owner) {
      case WalkSpan::Owner::kWalks:
        return walked_owner;
      case WalkSpan::Owner::kInZone:
        return ZoneOwnerAlong(order, walked_owner);
      case WalkSpan::Owner::kPassed:
        break;
    }
    return internal::kNone;
  }
  // The first backend of the local zone along `order` (`walked_owner` when
  // none was yielded).
  size_t ZoneOwnerAlong(const internal::KeyOrder& order,
                        size_t walked_owner) const;
  SlotFilter Filter() const { return {counters_.data(), limit_}; }
  // Backend i's load as a pick compares it: the scope's, or under serverLoad
  // E_i.
  uint64_t LoadOf(size_t i, int64_t now_ns) const {
    return fleet_ != nullptr ? fleet_->EstimateOf(i, now_ns)
                             : counters_[i]->Load();
  }
  PickOutcome Complete(size_t index, bool spilled, InFlightGuard slot,
                       bool from_cache, uint64_t bound) const;
  // A slot on backend `index`'s counter unless it is at the limit (0: none).
  // The guard keeps the counter alive.
  InFlightGuard TryAcquire(size_t index) const {
    return InFlightGuard::TryAcquireWithin(
        SharedCounter(list_->backends[index].cell), limit_);
  }
  // A slot on backend i while `bound` has room for its count and it is
  // below maxInFlightPerBackend, checked atomically with the taking. Here,
  // not in picker.cc, so that the bounded pick's hot path inlines it.
  InFlightGuard TryAcquireWithinBound(size_t i, const Bound& bound) const {
    const uint64_t limit = limit_;
    return InFlightGuard::TryAcquireIf(
        SharedCounter(list_->backends[i].cell),
        [&bound, limit](uint64_t count) {
          return bound.HasRoom(count) &&
                 (limit == InFlightCounter::kNoLimit || count < limit);
        });
  }
  // The cold paths.
  POISE_COLD PickOutcome PickWithoutKey() const;
  POISE_COLD bool OwnerIsPending(std::string_view key) const;
  POISE_COLD PickOutcome Fail(absl::Status status) const;
  POISE_COLD PickOutcome Exhausted() const;
  // P6.
  POISE_COLD PickOutcome PickRetry(std::string_view key,
                                   uint32_t previous_attempts) const;
  POISE_COLD PickOutcome PickNextChoice(std::string_view key,
                                        uint32_t previous_attempts) const;

  const std::shared_ptr<const Config> config_;
  // Owns the identities the candidates below borrow.
  const std::shared_ptr<const BackendList> list_;
  const std::shared_ptr<PolicyStats> stats_;
  // The config's hot fields, inline: a pick reads no other object for them.
  const LoadRule rule_;
  const bool track_load_;
  const uint64_t limit_;  // maxInFlightPerBackend; 0: none
  const BoundedLoadRendezvous bounded_policy_;
  // The load scope's calls in flight: L of every bound (P3).
  const InFlightCounter* const scope_total_;
  // How often a bounded pick goes on along the key's order when its
  // selection filled to its bound since it was read, before it takes a slot
  // regardless of the bound.
  static constexpr int kMaxBoundRaces = 64;
  // list_->backends[i].cell->in_flight, in one array: a bounded pick may
  // read several.
  std::vector<const InFlightCounter*> counters_;
  std::vector<bool> pending_;  // by backend index
  // Whether some backend is pending. Without one, the owner's state never
  // changes the answer (READY: it leads the READY order; failed: its keys
  // go to their next READY choice), so the owner is not computed.
  const bool any_pending_;
  // Both over the list's IdentityTable. Every backend (who owns the key):
  // only while some backend is pending, the only time it is read (a
  // channel's pickers are mostly built with none).
  const std::optional<PreparedCandidates> all_;
  const PreparedCandidates ready_;  // READY backends: who may serve it
  size_t ready_count_ = 0;
  uint64_t ready_weight_ = 0;  // W: their weights' sum
  // The key cache (null: none), and whether this picker computes prefixes
  // for it (every backend READY).
  const std::shared_ptr<KeyOrderCache> key_cache_;
  bool computes_orders_ = false;
  // serverLoad's reports and sum (P7); null without it.
  std::unique_ptr<const FleetLoads> fleet_;
  // P8: the local zone's index in the list's zones (kNoZone: no local zone,
  // or no listed backend in it), 1 per backend of it (by index), its
  // backends, and W_Z and the number of its READY backends.
  uint32_t zone_ = kNoZone;
  std::vector<uint8_t> in_zone_;
  std::vector<size_t> zone_members_;
  uint64_t zone_ready_weight_ = 0;
  size_t zone_ready_count_ = 0;
};

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_PICKER_H_
