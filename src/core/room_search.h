// The room search: the selection of a bounded decision, the best eligible
// candidate by the contract's order whose load is below its capacity, after
// the owner search (owner_search.h) over the same pass. Capacity depends only
// on the weight, so the selection is again the best of per-weight bests, now
// among each weight's members with room. It is found in three steps of
// growing cost:
//  1. The owner has room: it is also the best candidate with room.
//  2. Otherwise the "survivors" are listed, the candidates whose z reached a
//     threshold that about `quota` of them reach. A weight's best member with
//     room among its survivors is its best member with room overall, because
//     every other member has a smaller z (and within one weight, z decides:
//     score_bounds.h). Its runner-up is bounded by the threshold, so
//     ClearOfRunnerUp() is asked with that bound.
//  3. A weight none of whose survivors has room: its members with room all
//     have z < threshold, so none scores better than z = threshold - 1 would
//     (within the error budget E of the scores, score_bounds.h). When an
//     estimate already found is ahead of that by four margins, the weight
//     cannot win and is dropped; otherwise the next survivor level lists the
//     z in [threshold', threshold) for a four times larger quota, down to
//     threshold 0, where every member has been seen.
// Search() runs both searches; ScanAndSearch() the pass too. Private to
// src/core (and its tests).
#ifndef POISE_SRC_CORE_ROOM_SEARCH_H_
#define POISE_SRC_CORE_ROOM_SEARCH_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

#include "hash_and_group.h"
#include "largest_z.h"
#include "owner_search.h"
#include "poise/bound.h"
#include "poise/hash.h"
#include "poise/identity_table.h"
#include "poise/types.h"
#include "score_bounds.h"

namespace poise::internal {

// The eligible loads' and weights' sums as poise-core makes them: for each
// eligible candidate in index order its load is added to L (kLoadOverflow on
// a wrap), then its weight to W (kWeightOverflow); then L + 1 must not wrap
// (kLoadOverflow).
struct Sums {
  uint64_t total_load;
  uint64_t total_weight;
  // The eligible candidates' weight where they all have one; else 0.
  uint32_t one_weight;
};
inline Result<Sums> SumInOrder(const std::vector<Candidate>& candidates,
                               const uint64_t* loads) {
  Sums sums{0, 0, 0};
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!candidates[i].IsEligible()) continue;
    // W is still 0 at the first eligible (an eligible weight is not 0).
    const uint32_t w = candidates[i].weight;
    sums.one_weight = sums.total_weight == 0 || w == sums.one_weight ? w : 0;
    if (__builtin_add_overflow(sums.total_load, loads[i], &sums.total_load)) {
      return PickError::kLoadOverflow;
    }
    if (__builtin_add_overflow(sums.total_weight,
                               uint64_t{candidates[i].weight},
                               &sums.total_weight)) {
      return PickError::kWeightOverflow;
    }
  }
  if (sums.total_load == UINT64_MAX) return PickError::kLoadOverflow;
  return sums;
}

// The same checks after a bounded pass that made the sums (`loads` as it
// sampled them). Below 2^32 candidates W < 2^32 (2^32 - 1) < 2^64 cannot
// wrap, so the pass's flag answers; beyond, which sum wraps first decides, so
// they are redone in order (SumInOrder).
inline std::optional<PickError> SumsError(
    const std::vector<Candidate>& candidates, const uint64_t* loads,
    const internal::PassState& pass) {
  if (candidates.size() > UINT32_MAX) {
    const Result<Sums> sums = SumInOrder(candidates, loads);
    if (!sums.ok()) return sums.error();
  } else if (pass.load_overflow) {
    return PickError::kLoadOverflow;
  }
  if (pass.total_load == UINT64_MAX) return PickError::kLoadOverflow;
  return std::nullopt;
}

// Weights summing past 2^64 - 1, which takes 2^32 or more candidates: below
// that the pass's sum cannot wrap (kWeightOverflow, as K8 without the loads).
inline std::optional<PickError> WeightSumError(
    const std::vector<Candidate>& candidates) {
  if (candidates.size() <= UINT32_MAX) return std::nullopt;
  uint64_t total_weight = 0;
  for (const Candidate& c : candidates) {
    if (c.IsEligible() &&
        __builtin_add_overflow(total_weight, uint64_t{c.weight},
                               &total_weight)) {
      return PickError::kWeightOverflow;
    }
  }
  return std::nullopt;
}

