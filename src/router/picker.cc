#include "src/router/picker.h"

#include <algorithm>
#include <array>
#include <random>
#include <string>
#include <utility>

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

// The backends a bounded pick lost at their slots, at most one per race.
template <size_t kCapacity>
class LostSlots final {
 public:
  bool empty() const { return count_ == 0; }
  bool Has(size_t i) const {
    return std::find(slots_.begin(), slots_.begin() + count_, i) !=
           slots_.begin() + count_;
  }
  void Add(size_t i) { slots_[count_++] = static_cast<uint32_t>(i); }
  void Clear() { count_ = 0; }

 private:
  std::array<uint32_t, kCapacity> slots_;
  size_t count_ = 0;
};

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
      bounded_(config_->bounded),
      track_load_(config_->tracks_load()),
      limit_(config_->max_in_flight_per_backend.value_or(
          InFlightCounter::kNoLimit)),
      fleet_(config_->bounded && config_->server_load.has_value()),
      max_report_age_ns_(fleet_ ? absl::ToInt64Nanoseconds(
                                      config_->server_load->max_report_age)
                                : 0),
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
  // W of the bounds, for holding them at the slot.
  uint64_t w = 0;
  bool fits = true;
  for (const Candidate& c : ready_.candidates()) {
    if (c.eligible) fits &= !__builtin_add_overflow(w, uint64_t{c.weight}, &w);
    ready_count_ += c.IsEligible() ? 1 : 0;
  }
  ready_weight_ = fits ? w : 0;
  computes_orders_ = key_cache_ != nullptr &&
                     ready_count_ == list_->backends.size() &&
                     ready_.path() != PreparedCandidates::Path::kGeneral;
  stats_->server_load.store(fleet_, std::memory_order_relaxed);
  counters_.reserve(list_->backends.size());
  pending_.reserve(list_->backends.size());
  for (size_t i = 0; i < list_->backends.size(); ++i) {
    // A backend without a state is taken as pending (never READY yet).
    const bool pending =
        i >= states.size() || states[i].routing == RoutingState::kPending;
    pending_.push_back(pending);
    counters_.push_back(list_->backends[i].cell->in_flight);
  }
}

Picker::Inputs Picker::InputsNow() const {
  Inputs inputs;
  const int64_t now_ns = FleetNowNs();
  const std::vector<Candidate>& ready = ready_.candidates();
  for (size_t i = 0; i < ready.size(); ++i) {
    const std::string_view identity = ready[i].identity;
    if (ready[i].eligible) {
      inputs.ready.push_back(
          {std::string(identity), ready[i].weight, LoadOf(i, now_ns)});
    } else {
      inputs.not_ready.emplace_back(identity);
    }
  }
  return inputs;
}

// ---------------------------------------------------------------------------
// The hot paths: a keyed pick with every backend settled (none pending).

PickOutcome Picker::Pick(const PickRequest& request) const {
  if (!request.key.has_value()) return PickWithoutKey();
  if (request.previous_attempts != 0) {
    return PickRetry(*request.key, request.previous_attempts);
  }
  return PickForKey(*request.key);
}

