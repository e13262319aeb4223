// The walk along a key's order after a full owner (the bounded route's slow
// step): the eligible candidates are listed in survivor levels (z at least a
// threshold that about kSurvivorQuota of them reach, then four times as
// many, ..., down to threshold 0: everyone), and each weight's next
// candidate is its largest z not visited yet. Within one weight that is the
// key's order wherever that z is separated from the next one
// (score_bounds.h). With two weights the better of the two by their scores
// goes first (FirstIsBetter), and a weight with no listed candidate left
// drops out of a comparison only when the other's candidate is certified
// ahead of every z below the threshold; otherwise the next level is listed.
// The walk reads the load of each candidate it visits, once, and stops at
// the first with room. Private to src/core.
#ifndef POISE_SRC_CORE_KEY_ORDER_WALK_H_
#define POISE_SRC_CORE_KEY_ORDER_WALK_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "largest_z.h"
#include "poise/bound.h"
#include "poise/types.h"
#include "prepared_list.h"

namespace poise::internal {

struct Walk {
  Bound bounds[2];  // each weight's bound
  uint32_t weights[2];
  size_t groups;  // 1 or 2 weights
  size_t owner;
  uint64_t threshold;  // the listed are the eligible with z >= threshold
  size_t quota;        // the survivor quota of that threshold
  // scratch.list() holds the visited in [0, visited) (the owner first) and
  // the listed ones not visited yet in [visited, listed).
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
struct WalkStep {
  size_t position;
  size_t group;
};

// The walk's first level after the full `owner` (its first visited), every
// bound counting `total_load` calls: the eligible whose z about `quota` of
// them reach. scratch.hashes() holds every eligible z.
Walk StartWalk(const PreparedList& list, uint32_t factor_percent,
               uint64_t total_load, size_t owner, DecisionScratch& scratch,
               size_t quota = kSurvivorQuota);

// The next candidate in the key's order, listing further levels as needed.
WalkStep NextInKeyOrder(const PreparedList& list, Walk& walk,
                        DecisionScratch& scratch);

// Lists the eligible candidates the walk did not visit after its visited;
// returns how many.
size_t ListUnvisited(const PreparedList& list, const Walk& walk,
                     DecisionScratch& scratch);

// Moves the candidate at `position` of the walk's list (a NextInKeyOrder
// step) into the visited: a swap, or once sorted a rotation that keeps the
// order of the others (a few of the other weight lie in between).
inline void MarkVisited(Walk& walk, size_t position, size_t* order) {
  if (walk.sorted) {
    std::rotate(order + walk.visited, order + position, order + position + 1);
  } else {
    std::swap(order[position], order[walk.visited]);
  }
  ++walk.visited;
}

// One weight, sorted: the key's order is the list's while each z is
// separated from the next one (the last listed: from every z below the
// threshold). Visits those (the walk's first `walk_visits` after the owner
// at most), reading their loads into the scratch; returns the first with
// room, or kNone when NextInKeyOrder must settle the next.
template <typename Reader>
size_t VisitSortedRun(Walk& walk, const Reader& load, size_t walk_visits,
                      DecisionScratch& scratch) {
  const uint64_t* const z = scratch.hashes();
  const size_t* const list = scratch.list();
  uint64_t* const loads = scratch.loads();
  while (walk.sorted && walk.groups == 1 && walk.visited < walk.listed &&
         walk.visited <= walk_visits) {
    const size_t p = walk.visited;
    const size_t i = list[p];
    const bool last = p + 1 == walk.listed;
    const bool separated =
        last ? walk.threshold == 0 || Separated(z[i], walk.threshold - 1)
             : Separated(z[i], z[list[p + 1]]);
    if (z[i] == 0 || !separated) break;
    loads[i] = load(i);
    if (walk.bounds[0].HasRoom(loads[i])) return i;
    ++walk.visited;
  }
  return kNone;
}

// The first candidate with room in the key's order from every eligible
// load (in the scratch): each weight's largest z among those with room,
// when clear of the next one with room (score_bounds.h: within a weight the
// key's order is the order of z there), and with two weights the better of
// the two (FirstIsBetter); a weight with nobody with room drops out. kNone
// when nobody has room (a stale total) or the z do not settle it (the
// general search decides).
size_t FirstWithRoomOfAll(const PreparedList& list, const Walk& walk,
                          DecisionScratch& scratch);

// How many candidates after the owner the walk visits, at most, before it
// reads every eligible load and takes FirstWithRoomOfAll. Below 512
// eligible candidates none: reading every load and one pass over them costs
// less than a walk on a mostly saturated list (at 90 % full, even one step
// of the walk and then every load cost more), and no more than a short walk
// at half saturation. From 512 on, a walk past n / 32 candidates is on a
// mostly saturated list, where every load read in one pass still costs
// less than listing further survivor levels (bench/core_bench.cc,
// BM_PairedSaturated; docs/performance.md).
inline size_t WalkVisitsBeforeReadingAll(size_t eligible) {
  return eligible < 512 ? 0 : eligible / 32;
}

// The first candidate with room in the key's order after the full `owner`
// (whose load was `owner_load`), reading each load at most once into the
// scratch: along the key's order for up to `walk_visits` candidates, then
// every load not read yet (FirstWithRoomOfAll). kNone when the general
// search must answer: every eligible load is in scratch.loads() then. Out of
// line: the idle owner's path stays a few contiguous cache lines.
template <typename Reader>
[[gnu::noinline]] size_t WalkToRoom(const PreparedList& list,
                                    uint32_t factor_percent,
                                    uint64_t total_load, size_t owner,
                                    uint64_t owner_load, const Reader& load,
                                    size_t walk_visits,
                                    DecisionScratch& scratch) {
  uint64_t* const loads = scratch.loads();
  size_t* const order = scratch.list();
  loads[owner] = owner_load;
  Walk walk = StartWalk(list, factor_percent, total_load, owner, scratch);
  for (;;) {
    if (walk.visited > walk_visits) break;  // the owner is the first visited
    const size_t found = VisitSortedRun(walk, load, walk_visits, scratch);
    if (found != kNone) return found;
    const WalkStep step = NextInKeyOrder(list, walk, scratch);
    if (step.position == kNone) break;
    const size_t i = order[step.position];
    loads[i] = load(i);
    if (walk.bounds[step.group].HasRoom(loads[i])) return i;
    MarkVisited(walk, step.position, order);
  }
  const size_t unvisited = ListUnvisited(list, walk, scratch);
  for (size_t s = walk.visited; s < walk.visited + unvisited; ++s) {
    loads[order[s]] = load(order[s]);
  }
  return FirstWithRoomOfAll(list, walk, scratch);
}

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_KEY_ORDER_WALK_H_
