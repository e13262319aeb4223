// The one walk of a bounded pick: a key's order over a prepared list, found
// from one hashing pass (or read from a known prefix of it), and along it the
// first, or the k-th, candidate whose load is below its Bound. Every bounded
// decision of PreparedCandidates runs it; the router gives it the loads to
// compare (a load view) and nothing else. Private to src/core and the router.
//
// The order, KeyOrder:
//  - one or two weights: the owner from the kernels' pass, then the survivor
//    levels of key_order_walk.h (each step certified by the z alone);
//  - three or more weights: the owner from the same pass grouped by weight
//    (the general owner search), z kept;
//  - where neither settles the next step (a near-tie of z, or any step past
//    the owner on the general path): the rest of the order is sorted once
//    from the z already computed (approximate scores, the exact ones only
//    where two are within the error margin, score_bounds.h).
// No path hashes a key twice.
#ifndef POISE_SRC_CORE_KEY_ORDER_H_
#define POISE_SRC_CORE_KEY_ORDER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "key_order_walk.h"
#include "largest_z.h"
#include "poise/bound.h"
#include "poise/rendezvous.h"
#include "poise/types.h"
#include "prepared_list.h"
#include "room_search.h"
#include "scratch_access.h"

namespace poise::internal {

class KeyOrder final {
 public:
  // The key's order over `list`'s eligible candidates, every eligible z in
  // ScratchAccess::Hashes(scratch). The errors of a bounded decision, in
  // poise-core's order: kTableMismatch, kEmpty, kNoEligibleCandidates,
  // kScratchCapacityExceeded, kWeightOverflow.
  // `walk_quota`: about how many the walk's first survivor level lists.
  static Result<KeyOrder> Hashed(const PreparedList& list, std::string_view key,
                                 DecisionScratch& scratch,
                                 size_t walk_quota = kSurvivorQuota);

  // Where a walk along the order is expected to stop. kPastOwner (a
  // retry's k-th choice): the hashing pass also marks the walk's first
  // survivor level (one vector compare each), which spares the walk a
  // second pass over every z but costs a pick that stops at its owner.
  enum class Stop : uint8_t { kAtOwner, kPastOwner };

  // The same order, hashed by its first Next() rather than here (so that it
  // is built in place, with no Result to copy), and read first from
  // `prefix[0..size)` where given: a prefix of the key's order over every
  // candidate of the list (eligible or not; the ineligible are skipped).
  // It hashes only when a walk goes past the prefix; an error of Hashed
  // then ends the order (error()).
  static KeyOrder Of(const PreparedList& list, std::string_view key,
                     Stop stop = Stop::kAtOwner,
                     const uint16_t* prefix = nullptr, size_t size = 0) {
    KeyOrder order(list, key);
    order.stop_ = stop;
    order.mode_ = Mode::kPrefix;
    order.prefix_ = prefix;
    order.prefix_size_ = size;
    return order;
  }

  // The next eligible candidate in the key's order, the owner first; kNone
  // after the last (or on an error, error()).
  size_t Next(DecisionScratch& scratch);

  // How many Next() returned, and the j-th of them (j < yielded()).
  size_t yielded() const { return yielded_; }
  size_t Yielded(size_t j, DecisionScratch& scratch) const;

  // Whether every candidate returned so far came from the prefix.
  bool from_prefix() const { return mode_ == Mode::kPrefix; }
  // Whether every candidate returned so far was ordered by its z alone (a
  // short path's walk), not by scores.
  bool certified_by_z() const { return !ranked_; }
  std::optional<PickError> error() const { return error_; }
  const PreparedList& list() const { return *list_; }

 private:
  enum class Mode : uint8_t { kPrefix, kOwner, kWalk, kRanked, kEnd };
  KeyOrder(const PreparedList& list, std::string_view key)
      : list_(&list), key_(key) {}
  // The owner and every z, by the list's path.
  std::optional<PickError> Hash(DecisionScratch& scratch);
  // Next() once the order is hashed.
  size_t NextHashed(DecisionScratch& scratch);
  // From here on, the rest of the order from the z in the scratch.
  void SortTheRest(DecisionScratch& scratch);