PickOutcome Picker::PickForKey(std::string_view key) const {
  if (key_cache_ != nullptr) {
    KeyOrderPrefix prefix;
    if (CachedOrder(key, &prefix)) {
      std::optional<PickOutcome> outcome = PickAlong(key, prefix);
      if (outcome.has_value()) return std::move(*outcome);
    }
  }
  // P2: a pending owner holds its keys.
  if (any_pending_ && OwnerIsPending(key)) {
    return PickOutcome{PickOutcome::Queue{}};
  }
  return bounded_ ? PickBounded(key) : PickUnbounded(key);
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

std::optional<PickOutcome> Picker::PickAlong(
    std::string_view key, const KeyOrderPrefix& prefix) const {
  // P2: the prefix's first is the owner over every backend.
  if (any_pending_ && pending_[prefix.index[0]]) {
    return PickOutcome{PickOutcome::Queue{}};
  }
  if (bounded_) return PickBounded(key, &prefix);
  // P3: the first READY one (the first, where every backend is).
  if (ready_count_ == list_->backends.size()) {
    return TakeOwner(key, prefix.index[0], true);
  }
  for (size_t j = 0; j < prefix.size; ++j) {
    const size_t i = prefix.index[j];
    if (ready_.candidates()[i].IsEligible()) return TakeOwner(key, i, true);
  }
  return std::nullopt;
}

std::optional<PreparedCandidates::Routed> Picker::RouteAlong(
    const KeyOrderPrefix& prefix, uint64_t total_load,
    PreparedCandidates::LoadReader load) const {
  // Where the core would report an error, it answers.
  if (ready_weight_ == 0 || total_load == UINT64_MAX) return std::nullopt;
  const std::vector<Candidate>& candidates = ready_.candidates();
  std::optional<size_t> affinity;
  for (size_t j = 0; j < prefix.size; ++j) {
    const size_t i = prefix.index[j];
    if (!candidates[i].IsEligible()) continue;
    if (!affinity.has_value()) affinity = i;
    const Bound bound = bounded_policy_.BoundFor(
        total_load, candidates[i].weight, ready_weight_);
    if (bound.HasRoom(load(i))) {
      return PreparedCandidates::Routed{*affinity, i, i != *affinity, false};
    }
  }
  return std::nullopt;
}

std::optional<size_t> Picker::NthAlong(const KeyOrderPrefix& prefix,
                                       const std::vector<Candidate>& candidates,
                                       size_t n) {
  const auto eligible = static_cast<size_t>(
      std::count_if(candidates.begin(), candidates.end(),
                    [](const Candidate& c) { return c.IsEligible(); }));
  if (eligible == 0) return std::nullopt;
  size_t remaining = n % eligible;
  for (size_t j = 0; j < prefix.size; ++j) {
    const size_t i = prefix.index[j];
    if (!candidates[i].IsEligible()) continue;
    if (remaining == 0) return i;
    --remaining;
  }
  return std::nullopt;
}

PickOutcome Picker::Complete(size_t index, bool spilled, InFlightGuard slot,
                             bool from_cache) const {
  BackendCell& cell = *list_->backends[index].cell;
  stats_->picks.fetch_add(1, std::memory_order_relaxed);
  cell.picks.fetch_add(1, std::memory_order_relaxed);
  if (spilled) {
    stats_->spills.fetch_add(1, std::memory_order_relaxed);
    cell.counts.Get().spilled_in.fetch_add(1, std::memory_order_relaxed);
  }
  return PickOutcome{
      PickOutcome::Complete{index, spilled, std::move(slot), from_cache}};
}

PickOutcome Picker::PickUnbounded(std::string_view key) const {
  // P3: the owner among the READY backends.
  const Result<size_t> chosen = ready_.Pick(key);
  if (!chosen.ok()) return Fail(RouteError(chosen.error()));
  return TakeOwner(key, chosen.value(), false);
}

PickOutcome Picker::TakeOwner(std::string_view key, size_t owner,
                              bool from_cache) const {
  if (!track_load_) return Complete(owner, false, InFlightGuard(), from_cache);
  // P4: a slot, else the slow path of the limit.
  InFlightGuard slot = TryAcquire(owner);
  if (slot.held()) return Complete(owner, false, std::move(slot), from_cache);
  return PickWithinLimit(key, owner);
}

PickOutcome Picker::PickBounded(std::string_view key,
                                const KeyOrderPrefix* prefix) const {
  if (fleet_) return PickFleetBounded(key, prefix);
  // The backends this pick lost at their slots (below). Each was at its
  // bound when tried, so the rest of the pick reads it as full and goes on
  // along the key's order: deciding again on fresh loads, a pick could see
  // the same slot free once more, freed and taken back by a faster picker,
  // and lose it every time.
  LostSlots<kMaxBoundRaces> lost;
  uint64_t total = 0;
  const auto load = [&](size_t i) {
    return lost.Has(i) ? LoadOfAFull(i, total) : counters_[i]->Load();
  };
  for (int race = 0;; ++race) {
    // Bounds from the scope's total: the decision reads only the counters
    // of the candidates it visits in the key's order (each a cold cache
    // line), and falls back to their sum when slots were taken between the
    // total's read and theirs (PreparedCandidates::RouteWithTotal). Along
    // the key's cached order where it has one.
    total = scope_total_->Load();
    std::optional<PreparedCandidates::Routed> along;
    if (prefix != nullptr) along = RouteAlong(*prefix, total, load);
    const bool from_cache = along.has_value();
    const Result<PreparedCandidates::Routed> routed =
        from_cache     ? Result<PreparedCandidates::Routed>(*along)
        : lost.empty() ? ready_.RouteWithTotal(bounded_policy_, key, total,
                                               counters_.data(), Scratch())
                       : ready_.RouteWithTotal(bounded_policy_, key, total,
                                               load, Scratch());
    if (!routed.ok()) return Fail(RouteError(routed.error()));
    const PreparedCandidates::Routed& d = routed.value();
    // The bound holds at the slot: channels of one scope pick at the same
    // time, so the selection may have filled to its bound since its load
    // was read; then the choice is made again. Each such loss is another
    // pick's win; after kMaxBoundRaces of them in a row the pick takes its
    // choice regardless (it never fails or waits for a race).
    const bool last_race = ready_weight_ == 0 || race == kMaxBoundRaces;
    // A stale total (the decision fell back to the loads' sum) is read
    // again: the sum's bound is not the scope's, and its reads, not one
    // snapshot, may count a call twice. The backends lost under the old
    // total may have room under the new one.
    if (d.stale_total && !last_race) {
      lost.Clear();
      continue;
    }
    InFlightGuard slot = last_race ? TryAcquire(d.selection)
                                   : TryAcquireWithinBound(d.selection, total);
    if (slot.held()) {
      return Complete(d.selection, d.spilled, std::move(slot), from_cache);
    }
    if (last_race || (limit_ != InFlightCounter::kNoLimit &&
                      counters_[d.selection]->Load() >= limit_)) {
      return PickWithinLimit(key, d.affinity);
    }
    lost.Add(d.selection);
  }
}

uint64_t Picker::LoadOfAFull(size_t i, uint64_t total) const {
  const UInt128 capacity =
      bounded_policy_
          .BoundFor(total, ready_.candidates()[i].weight, ready_weight_)
          .Capacity();
  return capacity > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(capacity);
}

// ---------------------------------------------------------------------------
// serverLoad (P7)

uint64_t Picker::FleetLoadOf(size_t i, int64_t now_ns,
                             std::optional<FreshReport>* report) const {
  const std::optional<FreshReport> fresh =
      list_->backends[i].cell->fleet().report.Fresh(now_ns, max_report_age_ns_);
  if (report != nullptr) *report = fresh;
  return FleetEstimate(fresh, counters_[i]->Load());
}

uint64_t Picker::OthersSum(int64_t now_ns, uint64_t own_total,
                           bool* without_report) const {
  const int64_t at = others_sum_at_ns_.load(std::memory_order_acquire);
  if (at != ReportSlot::kNever && now_ns - at < kFleetSumPeriodNs &&
      now_ns >= at) {
    *without_report =
        others_sum_without_report_.load(std::memory_order_relaxed);
    return others_sum_.load(std::memory_order_relaxed);
  }
  // Every READY backend's others part (0 without a fresh report) and own
  // count, then L from them with each capped (OthersPartOfL).
  thread_local std::vector<LoadPart> parts;
  thread_local std::vector<size_t> backends;
  parts.clear();
  backends.clear();
  bool without = false;
  const std::vector<Candidate>& candidates = ready_.candidates();
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!candidates[i].eligible) continue;
    const std::optional<FreshReport> report =
        list_->backends[i].cell->fleet().report.Fresh(now_ns,
                                                      max_report_age_ns_);
    without |= !report.has_value();
    parts.push_back({report.has_value() ? report->others : 0,
                     counters_[i]->Load(), candidates[i].weight});
    backends.push_back(i);
  }
  const uint64_t sum = OthersPartOfL(
      parts, own_total, bounded_policy_.factor_percent(), ready_weight_);
  for (size_t p = 0; p < parts.size(); ++p) {
    if (!parts[p].capped) continue;
    stats_->capped_load_reports.fetch_add(1, std::memory_order_relaxed);
    list_->backends[backends[p]].cell->fleet().capped.fetch_add(
        1, std::memory_order_relaxed);
  }
  others_sum_.store(sum, std::memory_order_relaxed);
  others_sum_without_report_.store(without, std::memory_order_relaxed);
  others_sum_at_ns_.store(now_ns, std::memory_order_release);
  *without_report = without;
  return sum;
}

