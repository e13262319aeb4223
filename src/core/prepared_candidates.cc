#include "prepared_candidates.h"

#include <utility>

#include "key_order_walk.h"
#include "largest_z.h"
#include "one_weight_path.h"
#include "room_search.h"
#include "two_weight_path.h"

namespace poise {
namespace {

using internal::kNone;
using internal::ListPath;
using internal::PreparedList;
using Routed = PreparedCandidates::Routed;

// The router's loads: the backends' in-flight counters.
struct CounterReader {
  const InFlightCounter* const* counters;
  uint64_t operator()(size_t i) const { return counters[i]->Load(); }
};

Result<Routed> RoutedFrom(const Result<Decision>& d, bool stale_total) {
  if (!d.ok()) return d.error();
  return Routed{d.value().affinity, d.value().selection, d.value().spilled,
                stale_total};
}

// The general search with every bound from `total_load`, on the loads in
// the scratch (every eligible one read already).
Result<Routed> RouteOnReadLoads(const PreparedList& list,
                                const BoundedLoadRendezvous& bounded,
                                std::string_view key, uint64_t total_load,
                                DecisionScratch& scratch) {
  bool stale_total = false;
  const Result<Decision> d = bounded.DecideOnLoadsWithTotal(
      key, list.candidates, list.table.get(), scratch.loads(), total_load,
      scratch, stale_total);
  return RoutedFrom(d, stale_total);
}

// The general path: every eligible load read once, then the general search.
template <typename Reader>
Result<Routed> RouteOnGeneralPath(const PreparedList& list,
                                  const BoundedLoadRendezvous& bounded,
                                  std::string_view key, uint64_t total_load,
                                  const Reader& load,
                                  DecisionScratch& scratch) {
  const std::vector<Candidate>& candidates = list.candidates;
  if (list.table->size() == candidates.size() &&
      scratch.Fit(candidates.size())) {
    uint64_t* const loads = scratch.loads();
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (candidates[i].IsEligible()) loads[i] = load(i);
    }
  }
  // DecideOnLoadsWithTotal reports what kept the loads from being read, in
  // poise-core's order (a table for another list, no candidates, none
  // eligible, a scratch that could not grow).
  return RouteOnReadLoads(list, bounded, key, total_load, scratch);
}

// The general path along the key's order (Reads::kAlongOrder): the
// contract's ranking, then each load in that order up to the first with
// room. Where the general search would report an error, it answers.
template <typename Reader>
Result<Routed> RouteAlongRanking(const PreparedList& list,
                                 const BoundedLoadRendezvous& bounded,
                                 std::string_view key, uint64_t total_load,
                                 const Reader& load, DecisionScratch& scratch) {
  const std::vector<Candidate>& candidates = list.candidates;
  if (list.table->size() != candidates.size() ||
      !scratch.Fit(candidates.size()) ||
      internal::WeightSumError(candidates).has_value() ||
      total_load == UINT64_MAX) {
    return RouteOnGeneralPath(list, bounded, key, total_load, load, scratch);
  }
  const Result<std::vector<Rank>> ranks =
      WeightedRendezvous::Ranking(key, candidates);
  if (!ranks.ok()) return ranks.error();
  uint64_t total_weight = 0;  // fits: WeightSumError above
  for (const Rank& r : ranks.value()) total_weight += r.weight;
  uint64_t* const loads = scratch.loads();
  const size_t owner = ranks.value().front().index;
  for (const Rank& r : ranks.value()) {
    loads[r.index] = load(r.index);
    if (bounded.BoundFor(total_load, r.weight, total_weight)
            .HasRoom(loads[r.index])) {
      return Routed{owner, r.index, r.index != owner, false};
    }
  }
  // Nobody has room under T (a stale T): every eligible load is read.
  return RouteOnReadLoads(list, bounded, key, total_load, scratch);
}

// The owner on a short path, with every eligible z in the scratch; kNone on
// a near-tie (the general search decides).
Result<size_t> ShortPathOwner(const PreparedList& list, std::string_view key,
                              DecisionScratch& scratch) {
  if (!scratch.Fit(list.candidates.size())) {
    return PickError::kScratchCapacityExceeded;
  }
  const uint64_t key_state = KeyHash(key).state();
  if (list.path == ListPath::kOneWeight) {
    const internal::LargestZ largest =
        internal::OneWeightLargestZ(list, key_state, scratch.hashes());
    return internal::ClearOfRunnerUp(largest) ? largest.index : kNone;
  }
  return internal::TwoWeightOwner(
      list, internal::TwoWeightPassKeepingZ(list, key_state, scratch.hashes()));
}

// A walk that never stops for reading every load (Reads::kAlongOrder).
constexpr size_t kWalkToTheEnd = kNone - 1;

template <typename Reader>
Result<Routed> RouteOnPreparedList(const PreparedList& list,
                                   const BoundedLoadRendezvous& bounded,
                                   std::string_view key, uint64_t total_load,
                                   const Reader& load, size_t walk_visits,
                                   DecisionScratch& scratch) {
  const bool along_order = walk_visits == kWalkToTheEnd;
  const auto general = [&]() {
    return along_order ? RouteAlongRanking(list, bounded, key, total_load, load,
                                           scratch)
                       : RouteOnGeneralPath(list, bounded, key, total_load,
                                            load, scratch);
  };
  if (list.path == ListPath::kGeneral) return general();
  if (total_load == UINT64_MAX) return PickError::kLoadOverflow;  // T + 1
  const Result<size_t> owner = ShortPathOwner(list, key, scratch);
  if (!owner.ok()) return owner.error();
  const size_t o = owner.value();
  if (o == kNone) return general();
  const uint64_t owner_load = load(o);
  const Bound owner_bound = bounded.BoundFor(
      total_load, list.weights[list.GroupOf(o)], list.total_weight);
  if (owner_bound.HasRoom(owner_load)) return Routed{o, o, false, false};
  const size_t selection = internal::WalkToRoom(
      list, bounded.factor_percent(), total_load, o, owner_load, load,
      walk_visits == kNone
          ? internal::WalkVisitsBeforeReadingAll(list.eligible.size())
          : walk_visits,
      scratch);
  if (selection != kNone) return Routed{o, selection, true, false};
  return RouteOnReadLoads(list, bounded, key, total_load, scratch);
}

}  // namespace

