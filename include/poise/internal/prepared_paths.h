// Not API: nothing here is meant to be called by users, and all of it may
// change in any release. The templates of poise/prepared_candidates.h (which
// includes this file): the steps of its paths that call the caller's load
// function, so that the call is inlined into their loops. Their non-template
// steps are in src/core/prepared_candidates.cc.
#ifndef POISE_INTERNAL_PREPARED_PATHS_H_
#define POISE_INTERNAL_PREPARED_PATHS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>

#include "poise/hash.h"
#include "poise/identity_table.h"
#include "poise/internal/pass.h"
#include "poise/prepared_candidates.h"
#include "poise/rendezvous.h"

namespace poise {

// What Route reports of a decision.
inline Result<PreparedCandidates::Routed> PreparedCandidates::RoutedFrom(
    const Result<Decision>& d, bool sampled) {
  if (!d.ok()) return d.error();
  return Routed{d.value().affinity, d.value().selection, d.value().spilled,
                sampled};
}

// Every eligible load, sampled once into the scratch (the one of index
// `known`, if any, is `known_load`, sampled already), and in the same loop
// the survivors listed branch-free: the candidates whose z (in the scratch)
// reached a threshold that about kSurvivorQuota of them reach, z being
// uniform. A full owner's successor is usually among them.
struct PreparedCandidates::Sampled {
  uint64_t total_load = 0;
  bool overflow = false;  // the sum wrapped
  uint64_t threshold;     // 0 for short lists: everyone is listed
  size_t listed = 0;      // in scratch.survivors_, ascending
};

template <typename LoadFn>
inline Result<Decision> PreparedCandidates::Decide(
    const BoundedLoadRendezvous& bounded, std::string_view key, LoadFn&& load,
    DecisionScratch& scratch) const {
  if (path_ != Path::kOneWeight) {
    return DecideTwoWeightsOrGeneral(bounded, key, load, scratch);
  }
  internal::LargestZ largest;
  if (!FindLargestZIntoScratch(key, scratch, largest)) {
    return PickError::kScratchCapacityExceeded;
  }
  return DecideOneWeight(bounded, key, largest, internal::kNone, 0, load,
                         scratch);
}

template <typename LoadFn>
inline Result<PreparedCandidates::Routed> PreparedCandidates::Route(
    const BoundedLoadRendezvous& bounded, std::string_view key, LoadFn&& load,
    DecisionScratch& scratch) const {
  if (path_ == Path::kTwoWeights) {
    return RouteTwoWeights(bounded, key, load, scratch);
  }
  Result<Decision> d = PickError::kEmpty;
  if (path_ == Path::kGeneral) {
    d = DecideTwoWeightsOrGeneral(bounded, key, load, scratch);
  } else {
    internal::LargestZ largest;
    if (!FindLargestZIntoScratch(key, scratch, largest)) {
      return PickError::kScratchCapacityExceeded;
    }
    size_t known = internal::kNone;
    uint64_t known_load = 0;
    if (internal::ClearOfRunnerUp(largest)) {
      known = largest.index;
      known_load = static_cast<uint64_t>(load(known));
      if (known_load == 0) return Routed{known, known, false, false};
    }
    d = DecideOneWeight(bounded, key, largest, known, known_load, load,
                        scratch);
  }
  return RoutedFrom(d);
}

// A one-weight decision after FindLargestZIntoScratch(): samples every
// eligible load (the one of index `known`, if any, is `known_load`, sampled
// already). With one weight the key's order is the order of z
// (src/core/score_bounds.h), so the selection is the owner if it has room,
// else the largest z among those with room; either only when clear of its
// runner-up, like the general path's own shortcut. Anything else is decided
// again on the general path.
template <typename LoadFn>
Result<Decision> PreparedCandidates::DecideOneWeight(
    const BoundedLoadRendezvous& bounded, std::string_view key,
    const internal::LargestZ& largest, size_t known, uint64_t known_load,
    LoadFn& load, DecisionScratch& scratch) const {
  const Sampled sampled = SampleLoads(load, known, known_load, scratch);
  if (sampled.overflow || sampled.total_load == UINT64_MAX) {
    return PickError::kLoadOverflow;
  }
  if (!internal::ClearOfRunnerUp(largest)) {
    return RedecideOnGeneralPath(bounded, key, scratch);
  }
  // One weight, one bound. Every load here is at most L < 2^64 - 1, so with
  // the bound clamped to 2^64 - 1, load < bound is the exact room test in 64
  // bits.
  const UInt128 capacity = BoundedLoadRendezvous::Capacity(
      bounded.factor_percent(), sampled.total_load, weight_, total_weight_);
  const uint64_t bound =
      capacity > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(capacity);
  const uint64_t* const loads = scratch.loads_.data();
  const uint64_t* const z = scratch.hashes_.data();
  const uint64_t threshold = sampled.threshold;
  const size_t owner = largest.index;
  size_t selection = owner;
  if (loads[owner] >= bound) {
    internal::LargestZ best_with_room = internal::LargestZ::Empty();
    for (size_t s = 0; s < sampled.listed; ++s) {
      const size_t i = scratch.survivors_[s];
      best_with_room.Offer(z[i], i, loads[i] < bound);
    }
    if (threshold != 0 && best_with_room.index == internal::kNone) {
      for (const uint32_t i : eligible_) {
        best_with_room.Offer(z[i], i, loads[i] < bound);
      }
    } else if (threshold != 0) {
      internal::BoundUnlisted(best_with_room, threshold);
    }
    if (!internal::ClearOfRunnerUp(best_with_room)) {
      return RedecideOnGeneralPath(bounded, key, scratch);
    }
    selection = best_with_room.index;
  }
  return Decision{owner, selection, selection != owner, loads[selection],
                  capacity};
}

template <typename LoadFn>
inline PreparedCandidates::Sampled PreparedCandidates::SampleLoads(
    LoadFn& load, size_t known, uint64_t known_load,
    DecisionScratch& scratch) const {
  Sampled out;
  out.threshold = survivor_threshold_;
  uint64_t* const loads = scratch.loads_.data();
  const uint64_t* const z = scratch.hashes_.data();
  size_t* const survivors = scratch.survivors_.data();
  const auto sample = [&](uint32_t i, uint64_t sampled) {
    loads[i] = sampled;
    out.overflow |=
        __builtin_add_overflow(out.total_load, sampled, &out.total_load);
    survivors[out.listed] = i;
    out.listed += z[i] >= out.threshold;
  };
  // The loop is split around `known` rather than testing every index
  // against it; its position is its index when every candidate is
  // eligible, else a binary search finds it (eligible_ is ascending).
  const uint32_t* e = eligible_.data();
  const uint32_t* const end = e + eligible_.size();
  const uint32_t* skip = end;
  if (known != internal::kNone) {
    const bool every_candidate_eligible =
        eligible_.size() == candidates_.size();
    skip = every_candidate_eligible
               ? e + known
               : std::lower_bound(e, end, static_cast<uint32_t>(known));
  }
  for (; e != skip; ++e) sample(*e, static_cast<uint64_t>(load(size_t{*e})));
  if (e != end) sample(*e++, known_load);
  for (; e != end; ++e) sample(*e, static_cast<uint64_t>(load(size_t{*e})));
  return out;
}

// Route with two weights: the owner first, from a pass that keeps every z
// but samples no load; an idle owner is the answer. Otherwise the others'
// loads are sampled (with the survivors) and DecideTwoWeights decides.
template <typename LoadFn>
Result<PreparedCandidates::Routed> PreparedCandidates::RouteTwoWeights(
    const BoundedLoadRendezvous& bounded, std::string_view key, LoadFn& load,
    DecisionScratch& scratch) const {
  if (!scratch.Fit(candidates_.size())) {
    return PickError::kScratchCapacityExceeded;
  }
  const KeyHash hash(key);
  const auto no_load = [](size_t) { return uint64_t{0}; };
  internal::PassState pass =
      TwoWeightPass<Keep::kZ>(hash.state(), no_load, &scratch);
  const size_t owner = OwnerOfTwoWeights(pass);
  uint64_t owner_load = 0;
  if (owner != internal::kNone) {
    owner_load = static_cast<uint64_t>(load(owner));
    if (owner_load == 0) return Routed{owner, owner, false, false};
  }
  const Sampled sampled = SampleLoads(load, owner, owner_load, scratch);
  pass.total_load = sampled.total_load;
  pass.load_overflow = sampled.overflow;
  return RoutedFrom(DecideTwoWeights(bounded, hash, pass, scratch, owner,
                                     sampled.listed,
                                     /*with_capacity=*/false));
}

// The general pass for two weights, as RunPass builds it: each candidate is
// offered to both weights' LargestZ and taken by its own (a refused offer
// leaves a LargestZ exactly as it was), so both stay in registers and there
// is no branch on the weight. It may also keep every z, and sample each
// eligible load once, into `scratch` (sized by the caller).
template <PreparedCandidates::Keep kKeep, typename LoadFn>
inline internal::PassState PreparedCandidates::TwoWeightPass(
    uint64_t key_state, LoadFn& load, DecisionScratch* scratch) const {
  constexpr bool kBounded = kKeep == Keep::kZAndLoads;
  internal::LargestZ first = internal::LargestZ::Empty();
  internal::LargestZ second = internal::LargestZ::Empty();
  uint64_t total_load = 0;
  bool overflow = false;
  uint64_t* const kept_z =
      kKeep != Keep::kNothing ? scratch->hashes_.data() : nullptr;
  uint64_t* const kept_loads = kBounded ? scratch->loads_.data() : nullptr;
  const IdentityTable::KeyRow row = table_->ForKey(key_state);
  const size_t m = eligible_.size();
  for (size_t e = 0; e < m; ++e) {
    const uint32_t i = eligible_[e];
    const uint64_t z = row.Mixed(i);
    if constexpr (kKeep != Keep::kNothing) kept_z[i] = z;
    if constexpr (kBounded) {
      const auto sampled = static_cast<uint64_t>(load(size_t{i}));
      kept_loads[i] = sampled;
      overflow |= __builtin_add_overflow(total_load, sampled, &total_load);
    }
    const bool is_second = has_second_[i] != 0;
    first.Offer(z, i, !is_second);
    second.Offer(z, i, is_second);
  }
  internal::PassState pass;
  pass.groups[0] =
      internal::WeightGroup{first_weight_, first, internal::LargestZ::Empty()};
  pass.groups[1] = internal::WeightGroup{second_weight_, second,
                                         internal::LargestZ::Empty()};
  pass.group_count = 2;
  pass.total_load = total_load;
  pass.load_overflow = overflow;
  // Below 2^32 candidates of weight below 2^32: no wrap.
  pass.total_weight = uint64_t{first_weight_} * first.count +
                      uint64_t{second_weight_} * second.count;
  return pass;
}

// RouteWithTotal's walk: the key's order after a full owner, one candidate
// at a time. The eligible candidates are listed in survivor levels (z at
// least a threshold that about kSurvivorQuota of them reach, then 4 times
// as many, ..., down to threshold 0: everyone). Each weight's next
// candidate is its largest z not visited yet: within one weight that is the
// key's order where that z is separated from the next one's
// (score_bounds.h). With two weights the better of the two by their scores
// goes first (FirstIsBetter), and a weight with no listed candidate left
// drops out of a comparison only when the other's candidate is certified
// ahead of every z below the threshold; otherwise the next level is listed.
struct PreparedCandidates::Walk {
  internal::RoomTest room[2];  // load < bound(T) for each weight
  uint32_t weights[2];
  size_t groups;  // 1 or 2 weights
  size_t owner;
  uint64_t threshold;  // the listed are the eligible with z >= threshold
  size_t quota;        // the survivor quota of that threshold
  // scratch.survivors_ holds the visited in [0, visited) (the owner first)
  // and the listed ones not visited yet in [visited, listed).
  size_t visited;
  size_t listed;
  // After the first few steps the unvisited are kept sorted (descending z,
  // then index), so that a long walk (a mostly saturated list) costs a sort
  // per level rather than a scan per step.
  size_t steps;
  bool sorted;
};

// Where in the walk's list the next candidate in the key's order is, and its
// weight's group; position kNone: every candidate was visited, or the
// general search must order what the walk cannot (a near-tie of z within a
// weight).
struct PreparedCandidates::WalkStep {
  size_t position;
  size_t group;
};

template <typename LoadFn>
inline Result<PreparedCandidates::Routed> PreparedCandidates::RouteWithTotal(
    const BoundedLoadRendezvous& bounded, std::string_view key,
    uint64_t total_load, LoadFn&& load, DecisionScratch& scratch) const {
  if (path_ == Path::kGeneral) {
    return RouteWithTotalOnGeneralPath(bounded, key, total_load, load, scratch);
  }
  if (total_load == UINT64_MAX) return PickError::kLoadOverflow;  // T + 1
  size_t owner = internal::kNone;
  uint32_t owner_weight = weight_;
  if (path_ == Path::kOneWeight) {
    internal::LargestZ largest;
    if (!FindLargestZIntoScratch(key, scratch, largest)) {
      return PickError::kScratchCapacityExceeded;
    }
    if (internal::ClearOfRunnerUp(largest)) owner = largest.index;
  } else {
    if (!scratch.Fit(candidates_.size())) {
      return PickError::kScratchCapacityExceeded;
    }
    const auto no_load = [](size_t) { return uint64_t{0}; };
    const internal::PassState pass =
        TwoWeightPass<Keep::kZ>(KeyHash(key).state(), no_load, &scratch);
    owner = OwnerOfTwoWeights(pass);
    if (owner != internal::kNone) {
      owner_weight = has_second_[owner] != 0 ? second_weight_ : first_weight_;
    }
  }
  if (owner == internal::kNone) {  // a near-tie for the owner
    return RouteWithTotalOnGeneralPath(bounded, key, total_load, load, scratch);
  }
  const auto owner_load = static_cast<uint64_t>(load(owner));
  // load < ceil(f (T + 1) w / (100 W)) without the division: 100 W < 2^64
  // on the short paths, so the products fit in 128 bits.
  const internal::RoomTest owner_room{UInt128{bounded.factor_percent()} *
                                          (UInt128{total_load} + 1) *
                                          owner_weight,
                                      uint64_t{100} * total_weight_};
  if (owner_room(owner_load)) return Routed{owner, owner, false, false};
  return WalkToRoom(bounded, key, total_load, owner, owner_load, load, scratch);
}

// A full owner: the walk, reading each visited candidate's load into the
// scratch, up to the first with room.
template <typename LoadFn>
Result<PreparedCandidates::Routed> PreparedCandidates::WalkToRoom(
    const BoundedLoadRendezvous& bounded, std::string_view key,
    uint64_t total_load, size_t owner, uint64_t owner_load, LoadFn& load,
    DecisionScratch& scratch) const {
  uint64_t* const loads = scratch.loads_.data();
  size_t* const list = scratch.survivors_.data();
  loads[owner] = owner_load;
  Walk walk = StartWalk(bounded.factor_percent(), total_load, owner, scratch);
  const uint64_t* const z = scratch.hashes_.data();
  for (;;) {
    // One weight, sorted: the key's order is the list's as long as each z
    // is separated from the next (the last listed one: from every z below
    // the threshold). Anything else NextInKeyOrder settles.
    while (walk.sorted && walk.groups == 1 && walk.visited < walk.listed) {
      const size_t p = walk.visited;
      const size_t i = list[p];
      const bool last = p + 1 == walk.listed;
      if (z[i] == 0 ||
          (last ? walk.threshold != 0 &&
                      !internal::Separated(z[i], walk.threshold - 1)
                : !internal::Separated(z[i], z[list[p + 1]]))) {
        break;
      }
      const auto l = static_cast<uint64_t>(load(size_t{i}));
      loads[i] = l;
      if (walk.room[0](l)) return Routed{owner, i, true, false};
      ++walk.visited;
    }
    const WalkStep step = NextInKeyOrder(walk, scratch);
    if (step.position == internal::kNone) break;
    const size_t i = list[step.position];
    const auto l = static_cast<uint64_t>(load(size_t{i}));
    loads[i] = l;
    if (walk.room[step.group](l)) return Routed{owner, i, true, false};
    // Into the visited: a swap, or once sorted a rotation that keeps the
    // order of the others (a few of the other weight lie in between).
    if (walk.sorted) {
      std::rotate(list + walk.visited, list + step.position,
                  list + step.position + 1);
    } else {
      std::swap(list[step.position], list[walk.visited]);
    }
    ++walk.visited;
  }
  // Every load has been read (a stale total: the general search finds no
  // room either and answers as Decide), or the general search orders the
  // near-tie, after reading the loads not read yet.
  const size_t unvisited = ListUnvisited(walk, scratch);
  for (size_t s = walk.visited; s < walk.visited + unvisited; ++s) {
    loads[list[s]] = static_cast<uint64_t>(load(size_t{list[s]}));
  }
  const auto read_back = [loads](size_t i) { return loads[i]; };
  return RouteWithTotalOnGeneralPath(bounded, key, total_load, read_back,
                                     scratch);
}

// The general search with every bound from `total_load` (every eligible
// load read once), or, for a stale total, Decide's.
template <typename LoadFn>
Result<PreparedCandidates::Routed>
PreparedCandidates::RouteWithTotalOnGeneralPath(
    const BoundedLoadRendezvous& bounded, std::string_view key,
    uint64_t total_load, LoadFn& load, DecisionScratch& scratch) const {
  if (table_->size() != candidates_.size()) return PickError::kTableMismatch;
  bool sampled = false;
  const Result<Decision> d = bounded.DecideWith(
      key, candidates_, table_.get(), load, scratch, &total_load, &sampled);
  return RoutedFrom(d, sampled);
}

// Not one weight: the general path, or for two weights TwoWeightPass and
// DecideTwoWeights. Out of line, so that the one-weight path's code stays a
// few contiguous cache lines.
template <typename LoadFn>
Result<Decision> PreparedCandidates::DecideTwoWeightsOrGeneral(
    const BoundedLoadRendezvous& bounded, std::string_view key, LoadFn& load,
    DecisionScratch& scratch) const {
  if (path_ == Path::kGeneral) {
    return bounded.Decide(key, candidates_, *table_, load, scratch);
  }
  if (!scratch.Fit(candidates_.size())) {
    return PickError::kScratchCapacityExceeded;
  }
  const KeyHash hash(key);
  internal::PassState pass =
      TwoWeightPass<Keep::kZAndLoads>(hash.state(), load, &scratch);
  return DecideTwoWeights(bounded, hash, pass, scratch, OwnerOfTwoWeights(pass),
                          internal::kNone,
                          /*with_capacity=*/true);
}

}  // namespace poise

#endif  // POISE_INTERNAL_PREPARED_PATHS_H_