PickOutcome Picker::PickFleetBounded(std::string_view key,
                                     const KeyOrderPrefix* prefix) const {
  const int64_t now_ns = FleetNowNs();
  bool without_report = false;
  const uint64_t own_total = scope_total_->Load();
  // L: the others' calls as reported plus this client's own now.
  const uint64_t total =
      OthersSum(now_ns, own_total, &without_report) + own_total;
  if (without_report) {
    stats_->picks_without_some_report.fetch_add(1, std::memory_order_relaxed);
  }
  // This client's part of the fleet's calls, the pick's own call counted.
  const double share =
      static_cast<double>(own_total + 1) / static_cast<double>(total + 1);
  thread_local std::mt19937_64 rng{std::random_device{}()};
  // A visited backend's load by the herding rule. Each read is an ask: the
  // decision reads only the backends it visits in the key's order
  // (Reads::kAlongOrder), or the rule would see this client ask for every
  // backend and refuse the owners' room.
  const auto herding = [&](size_t i) -> uint64_t {
    const double asks =
        list_->backends[i].cell->fleet().asks.Ask(now_ns, max_report_age_ns_);
    const std::optional<FreshReport> report =
        list_->backends[i].cell->fleet().report.Fresh(now_ns,
                                                      max_report_age_ns_);
    const UInt128 capacity =
        ready_weight_ == 0
            ? 0
            : bounded_policy_
                  .BoundFor(total, ready_.candidates()[i].weight, ready_weight_)
                  .Capacity();
    return HerdingLoad(report, counters_[i]->Load(), capacity, share, asks,
                       static_cast<double>(rng() >> 11) * 0x1p-53);
  };
  // Along the key's cached order first, where it has one. Each backend's
  // herding load is read once per pick: the ones read along the prefix are
  // read from `along_prefix` again if the whole order must be searched.
  std::optional<PreparedCandidates::Routed> along;
  size_t read = 0;
  std::pair<size_t, uint64_t> along_prefix[KeyOrderPrefix::kCapacity];
  if (prefix != nullptr) {
    along = RouteAlong(*prefix, total, [&](size_t i) {
      const uint64_t load = herding(i);
      along_prefix[read++] = {i, load};
      return load;
    });
  }
  const bool from_cache = along.has_value();
  Result<PreparedCandidates::Routed> routed =
      from_cache ? Result<PreparedCandidates::Routed>(*along)
                 : ready_.RouteWithTotal(
                       bounded_policy_, key, total,
                       [&](size_t i) {
                         for (size_t r = 0; r < read; ++r) {
                           if (along_prefix[r].first == i) {
                             return along_prefix[r].second;
                           }
                         }
                         return herding(i);
                       },
                       Scratch());
  // The rule left no backend with room: the bound alone decides (over the
  // loads' own sum should L's sum be behind them: RouteWithTotal).
  if (routed.ok() && routed.value().stale_total) {
    routed = ready_.RouteWithTotal(
        bounded_policy_, key, total,
        [this, now_ns](size_t i) { return FleetLoadOf(i, now_ns); }, Scratch());
  }
  if (!routed.ok()) return Fail(RouteError(routed.error()));
  const PreparedCandidates::Routed& d = routed.value();
  InFlightGuard slot = TryAcquire(d.selection);
  if (slot.held()) {
    return Complete(d.selection, d.spilled, std::move(slot), from_cache);
  }
  return PickWithinLimit(key, d.affinity);
}