// What the room search needs of the pass (each holds view.size() entries;
// DecisionScratch owns them).
struct RoomBuffers {
  internal::PassOutputs kept;
  size_t* survivors;  // indices whose z reached the survivor threshold
  size_t quota = internal::kSurvivorQuota;  // tests vary it
};

// Lists, branch-free, the indices i < n whose z lies in this survivor level:
// z >= threshold on the first level, else threshold <= z < ceiling (every
// index is written, and kept when its z is in range). Returns how many.
inline size_t ListSurvivorLevel(const uint64_t* z, size_t n, uint64_t threshold,
                                uint64_t ceiling, bool first_level,
                                size_t* survivors) {
  size_t listed = 0;
  if (first_level) {
    for (size_t i = 0; i < n; ++i) {
      survivors[listed] = i;
      listed += z[i] >= threshold;
    }
  } else {
    const uint64_t span = ceiling - threshold;
    for (size_t i = 0; i < n; ++i) {
      survivors[listed] = i;
      listed += z[i] - threshold < span;  // wraps for z < threshold
    }
  }
  return listed;
}

// Steps 2 and 3 above for a full owner, over a view that also provides
// load(i) and bound(w). `by_weight` holds the owner search's estimates,
// one per weight group first.
template <typename View>
class SelectionSearch {
 public:
  SelectionSearch(const WeightGroups<View>& groups,
                  const ScoreEstimate* by_weight, const RoomBuffers& buffers,
                  double margin, SearchResult& out)
      : groups_(groups),
        view_(groups.view()),
        by_weight_(by_weight),
        buffers_(buffers),
        margin_(margin),
        out_(out) {}

  // The selection, or nothing when no candidate has room.
  std::optional<Rank> Run() {
    const size_t group_count = groups_.count();
    for (size_t k = 0; k < group_count; ++k) {
      bounds_[k] = view_.bound(groups_[k].weight);
      open_[k] = k;
      is_open_[k] = true;
    }
    open_count_ = group_count;
    AddBestUngroupedWithRoom();
    size_t quota = buffers_.quota;
    uint64_t ceiling = 0;  // this level lists z in [threshold, ceiling)
    for (bool first = true; open_count_ != 0; first = false) {
      const uint64_t threshold = SurvivorThreshold(view_.size(), quota);
      OfferSurvivors(ListSurvivorLevel(buffers_.kept.z, view_.size(), threshold,
                                       ceiling, first, buffers_.survivors));
      CloseSettledWeights(threshold);
      if (open_count_ == 0) break;
      DropWeightsThatCannotWin(threshold);
      if (open_count_ != 0) ++out_.room_scans;
      ceiling = threshold;
      quota *= 4;
    }
    if (with_room_count_ == 0) return std::nullopt;
    return with_room_[BestEstimate(with_room_, with_room_count_, margin_, out_)]
        .rank;
  }

 private:
  bool HasRoom(size_t k, size_t i) const {
    return bounds_[k].HasRoom(view_.load(i));
  }

  // The weights beyond the group table: their best member with room,
  // scored exactly.
  void AddBestUngroupedWithRoom() {
    bool have = false;
    Rank best{};
    groups_.ForEachUngrouped([&](size_t i, const Rank& r) {
      if (view_.bound(r.weight).HasRoom(view_.load(i))) {
        KeepBetter(have, best, r);
      }
    });
    if (have) with_room_[with_room_count_++] = ExactEstimate(best);
  }

  // Offers each listed survivor of an open weight to that weight's best
  // with room.
  void OfferSurvivors(size_t listed) {
    const uint64_t* const z = buffers_.kept.z;
    for (size_t s = 0; s < listed; ++s) {
      const size_t i = buffers_.survivors[s];
      if (!view_.eligible(i)) continue;  // its z slot is unspecified
      const size_t k = groups_.GroupOf(view_.weight(i));
      if (k == groups_.count() || !is_open_[k]) continue;
      groups_[k].room.Offer(z[i], i, HasRoom(k, i));
    }
  }