  const PreparedList* list_;
  std::string_view key_;
  Mode mode_ = Mode::kOwner;
  std::optional<PickError> error_;
  size_t owner_ = kNone;
  size_t yielded_ = 0;
  // kPrefix: the prefix and where in it.
  const uint16_t* prefix_ = nullptr;
  size_t prefix_size_ = 0;
  size_t prefix_at_ = 0;
  size_t walk_quota_ = kSurvivorQuota;
  size_t hashed_yielded_ = 0;  // of the hashed order, passed over or not
  // kWalk: the survivor-level walk (ScratchAccess::List(scratch) holds its
  // visited).
  Walk walk_{};
  bool walk_started_ = false;
  Stop stop_ = Stop::kAtOwner;
  // The hashing pass marked the walk's first survivor level
  // (ScratchAccess::Marks).
  bool marked_ = false;
  // kRanked: the whole order, this thread's (key_order.cc), read at
  // ranked_at_; ranked_: the visited are there.
  size_t ranked_at_ = 0;
  bool ranked_ = false;
};

// Bound::Capacity, saturated at 2^64 - 1.
inline uint64_t SaturatedCapacityOf(const Bound& bound) {
  const UInt128 c = bound.Capacity();
  return c > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(c);
}

// Where a walk stopped.
struct Walked {
  size_t owner;
  size_t selection;
  // No candidate had room under the given total (below the loads read):
  // the bounds came from the loads' sum instead.
  bool stale_total;
  // The selection's bound among the bounds that chose it: a slot holds it
  // with HasRoom, no division; capacity() only where a pick reports it.
  Bound bound;
  uint64_t capacity() const { return SaturatedCapacityOf(bound); }
};

// The bounds of one walk: f, the given total and W, with one Bound per
// weight met (the short paths have at most two; the last one is kept).
class WalkBounds final {
 public:
  WalkBounds(uint32_t factor_percent, uint64_t total_load,
             uint64_t total_weight)
      : factor_(factor_percent),
        total_(total_load),
        weight_sum_(total_weight) {}
  const Bound& For(uint32_t weight) {
    if (weight != cached_weight_) {
      cached_ = Bound(factor_, total_, weight, weight_sum_);
      cached_weight_ = weight;
    }
    return cached_;
  }

 private:
  uint32_t factor_;
  uint64_t total_;
  uint64_t weight_sum_;
  uint32_t cached_weight_ = 0;  // a weight of 0 is never eligible
  Bound cached_;
};

// W of the list's eligible candidates (the short paths keep it).
uint64_t EligibleWeightOf(const PreparedList& list);

// A load view, what a walk compares: `uint64_t Load(size_t i)` reads
// candidate i's load (under serverLoad an ask), and `bool Admits(size_t i)`
// says whether i may be chosen at all (the hard limit); a candidate it
// does not admit counts as full.
//
// The walk along a key's order for the candidates with room, every bound
// counting `total_load` calls (< 2^64 - 1). Each NextWithRoom continues from
// the last candidate it returned: a slot lost to another thread goes on
// along the same order, hashed once.
class RoomWalk final {
 public:
  // Every bound ceil(f (total_load + 1) w / (100 total_weight)): W the
  // eligible weights' (EligibleWeightOf), or a subset's (a zone's, the
  // router's P8, whose view's Admits leaves out the others).
  RoomWalk(KeyOrder& order, uint32_t factor_percent, uint64_t total_load,
           uint64_t total_weight)
      : order_(&order), bounds_(factor_percent, total_load, total_weight) {}

  // The next candidate with room after the last returned (the first: from
  // the owner), its load read into the scratch's loads; kNone at the end of
  // the order, or on its error.
  template <typename View>
  size_t NextWithRoom(View& view, DecisionScratch& scratch) {
    const std::vector<Candidate>& candidates = order_->list().candidates;
    for (;;) {
      const size_t i = order_->Next(scratch);
      if (i == kNone) return kNone;
      if (owner_ == kNone) owner_ = i;
      // After Next: an order's first step hashes, and may grow the scratch.
      uint64_t& load = ScratchAccess::Loads(scratch)[i];
      load = view.Load(i);
      if (bounds_.For(candidates[i].weight).HasRoom(load) && view.Admits(i)) {
        return i;
      }
    }
  }