// ---------------------------------------------------------------------------
// The cold paths

PickOutcome Picker::Fail(absl::Status status) const {
  stats_->failed_picks.fetch_add(1, std::memory_order_relaxed);
  return PickOutcome{PickOutcome::Fail{std::move(status)}};
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
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const std::string random_key =
      absl::StrCat(absl::Hex(rng(), absl::kZeroPad16));
  return bounded_ ? PickBounded(random_key) : PickUnbounded(random_key);
}

// The slow path of a configured hard limit (P4): the choice of P3 again,
// without the backends found at the limit, until a slot is taken or no
// READY backend is left.
PickOutcome Picker::PickWithinLimit(std::string_view key,
                                    size_t affinity) const {
  thread_local std::vector<Candidate> candidates;
  candidates = ready_.candidates();
  const int64_t now_ns = fleet_ ? FleetNowNs() : 0;
  for (;;) {
    LeaveOutBackendsAtTheLimit(candidates);
    size_t selection;
    if (bounded_) {
      const Result<Decision> d = bounded_policy_.Decide(
          key, candidates, ready_.table(),
          [this, now_ns](size_t i) { return LoadOf(i, now_ns); }, Scratch());
      if (!d.ok()) break;
      selection = d.value().selection;
    } else {
      const Result<size_t> owner =
          WeightedRendezvous::Pick(key, candidates, ready_.table());
      if (!owner.ok()) break;
      selection = owner.value();
    }
    InFlightGuard slot = TryAcquire(selection);
    if (slot.held()) {
      return Complete(selection, selection != affinity, std::move(slot));
    }
    candidates[selection].eligible = false;  // filled up since it was read
  }
  return Fail(absl::ResourceExhaustedError(
      absl::StrCat("poise: every READY backend is at maxInFlightPerBackend (",
                   limit_, " calls in flight)")));
}