  // Closes every open weight that some survivor with room settled (or, at
  // threshold 0, that every member was seen of), adding its estimate.
  void CloseSettledWeights(uint64_t threshold) {
    size_t still = 0;
    for (size_t o = 0; o < open_count_; ++o) {
      const size_t k = open_[o];
      LargestZ& l = groups_[k].room;
      if (l.index == kNone && threshold != 0) {
        open_[still++] = k;  // none of its survivors has room
        continue;
      }
      is_open_[k] = false;
      if (l.count == 0) continue;  // every member seen: it has no room
      if (threshold != 0) BoundUnlisted(l, threshold);
      // A weight's largest z often has room: reuse its estimate.
      with_room_[with_room_count_++] =
          l.index == by_weight_[k].rank.index
              ? by_weight_[k]
              : groups_.EstimateOf(k, l,
                                   [&](size_t i) { return HasRoom(k, i); });
    }
    open_count_ = still;
  }

  // Step 3: drops each open weight whose unlisted members (z < threshold)
  // score provably worse than an estimate already found.
  void DropWeightsThatCannotWin(uint64_t threshold) {
    double ahead = std::numeric_limits<double>::infinity();
    for (size_t c = 0; c < with_room_count_; ++c) {
      ahead = std::min(ahead, with_room_[c].Scored());
    }
    size_t still = 0;
    for (size_t o = 0; o < open_count_; ++o) {
      const size_t k = open_[o];
      if (ahead + 4 * margin_ < ApproxScore(threshold - 1, groups_[k].weight)) {
        is_open_[k] = false;  // cannot win
        continue;
      }
      open_[still++] = k;
    }
    open_count_ = still;
  }

  const WeightGroups<View>& groups_;
  const View& view_;
  const ScoreEstimate* by_weight_;
  const RoomBuffers& buffers_;
  double margin_;
  SearchResult& out_;
  Bound bounds_[kMaxGroups];
  ScoreEstimate with_room_[kMaxGroups + 1];  // the per-weight bests with room
  size_t with_room_count_ = 0;
  size_t open_[kMaxGroups];  // weights whose best with room is unknown
  bool is_open_[kMaxGroups];
  size_t open_count_ = 0;
};

// Both searches after HashAndGroup over `view`, which provides size(),
// eligible(i), weight(i), Z(i), and for kBounded bound(w) and load(i) (the
// loads the pass sampled).
template <bool kBounded, typename View>
SearchResult Search(const View& view, PassState& pass,
                    const RoomBuffers* buffers, double margin) {
  SearchResult out;
  const WeightGroups<View> groups(view, pass, out);
  ScoreEstimate by_weight[kMaxGroups + 1];
  size_t count = 0;
  const size_t owner_at = FindOwner(groups, margin, by_weight, count, out);
  if (count == 0) return out;
  out.found = true;
  const Rank& owner = by_weight[owner_at].rank;
  out.affinity = ChoiceOf(owner);
  if constexpr (kBounded) {
    // 1. The owner has room; else steps 2 and 3.
    std::optional<Rank> selection;
    if (view.bound(owner.weight).HasRoom(view.load(owner.index))) {
      selection = owner;
    } else {
      selection =
          SelectionSearch<View>(groups, by_weight, *buffers, margin, out).Run();
    }
    if (!selection) return out;
    out.found_room = true;
    out.selection = ChoiceOf(*selection);
    // The only division: the decision never needs the bound itself.
    out.selection_capacity = view.bound(selection->weight).Capacity();
  }
  return out;
}

// The pass and both searches over one view (tests, and Pick). For kBounded
// the view's load(i) is sampled once by the pass into buffers->kept.loads;
// Search reads view.load(i) again, so the view must return the same value.
template <bool kBounded, typename View>
SearchResult ScanAndSearch(const View& view,
                           const RoomBuffers* buffers = nullptr,
                           double margin = kScoreMargin) {
  PassState pass;
  HashAndGroup<kBounded>(view, kBounded ? buffers->kept : PassOutputs{}, pass);
  return Search<kBounded>(view, pass, buffers, margin);
}

// WeightedRendezvous::Pick's answer from a pass made elsewhere over the
// table's hashes (PreparedCandidates): `pass` must be what HashAndGroup<false>
// produces for (key, candidates, table); then the answers are the same.
Result<size_t> PickAfterPass(const KeyHash& key,
                             const std::vector<Candidate>& candidates,
                             const IdentityTable& table, PassState& pass);

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_ROOM_SEARCH_H_
