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
// It reads no load: the walk of key_order.h asks for them. Private to
// src/core.
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
#include "scratch_access.h"

namespace poise::internal {

struct Walk {
  uint32_t weights[2];
  size_t groups;  // 1 or 2 weights
  size_t owner;
  uint64_t threshold;  // the listed are the eligible with z >= threshold
  size_t quota;        // the survivor quota of that threshold
  // ScratchAccess::List(scratch) holds the visited in [0, visited) (the owner
  // first) and the listed ones not visited yet in [visited, listed).
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

// The walk's first level after the `owner` (its first visited): the
// eligible whose z about `quota` of them reach. ScratchAccess::Hashes(scratch)
// holds every eligible z; with `marked`, ScratchAccess::Marks(scratch) has
// the bit of every candidate whose z reaches list.survivor_threshold (the
// hashing pass set them; quota is kSurvivorQuota).
Walk StartWalk(const PreparedList& list, size_t owner, DecisionScratch& scratch,
               size_t quota = kSurvivorQuota, bool marked = false);

// The next candidate in the key's order, listing further levels as needed.
WalkStep NextInKeyOrder(const PreparedList& list, Walk& walk,
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

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_KEY_ORDER_WALK_H_
