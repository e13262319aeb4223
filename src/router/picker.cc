#include "src/router/picker.h"

#include <algorithm>
#include <array>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/core/key_order.h"

namespace poise::router {
namespace {

// Why the core could not route, in the terms of the config a user can change.
POISE_COLD absl::Status RouteError(PickError error) {
  if (error == PickError::kWeightOverflow) {
    return absl::InternalError(
        "poise: cannot route: the READY backends' weights sum past "
        "2^64-1; lower defaultWeight or endpoints[].weight");
  }
  return absl::InternalError(
      absl::StrCat("poise: cannot route: ", ToString(error)));
}

// The core's scratch is per thread: the picker itself stays immutable.
DecisionScratch& Scratch() {
  thread_local DecisionScratch scratch;
  return scratch;
}

}  // namespace

// ---------------------------------------------------------------------------
// Construction

bool Picker::AnyPending(size_t n, const std::vector<BackendState>& states) {
  if (states.size() < n) return true;
  for (size_t i = 0; i < n; ++i) {
    if (states[i].routing == RoutingState::kPending) return true;
  }
  return false;
}

std::shared_ptr<KeyOrderCache> Picker::KeyCacheFor(
    const Config& config, const BackendList& list,
    const std::vector<uint32_t>& effective_weights) {
  const size_t n = list.backends.size();
  const size_t entries = config.key_cache.EntriesFor(n);
  if (entries == 0 || n > KeyOrderCache::kMaxBackends) return nullptr;
  std::vector<uint32_t> weights;
  weights.reserve(n);
  for (const ListedBackend& b : list.backends) weights.push_back(b.weight);
  // Slow start ramping: other weights, other orders.
  if (!effective_weights.empty() && effective_weights != weights) {
    return nullptr;
  }
  // No prefix is computed on the general path (three or more weights).
  const uint32_t first = weights.front();
  const auto other = std::find_if(weights.begin(), weights.end(),
                                  [first](uint32_t w) { return w != first; });
  if (other != weights.end() &&
      std::any_of(other, weights.end(), [first, second = *other](uint32_t w) {
        return w != first && w != second;
      })) {
    return nullptr;
  }
  return ShareKeyOrderCache(list.table, std::move(weights), entries);
}

std::vector<Candidate> Picker::CandidatesOf(
    const BackendList& list, const std::vector<BackendState>& states,
    const std::vector<uint32_t>& weights, bool ready_only) {
  const bool effective = weights.size() == list.backends.size();
  std::vector<Candidate> candidates;
  candidates.reserve(list.backends.size());
  for (size_t i = 0; i < list.backends.size(); ++i) {
    const ListedBackend& b = list.backends[i];
    const bool ready =
        i < states.size() && states[i].routing == RoutingState::kReady;
    candidates.push_back(Candidate{
        b.identity, effective ? weights[i] : b.weight, !ready_only || ready});
  }
  return candidates;
}

Picker::Picker(std::shared_ptr<const Config> config,
               std::shared_ptr<const BackendList> list,
               const std::vector<BackendState>& states,
               std::shared_ptr<PolicyStats> stats,
               const std::vector<uint32_t>& effective_weights)
    : config_(std::move(config)),
      list_(std::move(list)),
      stats_(std::move(stats)),
      rule_(!config_->bounded                  ? LoadRule::kNone
            : config_->server_load.has_value() ? LoadRule::kFleet
                                               : LoadRule::kScope),
      track_load_(config_->tracks_load()),
      limit_(config_->max_in_flight_per_backend.value_or(
          InFlightCounter::kNoLimit)),
      // A validated factor is at least the minimum; the default otherwise.
      bounded_policy_(
          BoundedLoadRendezvous::Create(config_->balance_factor_percent)
              .value_or(BoundedLoadRendezvous())),
      scope_total_(&list_->scope->total()),
      any_pending_(AnyPending(list_->backends.size(), states)),
      all_(any_pending_ ? std::make_optional<PreparedCandidates>(
                              CandidatesOf(*list_, states, effective_weights,
                                           /*ready_only=*/false),
                              list_->table)
                        : std::nullopt),
      ready_(CandidatesOf(*list_, states, effective_weights,
                          /*ready_only=*/true),
             list_->table),
      key_cache_(KeyCacheFor(*config_, *list_, effective_weights)) {
  // W of the fleet's bounds (0: it does not fit in 64 bits; every pick
  // then fails with the core's kWeightOverflow).
  uint64_t w = 0;
  bool fits = true;
  for (const Candidate& c : ready_.candidates()) {
    if (c.eligible) fits &= !__builtin_add_overflow(w, uint64_t{c.weight}, &w);
    ready_count_ += c.IsEligible() ? 1 : 0;
  }
  // W of the bounds (wrapped where it does not fit: the core's walk then
  // fails with kWeightOverflow before it computes a bound).
  ready_weight_ = w;
  computes_orders_ = key_cache_ != nullptr &&
                     ready_count_ == list_->backends.size() &&
                     ready_.path() != PreparedCandidates::Path::kGeneral;
  stats_->server_load.store(rule_ == LoadRule::kFleet,
                            std::memory_order_relaxed);
  counters_.reserve(list_->backends.size());
  pending_.reserve(list_->backends.size());
  for (size_t i = 0; i < list_->backends.size(); ++i) {
    // A backend without a state is taken as pending (never READY yet).
    const bool pending =
        i >= states.size() || states[i].routing == RoutingState::kPending;
    pending_.push_back(pending);
    counters_.push_back(list_->backends[i].cell->in_flight);
  }
  FindLocalZone();
  if (rule_ == LoadRule::kFleet) {
    std::vector<bool> ready;
    std::vector<uint32_t> weights;
    for (const Candidate& c : ready_.candidates()) {
      ready.push_back(c.IsEligible());
      weights.push_back(c.weight);
    }
    fleet_ = std::make_unique<const FleetLoads>(
        *list_, std::move(ready), std::move(weights), fits ? w : 0,
        bounded_policy_.factor_percent(),
        absl::ToInt64Nanoseconds(config_->server_load->max_report_age), stats_);
  }
}

void Picker::FindLocalZone() {
  if (config_->local_zone.has_value()) {
    zone_ = list_->ZoneIndex(*config_->local_zone);
  }
  if (ZoneActive()) {
    in_zone_.assign(list_->backends.size(), 0);
    const std::vector<Candidate>& ready = ready_.candidates();
    for (size_t i = 0; i < list_->backends.size(); ++i) {
      if (list_->backends[i].zone != zone_) continue;
      in_zone_[i] = 1;
      zone_members_.push_back(i);
      if (ready[i].IsEligible()) {
        ++zone_ready_count_;
        // Fewer than 2^32 weights of 32 bits: no overflow (C5).
        zone_ready_weight_ += ready[i].weight;
      }
    }
  }
}

Picker::Inputs Picker::InputsNow() const {
  Inputs inputs;
  const int64_t now_ns = FleetNowNs();
  const std::vector<Candidate>& ready = ready_.candidates();
  for (size_t i = 0; i < ready.size(); ++i) {
    const std::string_view identity = ready[i].identity;
    if (ready[i].eligible) {
      const uint32_t zone = list_->backends[i].zone;
      inputs.ready.push_back(
          {std::string(identity), ready[i].weight, LoadOf(i, now_ns),
           zone == kNoZone ? std::string() : list_->zones[zone]});
    } else {
      inputs.not_ready.emplace_back(identity);
    }
  }
  inputs.local_zone = config_->local_zone;
  inputs.zone_listed = ZoneActive();
  return inputs;
}

// ---------------------------------------------------------------------------
// The hot paths: a keyed pick with every backend settled (none pending).

PickOutcome Picker::Pick(const PickRequest& request) const {
  if (!request.key.has_value()) return PickWithoutKey();
  if (request.previous_attempts != 0) {
    return PickRetry(*request.key, request.previous_attempts);
  }
  // P2, then P3 by the policy: a keyed first attempt.
  const std::string_view key = *request.key;
  KeyOrderPrefix prefix;
  const bool cached = key_cache_ != nullptr && CachedOrder(key, &prefix);
  // P2: a pending owner holds its keys (the prefix's first is the owner
  // over every backend); P8: the owner over the zone's backends, and over
  // every backend only where the zone has no READY one.
  if (any_pending_) {
    const bool zone_decides = ZoneActive() && zone_ready_count_ != 0;
    if ((ZoneActive() && ZoneOwnerIsPending(key)) ||
        (!zone_decides &&
         (cached ? pending_[prefix.index[0]] != 0 : OwnerIsPending(key)))) {
      return PickOutcome{PickOutcome::Queue{}};
    }
  }
  return PickFirst(key, cached ? &prefix : nullptr);
}

PickOutcome Picker::PickFirst(std::string_view key,
                              const KeyOrderPrefix* prefix) const {
  if (zone_ready_count_ != 0) return PickInZone(key, prefix);
  switch (rule_) {
    case LoadRule::kNone:
      return PickOwner(key, prefix);
    case LoadRule::kScope: {
      ScopeLoads view(counters_.data(), Filter());
      return WalkAlongOrder(key, prefix, view, WalkSpan{scope_total_->Load()},
                            0, true);
    }
    case LoadRule::kFleet:
      return PickFleet(key, prefix, 0);
  }
  return PickOwner(key, prefix);
}

bool Picker::CachedOrder(std::string_view key, KeyOrderPrefix* prefix) const {
  switch (key_cache_->Find(key, prefix)) {
    case KeyOrderCache::Lookup::kHit:
      return true;
    case KeyOrderCache::Lookup::kAdmit:
      return computes_orders_ && InsertOrder(key, prefix);
    case KeyOrderCache::Lookup::kMiss:
      break;
  }
  return false;
}

bool Picker::InsertOrder(std::string_view key, KeyOrderPrefix* prefix) const {
  // Every backend is READY and weighs what the list says: the READY order
  // is the list's.
  uint32_t order[KeyOrderPrefix::kCapacity];
  const size_t size =
      ready_.OrderPrefix(key, KeyOrderPrefix::kCapacity, order, Scratch());
  if (size == 0) return false;
  for (size_t j = 0; j < size; ++j) {
    prefix->index[j] = static_cast<uint16_t>(order[j]);
  }
  prefix->size = size;
  key_cache_->Insert(key, *prefix);
  return true;
}

PickOutcome Picker::PickOwner(std::string_view key,
                              const KeyOrderPrefix* prefix) const {
  // P3: the owner among the READY backends, the prefix's first READY one
  // where it has one.
  size_t owner = internal::kNone;
  if (prefix != nullptr) {
    for (size_t j = 0; j < prefix->size && owner == internal::kNone; ++j) {
      const size_t i = prefix->index[j];
      if (ready_.candidates()[i].IsEligible()) owner = i;
    }
  }
  const bool from_cache = owner != internal::kNone;
  if (!from_cache) {
    const Result<size_t> chosen = ready_.Pick(key);
    if (!chosen.ok()) return Fail(RouteError(chosen.error()));
    owner = chosen.value();
  }
  if (!track_load_) {
    return Complete(owner, false, InFlightGuard(), from_cache, 0);
  }
  InFlightGuard slot = TryAcquire(owner);
  if (slot.held()) {
    return Complete(owner, false, std::move(slot), from_cache, 0);
  }
  // P4: the owner at the limit; the walk without it.
  NoLoads view(Filter());
  view.filter().Lose(owner);
  return WalkAlongOrder(key, from_cache ? prefix : nullptr, view,
                        WalkSpan{scope_total_->Load()}, 0, true);
}

uint64_t Picker::FleetTotal(int64_t now_ns, uint64_t own_total,
                            bool first_attempt) const {
  bool without_report = false;
  const uint64_t total = fleet_->Total(now_ns, own_total, &without_report);
  if (without_report && first_attempt) {
    stats_->picks_without_some_report.fetch_add(1, std::memory_order_relaxed);
  }
  return total;
}

PickOutcome Picker::PickFleet(std::string_view key,
                              const KeyOrderPrefix* prefix, size_t nth) const {
  const int64_t now_ns = FleetNowNs();
  const uint64_t own_total = scope_total_->Load();
  const bool first_attempt = nth == 0;
  const uint64_t total = FleetTotal(now_ns, own_total, first_attempt);
  // A retry by the herding rule too: under admission at the backends a
  // refused call's retry is one of many, all drawn to the room the same
  // reports show.
  FleetLoads::View view(*fleet_, now_ns, total, own_total, first_attempt,
                        Filter());
  return WalkAlongOrder(key, prefix, view, WalkSpan{total}, nth, first_attempt);
}

// ---------------------------------------------------------------------------
// Zones (P8)

uint64_t Picker::ZoneTotal() const {
  uint64_t total = 0;
  for (const size_t i : zone_members_) total += counters_[i]->Load();
  return total;
}

PickOutcome Picker::PickInZone(std::string_view key,
                               const KeyOrderPrefix* prefix) const {
  using Owner = WalkSpan::Owner;
  const uint8_t* in_zone = in_zone_.data();
  // Inside the zone by its bound, then outside it as without zones (never
  // the last phase: where both admit nobody, the pick as without zones
  // gives the answer, below).
  // L_Z only where a bound reads it (O(|Z|) counters).
  const WalkSpan inside{rule_ == LoadRule::kNone ? 0 : ZoneTotal(),
                        zone_ready_weight_, Owner::kInZone,
                        /*last=*/false, /*take_past_bound=*/true};
  switch (rule_) {
    case LoadRule::kNone: {
      NoLoads in(Filter());
      in.filter().Within(in_zone, true);
      if (PickOutcome o = WalkAlongOrder(key, prefix, in, inside, 0, true);
          !PassedOn(o)) {
        return o;
      }
      NoLoads out(Filter());
      out.filter().Within(in_zone, false);
      if (PickOutcome o = WalkAlongOrder(
              key, prefix, out,
              WalkSpan{0, std::nullopt, Owner::kPassed, false, true}, 0, true);
          !PassedOn(o)) {
        return o;
      }
      break;
    }
    case LoadRule::kScope: {
      ScopeLoads in(counters_.data(), Filter());
      in.filter().Within(in_zone, true);
      if (PickOutcome o = WalkAlongOrder(key, prefix, in, inside, 0, true);
          !PassedOn(o)) {
        return o;
      }
      ScopeLoads out(counters_.data(), Filter());
      out.filter().Within(in_zone, false);
      if (PickOutcome o =
              WalkAlongOrder(key, prefix, out,
                             WalkSpan{scope_total_->Load(), std::nullopt,
                                      Owner::kPassed, false, true},
                             0, true);
          !PassedOn(o)) {
        return o;
      }
      break;
    }
    case LoadRule::kFleet: {
      const int64_t now_ns = FleetNowNs();
      const uint64_t own_total = scope_total_->Load();
      const uint64_t total = FleetTotal(now_ns, own_total, true);
      // Inside: the zone's bound and the fleet's; not past them (the
      // excess goes out first).
      ZoneLoads in(counters_.data(), *fleet_, now_ns, total, Filter());
      in.filter().Within(in_zone, true);
      WalkSpan fleet_inside = inside;
      fleet_inside.take_past_bound = false;
      if (PickOutcome o =
              WalkAlongOrder(key, prefix, in, fleet_inside, 0, true);
          !PassedOn(o)) {
        return o;
      }
      // Outside: P7 as without zones (the herding rule first).
      FleetLoads::View out(*fleet_, now_ns, total, own_total, true, Filter());
      out.filter().Within(in_zone, false);
      if (PickOutcome o = WalkAlongOrder(
              key, prefix, out,
              WalkSpan{total, std::nullopt, Owner::kPassed, false, false}, 0,
              true);
          !PassedOn(o)) {
        return o;
      }
      // No room outside either: back inside by the zone's bound alone.
      ScopeLoads back(counters_.data(), Filter());
      back.filter().Within(in_zone, true);
      if (PickOutcome o = WalkAlongOrder(key, prefix, back, inside, 0, true);
          !PassedOn(o)) {
        return o;
      }
      return PickFleet(key, prefix, 0);
    }
  }
  // Every phase admitted nobody (every backend at the limit): the pick as
  // without zones gives the answer (RESOURCE_EXHAUSTED).
  if (rule_ == LoadRule::kNone) return PickOwner(key, prefix);
  ScopeLoads view(counters_.data(), Filter());
  return WalkAlongOrder(key, prefix, view, WalkSpan{scope_total_->Load()}, 0,
                        true);
}

bool Picker::ZoneOwnerIsPending(std::string_view key) const {
  DecisionScratch& scratch = Scratch();
  Result<internal::KeyOrder> order =
      internal::KeyOrder::Hashed(all_->list(), key, scratch);
  if (!order.ok()) return false;
  for (size_t i = order.value().Next(scratch); i != internal::kNone;
       i = order.value().Next(scratch)) {
    if (in_zone_[i] != 0) return pending_[i];
  }
  return false;
}

std::optional<PickOutcome> Picker::PickZoneNextChoice(
    std::string_view key, const KeyOrderPrefix* prefix, size_t nth) const {
  DecisionScratch& scratch = Scratch();
  const uint32_t factor = bounded_policy_.factor_percent();
  const uint8_t* in_zone = in_zone_.data();
  // The backends with room along the key's order, inside the zone first,
  // each with the capacity that admitted it; stops at the (nth + 1)-th.
  struct Choice {
    size_t backend;
    uint64_t capacity;
  };
  std::vector<Choice> choices;
  const auto collect = [&](auto& view, uint64_t total,
                           std::optional<uint64_t> weight) -> bool {
    internal::KeyOrder order = OrderOf(key, prefix, nth);
    internal::RoomWalk walk(order, factor, total,
                            weight.value_or(ready_weight_));
    for (size_t i = walk.NextWithRoom(view, scratch); i != internal::kNone;
         i = walk.NextWithRoom(view, scratch)) {
      uint64_t capacity = walk.SaturatedCapacity(i);
      if constexpr (std::is_same_v<std::decay_t<decltype(view)>, ZoneLoads>) {
        capacity = view.FleetCapacityOf(i);  // the bound the backend sees
      }
      choices.push_back({i, capacity});
      if (choices.size() > nth) return true;
    }
    return false;
  };
  const uint64_t zone_total = ZoneTotal();
  bool found = false;
  switch (rule_) {
    case LoadRule::kNone: {
      NoLoads in(Filter());
      in.filter().Within(in_zone, true);
      NoLoads out(Filter());
      out.filter().Within(in_zone, false);
      found =
          collect(in, 0, zone_ready_weight_) || collect(out, 0, std::nullopt);
      break;
    }
    case LoadRule::kScope: {
      ScopeLoads in(counters_.data(), Filter());
      in.filter().Within(in_zone, true);
      ScopeLoads out(counters_.data(), Filter());
      out.filter().Within(in_zone, false);
      found = collect(in, zone_total, zone_ready_weight_) ||
              collect(out, scope_total_->Load(), std::nullopt);
      break;
    }
    case LoadRule::kFleet: {
      const int64_t now_ns = FleetNowNs();
      const uint64_t own_total = scope_total_->Load();
      const uint64_t total = FleetTotal(now_ns, own_total, false);
      ZoneLoads in(counters_.data(), *fleet_, now_ns, total, Filter());
      in.filter().Within(in_zone, true);
      // Outside: the herding rule, as a retry without zones (P7).
      FleetLoads::View out(*fleet_, now_ns, total, own_total, false, Filter());
      out.filter().Within(in_zone, false);
      found = collect(in, zone_total, zone_ready_weight_) ||
              collect(out, total, std::nullopt);
      break;
    }
  }
  // Nobody with room: the retry as without zones decides.
  if (choices.empty()) return std::nullopt;
  const Choice& c = found ? choices.back() : choices[nth % choices.size()];
  const uint64_t bound = rule_ == LoadRule::kNone ? 0 : c.capacity;
  if (!track_load_) {
    return Complete(c.backend, false, InFlightGuard(), false, bound);
  }
  InFlightGuard slot = TryAcquire(c.backend);
  if (!slot.held()) return std::nullopt;  // lost to another pick
  return Complete(c.backend, false, std::move(slot), false, bound);
}

// The one walk of every mode: along the key's order (from the cache's prefix
// where given, hashed once otherwise) to the (nth + 1)-th backend with room
// by `view`, then its slot. A slot lost to another pick goes on along the
// same order.
template <typename View>
PickOutcome Picker::WalkAlongOrder(std::string_view key,
                                   const KeyOrderPrefix* prefix, View& view,
                                   const WalkSpan& span, size_t nth,
                                   bool first_attempt) const {
  DecisionScratch& scratch = Scratch();
  // Built in place and hashed by its first step: an error of the hashing
  // ends the walk with it (walked.error()).
  internal::KeyOrder order = OrderOf(key, prefix, nth);
  const uint32_t factor = bounded_policy_.factor_percent();
  uint64_t total = span.total;
  const uint64_t weight = span.weight.value_or(ready_weight_);
  const auto walk = [&](size_t k) {
    return internal::WalkToNthWithRoom(order, factor, total, weight, view, k,
                                       scratch);
  };
  Result<internal::Walked> walked = walk(nth);
  // The herding rule left no room anywhere: the bound alone decides.
  if (walked.ok() && walked.value().stale_total && view.DropRule()) {
    order = OrderOf(key, nullptr, nth);
    walked = walk(nth);
  }
  if (!walked.ok()) {
    return OrPassedOn(NoneAdmitted(walked.error(), order, first_attempt,
                                   view.filter(), span));
  }
  const size_t owner = SpillOwner(order, span, walked.value().owner);
  // The bound holds at the slot on a first attempt of the scope's counts:
  // channels of one scope pick at the same time, so the selection may have
  // filled to its bound since its load was read. Each such loss is another
  // pick's win; after kMaxBoundRaces of them the pick takes its choice
  // regardless (it never fails or waits for a race).
  const bool hold_bound = first_attempt && rule_ == LoadRule::kScope;
  // Only over the whole scope is L re-read (a zone's phase has a total of
  // its own).
  const bool rereads_total = std::is_same_v<View, ScopeLoads> && hold_bound &&
                             !span.weight.has_value();
  for (int race = 0;; ++race) {
    const internal::Walked& w = walked.value();
    const size_t s = w.selection;
    const bool spilled = first_attempt && s != owner;
    uint64_t bound = rule_ == LoadRule::kNone ? 0 : w.capacity();
    if constexpr (std::is_same_v<View, ZoneLoads>) {
      bound = view.FleetCapacityOf(s);  // the bound the backend sees
    }
    if (!track_load_) {
      return Complete(s, spilled, InFlightGuard(), order.from_prefix(), bound);
    }
    InFlightGuard slot = hold_bound && race < kMaxBoundRaces
                             ? TryAcquireWithinBound(s, w.bound)
                             : TryAcquire(s);
    if (slot.held()) {
      return Complete(s, spilled, std::move(slot), order.from_prefix(), bound);
    }
    view.filter().Lose(s);
    walked = walk(0);
    const bool none_left = !walked.ok() || walked.value().stale_total;
    if (none_left && !(rereads_total && race + 1 < kMaxBoundRaces &&
                       WalkUnderRisenTotal(key, prefix, view, walk, order,
                                           &total, &walked))) {
      // Everyone with room lost or at the limit.
      return OrPassedOn(
          PastEveryBound(order, owner, first_attempt, view.filter(), span));
    }
    walked.value().owner = owner;
  }
}

template <typename View, typename Walk>
bool Picker::WalkUnderRisenTotal(std::string_view key,
                                 const KeyOrderPrefix* prefix, View& view,
                                 const Walk& walk, internal::KeyOrder& order,
                                 uint64_t* total,
                                 Result<internal::Walked>* walked) const {
  const uint64_t now = scope_total_->Load();
  if (now <= *total) return false;
  *total = now;
  view.filter().ForgetLost();
  order = OrderOf(key, prefix, 0);
  *walked = walk(0);
  return walked->ok();
}

size_t Picker::ZoneOwnerAlong(const internal::KeyOrder& order,
                              size_t walked_owner) const {
  for (size_t j = 0; j < order.yielded(); ++j) {
    const size_t i = order.Yielded(j, Scratch());
    if (in_zone_[i] != 0) return i;
  }
  return walked_owner;
}

PickOutcome Picker::OrPassedOn(std::optional<PickOutcome> outcome) {
  return outcome.has_value() ? *std::move(outcome)
                             : PickOutcome{PickOutcome::Queue{}};
}

std::optional<PickOutcome> Picker::TakeAnyAlong(
    internal::KeyOrder& order, size_t owner, bool first_attempt,
    const SlotFilter& filter) const {
  DecisionScratch& scratch = Scratch();
  for (size_t j = 0; j < order.yielded(); ++j) {
    const size_t i = order.Yielded(j, scratch);
    if (!filter.Admits(i)) continue;
    InFlightGuard slot = TryAcquire(i);
    if (slot.held()) {
      return Complete(i, first_attempt && i != owner, std::move(slot), false,
                      0);
    }
  }
  return std::nullopt;
}

std::optional<PickOutcome> Picker::NoneAdmitted(PickError error,
                                                internal::KeyOrder& order,
                                                bool first_attempt,
                                                const SlotFilter& filter,
                                                const WalkSpan& span) const {
  if (error == PickError::kNoEligibleCandidates && filter.limited() &&
      ready_count_ != 0 && (span.take_past_bound || span.last)) {
    // The backends with room are at the limit, the others over their
    // bounds: the limit is the hard rule, the bound is not.
    const size_t first =
        order.yielded() != 0 ? order.Yielded(0, Scratch()) : internal::kNone;
    return PastEveryBound(order, SpillOwner(order, span, first), first_attempt,
                          filter, span);
  }
  // P8: nobody admitted in this phase; the next one may answer.
  if (error == PickError::kNoEligibleCandidates && !span.last) {
    return std::nullopt;
  }
  return Fail(RouteError(error));
}

std::optional<PickOutcome> Picker::PastEveryBound(internal::KeyOrder& order,
                                                  size_t owner,
                                                  bool first_attempt,
                                                  const SlotFilter& filter,
                                                  const WalkSpan& span) const {
  std::optional<PickOutcome> taken =
      span.take_past_bound || span.last
          ? TakeAnyAlong(order, owner, first_attempt, filter)
          : std::nullopt;
  if (taken.has_value() || !span.last) return taken;
  return Exhausted();
}

PickOutcome Picker::Complete(size_t index, bool spilled, InFlightGuard slot,
                             bool from_cache, uint64_t bound) const {
  BackendCell& cell = *list_->backends[index].cell;
  stats_->picks.fetch_add(1, std::memory_order_relaxed);
  cell.picks.fetch_add(1, std::memory_order_relaxed);
  if (spilled) {
    stats_->spills.fetch_add(1, std::memory_order_relaxed);
    cell.counts.Get().spilled_in.fetch_add(1, std::memory_order_relaxed);
  }
  if (ZoneActive()) {
    (in_zone_[index] != 0 ? stats_->zone_kept : stats_->zone_out)
        .fetch_add(1, std::memory_order_relaxed);
  }
  return PickOutcome{PickOutcome::Complete{index, spilled, std::move(slot),
                                           from_cache, bound}};
}

// ---------------------------------------------------------------------------
// The cold paths

PickOutcome Picker::Fail(absl::Status status) const {
  stats_->failed_picks.fetch_add(1, std::memory_order_relaxed);
  return PickOutcome{PickOutcome::Fail{std::move(status)}};
}

PickOutcome Picker::Exhausted() const {
  return Fail(absl::ResourceExhaustedError(
      absl::StrCat("poise: every READY backend is at maxInFlightPerBackend (",
                   limit_, " calls in flight)")));
}

bool Picker::OwnerIsPending(std::string_view key) const {
  const Result<size_t> owner = all_->Pick(key);  // set: some are pending
  return owner.ok() && pending_[owner.value()];
}

PickOutcome Picker::PickWithoutKey() const {
  stats_->missing_key.fetch_add(1, std::memory_order_relaxed);
  if (config_->missing_key == MissingKey::kFail) {
    return Fail(absl::InternalError(
        absl::StrCat("poise: the call has no \"", config_->hash_header,
                     "\" header and missingKey is FAIL")));
  }
  const std::string random_key =
      absl::StrCat(absl::Hex(ThreadRandom()(), absl::kZeroPad16));
  return PickFirst(random_key, nullptr);  // P1: no home to wait for
}

// ---------------------------------------------------------------------------
// Retries (P6)

uint32_t ParsePreviousAttempts(std::string_view value) {
  if (value.empty() || value.size() > 10) return 0;
  uint64_t n = 0;
  for (const char c : value) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  return n > UINT32_MAX ? 0 : static_cast<uint32_t>(n);
}

PickOutcome Picker::PickRetry(std::string_view key,
                              uint32_t previous_attempts) const {
  PickOutcome outcome = config_->retry_routing == RetryRouting::kSameOwner
                            ? Pick(PickRequest{key, 0})
                            : PickNextChoice(key, previous_attempts);
  if (const auto* c = std::get_if<PickOutcome::Complete>(&outcome.result)) {
    stats_->retries.fetch_add(1, std::memory_order_relaxed);
    list_->backends[c->backend].cell->counts.Get().retried_in.fetch_add(
        1, std::memory_order_relaxed);
  }
  return outcome;
}

PickOutcome Picker::PickNextChoice(std::string_view key,
                                   uint32_t previous_attempts) const {
  // The same walk as a first attempt, stopping at the (k + 1)-th with room;
  // along the key's cached order where it has one.
  KeyOrderPrefix prefix;
  const KeyOrderPrefix* along =
      key_cache_ != nullptr && CachedOrder(key, &prefix) ? &prefix : nullptr;
  const size_t nth = previous_attempts;
  if (zone_ready_count_ != 0) {
    if (std::optional<PickOutcome> in_order =
            PickZoneNextChoice(key, along, nth)) {
      return *std::move(in_order);
    }
  }
  switch (rule_) {
    case LoadRule::kNone: {
      NoLoads view(Filter());
      return WalkAlongOrder(key, along, view, WalkSpan{0}, nth, false);
    }
    case LoadRule::kScope: {
      ScopeLoads view(counters_.data(), Filter());
      return WalkAlongOrder(key, along, view, WalkSpan{scope_total_->Load()},
                            nth, false);
    }
    case LoadRule::kFleet:
      break;
  }
  return PickFleet(key, along, nth);
}

}  // namespace poise::router