PreparedCandidates::PreparedCandidates(
    std::vector<Candidate> candidates,
    std::shared_ptr<const IdentityTable> table)
    : list_(internal::PrepareList(std::move(candidates), std::move(table))) {}

void PreparedCandidates::set_walk_visits(size_t visits) {
  walk_visits_ = visits;
}

Result<size_t> PreparedCandidates::Pick(std::string_view key) const {
  if (list_.path == ListPath::kOneWeight) {
    const internal::LargestZ largest =
        internal::OneWeightLargestZ(list_, KeyHash(key).state(), nullptr);
    if (internal::ClearOfRunnerUp(largest)) return largest.index;
  } else if (list_.group_count != 0) {  // two weights, or 3..kMaxGroups
    return internal::PickByWeight(list_, key);
  }
  return WeightedRendezvous::Pick(key, list_.candidates, *list_.table);
}

size_t PreparedCandidates::OrderPrefix(std::string_view key, size_t count,
                                       uint32_t* out,
                                       DecisionScratch& scratch) const {
  if (count == 0 || list_.path == ListPath::kGeneral) return 0;
  const Result<size_t> owner = ShortPathOwner(list_, key, scratch);
  if (!owner.ok() || owner.value() == kNone) return 0;
  out[0] = static_cast<uint32_t>(owner.value());
  size_t written = 1;
  if (written == count) return written;
  // The walk's bounds are not read: no load is. Its first level lists about
  // twice the prefix, so that one level serves as a rule.
  internal::Walk walk =
      internal::StartWalk(list_, BoundedLoadRendezvous::kMinFactorPercent,
                          /*total_load=*/0, owner.value(), scratch, 2 * count);
  while (written < count) {
    const internal::WalkStep step =
        internal::NextInKeyOrder(list_, walk, scratch);
    // Every eligible candidate listed, or a near-tie the walk cannot order.
    if (step.position == kNone) break;
    out[written++] = static_cast<uint32_t>(scratch.list()[step.position]);
    internal::MarkVisited(walk, step.position, scratch.list());
  }
  return written;
}

Result<Routed> PreparedCandidates::RouteWithTotal(
    const BoundedLoadRendezvous& bounded, std::string_view key,
    uint64_t total_load, const InFlightCounter* const* counters,
    DecisionScratch& scratch) const {
  return RouteOnPreparedList(list_, bounded, key, total_load,
                             CounterReader{counters}, walk_visits_, scratch);
}

Result<Routed> PreparedCandidates::RouteWithTotal(
    const BoundedLoadRendezvous& bounded, std::string_view key,
    uint64_t total_load, LoadReader load, DecisionScratch& scratch,
    Reads reads) const {
  return RouteOnPreparedList(
      list_, bounded, key, total_load, load,
      reads == Reads::kAlongOrder ? kWalkToTheEnd : walk_visits_, scratch);
}

Result<size_t> NthWithRoomForTotal(const BoundedLoadRendezvous& bounded,
                                   std::string_view key,
                                   const std::vector<Candidate>& candidates,
                                   const IdentityTable& table,
                                   uint64_t total_load,
                                   PreparedCandidates::LoadReader load,
                                   size_t n, DecisionScratch& scratch) {
  if (table.size() != candidates.size()) return PickError::kTableMismatch;
  const Result<std::vector<Rank>> ranks =
      WeightedRendezvous::Ranking(key, candidates);
  if (!ranks.ok()) return ranks.error();
  uint64_t total_weight = 0;
  for (const Rank& r : ranks.value()) {
    if (__builtin_add_overflow(total_weight, uint64_t{r.weight},
                               &total_weight)) {
      return PickError::kWeightOverflow;
    }
  }
  if (total_load == UINT64_MAX) return PickError::kLoadOverflow;  // T + 1
  thread_local std::vector<uint64_t> loads;
  thread_local std::vector<size_t> with_room;
  loads.assign(candidates.size(), 0);
  with_room.clear();
  for (const Rank& r : ranks.value()) {
    loads[r.index] = load(r.index);
    if (bounded.BoundFor(total_load, r.weight, total_weight)
            .HasRoom(loads[r.index])) {
      with_room.push_back(r.index);
    }
  }
  if (!with_room.empty()) return with_room[n % with_room.size()];
  const Result<Decision> d = bounded.DecideNth(
      key, candidates, table, [](size_t i) { return loads[i]; }, n, scratch);
  if (!d.ok()) return d.error();
  return d.value().selection;
}

}  // namespace poise
