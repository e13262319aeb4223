#include "key_order_walk.h"

#include <algorithm>

#include "candidate_hash.h"
#include "score_bounds.h"
#include "scratch_access.h"
#include "two_weight_path.h"

namespace poise::internal {
namespace {

// Descending z, then ascending index (equal z: a tie the walk hands over).
void SortByZ(const uint64_t* z, size_t* begin, size_t* end) {
  std::sort(begin, end, [z](size_t a, size_t b) {
    return z[a] != z[b] ? z[a] > z[b] : a < b;
  });
}

// Appends to the walk's list the eligible candidates but the owner whose z
// lies in [walk.threshold, ceiling) (the first level, ceiling 0: z >=
// walk.threshold). Branch-free: which candidates are kept is random, and as
// branches they would mispredict. The list has room for every candidate and
// one more (DecisionScratch::Fit): the owner is already in it, and may be
// written once more before it is dropped.
void AppendSurvivorLevel(const PreparedList& list, Walk& walk,
                         DecisionScratch& scratch, uint64_t ceiling,
                         bool marked = false) {
  const uint64_t* const z = ScratchAccess::Hashes(scratch);
  size_t* const order = ScratchAccess::List(scratch);
  const size_t begin = walk.listed;
  size_t listed = walk.listed;
  if (walk.threshold == 0 && ceiling == 0) {  // a short list: everyone
    for (const uint32_t i : list.eligible) {
      order[listed] = i;
      listed += i != walk.owner;
    }
    walk.listed = listed;
    return;
  }
  // z - threshold < span: z in [threshold, ceiling), with z below the
  // threshold wrapping past the span (ceiling 0 stands for 2^64).
  const uint64_t span = ceiling - walk.threshold;
  // The first level as the hashing pass marked it; else a vector of z per
  // compare, every slot read (an ineligible one's z may be anything). The
  // ineligible and the owner are dropped below.
  if (marked) {
    const uint64_t* const marks = ScratchAccess::Marks(scratch);
    for (size_t w = 0; w * 64 < list.candidates.size(); ++w) {
      listed = AppendSetBits(marks[w], w * 64, order, listed);
    }
  } else {
    listed += ListZInRange(z, list.candidates.size(), walk.threshold, span,
                           order + listed);
  }
  const bool all_eligible = list.every_candidate_eligible();
  size_t kept = begin;
  for (size_t s = begin; s < listed; ++s) {
    const size_t i = order[s];
    order[kept] = i;
    kept +=
        (all_eligible || list.candidates[i].IsEligible()) & (i != walk.owner);
  }
  walk.listed = kept;
  if (walk.sorted) SortByZ(z, order + begin, order + kept);
}

// Whether a weight's next candidate to visit comes first among its weight's
// unvisited: kClear when its z is separated from the next listed one's, and
// from every unlisted z (below the threshold); kTied when a listed one comes
// near it (the general search orders them); kUnsettled when only the
// unlisted might (the next level is listed).
enum class HeadOrder : uint8_t { kNone, kClear, kTied, kUnsettled };

HeadOrder OrderOf(const LargestZ& l, uint64_t threshold) {
  if (l.count == 0) return HeadOrder::kNone;
  // Every z taken was 0 (LargestZ leaves no index): a tie.
  if (l.index == kNone) return HeadOrder::kTied;
  if (l.count > 1 && !Separated(l.z, l.runner_up)) return HeadOrder::kTied;
  if (threshold != 0 && !Separated(l.z, threshold - 1)) {
    return HeadOrder::kUnsettled;
  }
  return HeadOrder::kClear;
}

// Each group's LargestZ of list[begin..end)'s z, by position in the list
// (group_of(i): 0 or 1; best[1] stays empty when every candidate is in group
// 0), without LargestZ::Offer's branch on a new leader: the walk scans the
// same few candidates again at every step, where a new leader is as likely
// as not, so that branch would mispredict. Two passes instead: the largest
// z, then its position, how many have it (two: a tie, reported as a
// runner-up equal to it) and the largest of the others.
template <typename GroupOf>
void LargestOfListed(const uint64_t* z, const size_t* list, size_t begin,
                     size_t end, GroupOf group_of, LargestZ* best) {
  uint64_t top[2] = {0, 0};
  size_t count[2] = {0, 0};
  for (size_t s = begin; s < end; ++s) {
    const size_t i = list[s];
    const bool second = group_of(i) != 0;
    count[1] += second;
    top[0] = std::max(top[0], second ? uint64_t{0} : z[i]);
    top[1] = std::max(top[1], second ? z[i] : uint64_t{0});
  }
  count[0] = end - begin - count[1];
  size_t position[2] = {kNone, kNone};
  size_t with_top[2] = {0, 0};
  uint64_t runner_up[2] = {0, 0};
  for (size_t s = begin; s < end; ++s) {
    const size_t i = list[s];
    const size_t k = group_of(i) != 0 ? 1 : 0;
    const bool is_top = z[i] == top[k];
    with_top[k] += is_top;
    position[k] = is_top ? s : position[k];
    runner_up[k] = std::max(runner_up[k], is_top ? uint64_t{0} : z[i]);
  }
  for (size_t k = 0; k < 2; ++k) {
    if (with_top[k] > 1) runner_up[k] = top[k];
    if (top[k] == 0) position[k] = kNone;  // as LargestZ: a z of 0 never leads
    best[k] = LargestZ{top[k], runner_up[k], position[k], count[k]};
  }
}

// Each weight's first unvisited entry in the sorted list (by position), with
// the next one of its weight as its runner-up, as LargestOfListed reports
// them.
void NextOfEachWeightWhenSorted(const PreparedList& list, const Walk& walk,
                                DecisionScratch& scratch, LargestZ* best) {
  const uint64_t* const z = ScratchAccess::Hashes(scratch);
  const size_t* const order = ScratchAccess::List(scratch);
  for (size_t k = 0; k < 2; ++k) {
    const auto in_group = [&](size_t s) {
      return walk.groups == 1 ? k == 0 : list.GroupOf(order[s]) == k;
    };
    size_t head = walk.visited;
    while (head < walk.listed && !in_group(head)) ++head;
    if (head == walk.listed) {
      best[k] = LargestZ::Empty();
      continue;
    }
    size_t next = head + 1;
    while (next < walk.listed && !in_group(next)) ++next;
    const bool has_next = next < walk.listed;
    best[k] = LargestZ{z[order[head]], has_next ? z[order[next]] : 0,
                       z[order[head]] != 0 ? head : kNone,
                       has_next ? size_t{2} : size_t{1}};
  }
}

// Each weight's largest z not visited, by its position in the list.
void NextOfEachWeight(const PreparedList& list, const Walk& walk,
                      DecisionScratch& scratch, LargestZ* best) {
  if (walk.sorted) {
    NextOfEachWeightWhenSorted(list, walk, scratch, best);
  } else if (walk.groups == 1) {
    LargestOfListed(
        ScratchAccess::Hashes(scratch), ScratchAccess::List(scratch),
        walk.visited, walk.listed, [](size_t) { return 0; }, best);
  } else {
    LargestOfListed(
        ScratchAccess::Hashes(scratch), ScratchAccess::List(scratch),
        walk.visited, walk.listed,
        [&list](size_t i) { return list.has_second[i]; }, best);
  }
}

// The step both weights' heads decide, if they do; position kNone with group
// 1: list the next level.
WalkStep StepFromHeads(const Walk& walk, const uint64_t* z, const size_t* order,
                       const LargestZ* best) {
  constexpr WalkStep kGeneralSearch{kNone, 0};
  constexpr WalkStep kNextLevel{kNone, 1};
  const HeadOrder head[2] = {OrderOf(best[0], walk.threshold),
                             OrderOf(best[1], walk.threshold)};
  if (head[0] == HeadOrder::kTied || head[1] == HeadOrder::kTied) {
    return kGeneralSearch;
  }
  if (walk.groups == 1 && head[0] == HeadOrder::kClear) {
    return WalkStep{best[0].index, 0};
  }
  if (head[0] == HeadOrder::kClear && head[1] == HeadOrder::kClear) {
    const size_t a = order[best[0].index], b = order[best[1].index];
    return FirstIsBetter(LargestZ{z[a], 0, a, 1}, walk.weights[0],
                         LargestZ{z[b], 0, b, 1}, walk.weights[1])
               ? WalkStep{best[0].index, 0}
               : WalkStep{best[1].index, 1};
  }
  if (walk.groups == 2 &&
      (head[0] == HeadOrder::kNone) != (head[1] == HeadOrder::kNone)) {
    // One weight has no listed candidate left: none at all at threshold 0;
    // else the other's goes first if it is clear and certified ahead of
    // every z below the threshold, as in BestEstimate.
    const size_t j = head[0] == HeadOrder::kNone ? 1 : 0;
    if (head[j] == HeadOrder::kClear &&
        (walk.threshold == 0 ||
         CertifiedAhead(ScoreBracket(best[j].z, walk.weights[j]),
                        ScoreBracket(walk.threshold - 1, walk.weights[1 - j]),
                        kScoreMargin))) {
      return WalkStep{best[j].index, j};
    }
  }
  // Nobody listed left at threshold 0: everyone was visited (stale).
  return walk.threshold == 0 ? kGeneralSearch : kNextLevel;
}

}  // namespace

Walk StartWalk(const PreparedList& list, size_t owner, DecisionScratch& scratch,
               size_t quota, bool marked) {
  Walk walk;
  walk.groups = list.path == ListPath::kTwoWeights ? 2 : 1;
  walk.weights[0] = list.weights[0];
  walk.weights[1] = list.weights[1];
  walk.owner = owner;
  walk.threshold = quota == kSurvivorQuota
                       ? list.survivor_threshold
                       : SurvivorThreshold(list.eligible.size(), quota);
  walk.quota = quota;
  ScratchAccess::List(scratch)[0] = owner;
  walk.visited = walk.listed = 1;
  walk.steps = 0;
  walk.sorted = false;
  AppendSurvivorLevel(list, walk, scratch, /*ceiling=*/0,
                      marked && walk.threshold == list.survivor_threshold);
  return walk;
}

WalkStep NextInKeyOrder(const PreparedList& list, Walk& walk,
                        DecisionScratch& scratch) {
  size_t* const order = ScratchAccess::List(scratch);
  // A third step: from here on the unvisited stay sorted.
  if (++walk.steps == 3 && !walk.sorted) {
    SortByZ(ScratchAccess::Hashes(scratch), order + walk.visited,
            order + walk.listed);
    walk.sorted = true;
  }
  for (;;) {
    LargestZ best[2];
    NextOfEachWeight(list, walk, scratch, best);
    const WalkStep step =
        StepFromHeads(walk, ScratchAccess::Hashes(scratch), order, best);
    if (step.position != kNone || step.group == 0) return step;
    const uint64_t ceiling = walk.threshold;
    walk.quota *= 4;
    walk.threshold = SurvivorThreshold(list.eligible.size(), walk.quota);
    AppendSurvivorLevel(list, walk, scratch, ceiling);
  }
}

}  // namespace poise::internal