size_t Picker::LeaveOutBackendsAtTheLimit(
    std::vector<Candidate>& candidates) const {
  size_t left_out = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].IsEligible() && counters_[i]->Load() >= limit_) {
      candidates[i].eligible = false;
      ++left_out;
    }
  }
  return left_out;
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
                            ? PickForKey(key)
                            : PickNextChoice(key, previous_attempts);
  if (const auto* c = std::get_if<PickOutcome::Complete>(&outcome.result)) {
    stats_->retries.fetch_add(1, std::memory_order_relaxed);
    list_->backends[c->backend].cell->counts.Get().retried_in.fetch_add(
        1, std::memory_order_relaxed);
  }
  return outcome;
}

Result<size_t> Picker::NthChoice(std::string_view key,
                                 const std::vector<Candidate>& candidates,
                                 size_t n, int64_t now_ns,
                                 const KeyOrderPrefix* prefix) const {
  if (fleet_) {
    // L as a first attempt counts it: each backend up to its own bound.
    bool without_report = false;
    const uint64_t own_total = scope_total_->Load();
    struct View {
      const Picker& picker;
      const std::vector<Candidate>& candidates;
      int64_t now_ns;
      uint64_t Load(size_t i) const { return picker.FleetLoadOf(i, now_ns); }
      bool Admits(size_t i) const { return candidates[i].IsEligible(); }
    } view{*this, candidates, now_ns};
    Result<internal::KeyOrder> order =
        internal::KeyOrder::Hashed(ready_.list(), key, Scratch());
    if (!order.ok()) return order.error();
    const Result<internal::Walked> walked = internal::WalkToNthWithRoom(
        order.value(), bounded_policy_.factor_percent(),
        OthersSum(now_ns, own_total, &without_report) + own_total, view, n,
        internal::Reads::kVisited, Scratch());
    if (!walked.ok()) return walked.error();
    return walked.value().selection;
  }
  if (bounded_) {
    const Result<Decision> d = bounded_policy_.DecideNth(
        key, candidates, ready_.table(),
        [this](size_t i) { return counters_[i]->Load(); }, n, Scratch());
    if (!d.ok()) return d.error();
    return d.value().selection;
  }
  if (prefix != nullptr) {
    const std::optional<size_t> nth = NthAlong(*prefix, candidates, n);
    if (nth.has_value()) return *nth;
  }
  return WeightedRendezvous::PickNth(key, candidates, ready_.table(), n);
}

PickOutcome Picker::PickNextChoice(std::string_view key,
                                   uint32_t previous_attempts) const {
  const size_t n = previous_attempts;
  const bool limited = limit_ != InFlightCounter::kNoLimit;
  thread_local std::vector<Candidate> candidates;
  candidates = ready_.candidates();
  const int64_t now_ns = fleet_ ? FleetNowNs() : 0;
  // weighted_rendezvous reads the key's cached order where it has one.
  KeyOrderPrefix prefix;
  const bool along =
      !bounded_ && key_cache_ != nullptr && CachedOrder(key, &prefix);
  bool left_out = false;  // some READY backend was at the limit
  for (;;) {
    if (limited) left_out |= LeaveOutBackendsAtTheLimit(candidates) != 0;
    const Result<size_t> chosen =
        NthChoice(key, candidates, n, now_ns, along ? &prefix : nullptr);
    if (!chosen.ok()) {
      if (left_out && chosen.error() == PickError::kNoEligibleCandidates) {
        break;
      }
      return Fail(RouteError(chosen.error()));
    }
    const size_t selection = chosen.value();
    if (!track_load_) return Complete(selection, false, InFlightGuard());
    InFlightGuard slot = TryAcquire(selection);
    if (slot.held()) return Complete(selection, false, std::move(slot));
    candidates[selection].eligible = false;  // filled up since it was read
    left_out = true;
  }
  return Fail(absl::ResourceExhaustedError(
      absl::StrCat("poise: every READY backend is at maxInFlightPerBackend (",
                   limit_, " calls in flight)")));
}

}  // namespace poise::router