  size_t owner() const { return owner_; }
  const Bound& BoundOf(size_t i) {
    return bounds_.For(order_->list().candidates[i].weight);
  }
  uint64_t SaturatedCapacity(size_t i) {
    return SaturatedCapacityOf(BoundOf(i));
  }

 private:
  KeyOrder* order_;
  WalkBounds bounds_;
  size_t owner_ = kNone;
};

// This thread's list of the candidates a walk found with room, each asked
// once: a view's Admits may read counts that other threads change (the
// router's hard limit), so a second ask could find none of those the first
// admitted. Each user clears it first.
std::vector<size_t>& WithRoomList();

// The stale total's answer: every eligible load read into the scratch's
// loads (`order` walked to its end), the bounds from their sum, the
// (nth mod m + 1)-th of the m with room that `admits` allows. Errors as
// the contract's K8 on those loads; kNoEligibleCandidates when none is
// admitted.
template <typename View>
Result<Walked> NthWithRoomOfTheLoadsSum(const KeyOrder& order,
                                        uint32_t factor_percent, View& view,
                                        size_t nth, DecisionScratch& scratch);

// The (nth mod m + 1)-th of the m candidates with room along `order`
// (nth = 0: the first), every bound ceil(f (total_load + 1) w /
// (100 total_weight)) (RoomWalk). It stops at the candidate asked for: only
// a k-th beyond the number with room, or a stale total (nobody with room:
// then the bounds of the sum of every eligible load and weight,
// NthWithRoomOfTheLoadsSum), walks the whole order. Errors: the order's,
// then kLoadOverflow for a total of 2^64 - 1, then the stale total's.
template <typename View>
Result<Walked> WalkToNthWithRoom(KeyOrder& order, uint32_t factor_percent,
                                 uint64_t total_load, uint64_t total_weight,
                                 View& view, size_t nth,
                                 DecisionScratch& scratch) {
  if (total_load == UINT64_MAX) {  // T + 1: after the order's errors
    if (order.Next(scratch) == kNone && order.error().has_value()) {
      return *order.error();
    }
    return PickError::kLoadOverflow;
  }
  RoomWalk walk(order, factor_percent, total_load, total_weight);
  if (nth == 0) {
    const size_t i = walk.NextWithRoom(view, scratch);
    if (i != kNone) {
      return Walked{walk.owner(), i, false, walk.BoundOf(i)};
    }
  } else {
    // A retry's k-th. For a k past the number with room, the walk has gone
    // through the whole order: the k-th wraps around those it found.
    std::vector<size_t>& with_room = WithRoomList();
    with_room.clear();
    for (;;) {
      const size_t i = walk.NextWithRoom(view, scratch);
      if (i == kNone) break;
      if (with_room.size() == nth) {
        return Walked{walk.owner(), i, false, walk.BoundOf(i)};
      }
      with_room.push_back(i);
    }
    if (!with_room.empty() && !order.error().has_value()) {
      const size_t i = with_room[nth % with_room.size()];
      return Walked{walk.owner(), i, false, walk.BoundOf(i)};
    }
  }
  if (order.error().has_value()) return *order.error();
  return NthWithRoomOfTheLoadsSum(order, factor_percent, view, nth, scratch);
}

template <typename View>
Result<Walked> NthWithRoomOfTheLoadsSum(const KeyOrder& order,
                                        uint32_t factor_percent, View& view,
                                        size_t nth, DecisionScratch& scratch) {
  const PreparedList& list = order.list();
  const uint64_t* const loads = ScratchAccess::Loads(scratch);
  const Result<Sums> sums = SumInOrder(list.candidates, loads);
  if (!sums.ok()) return sums.error();
  WalkBounds bounds(factor_percent, sums.value().total_load,
                    sums.value().total_weight);
  std::vector<size_t>& with_room = WithRoomList();  // each asked once
  with_room.clear();
  for (size_t j = 0; j < order.yielded(); ++j) {
    const size_t i = order.Yielded(j, scratch);
    if (bounds.For(list.candidates[i].weight).HasRoom(loads[i]) &&
        view.Admits(i)) {
      with_room.push_back(i);
    }
  }
  if (with_room.empty()) return PickError::kNoEligibleCandidates;
  const size_t i = with_room[nth % with_room.size()];
  return Walked{order.Yielded(0, scratch), i, true,
                bounds.For(list.candidates[i].weight)};
}

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_KEY_ORDER_H_
