#include "poise/prepared_candidates.h"

#include <algorithm>
#include <utility>

#include "candidate_hash.h"
#include "room_search.h"

namespace poise {

PreparedCandidates::PreparedCandidates(
    std::vector<Candidate> candidates,
    std::shared_ptr<const IdentityTable> table)
    : candidates_(std::move(candidates)),
      table_(table != nullptr ? std::move(table)
                              : std::make_shared<const IdentityTable>()) {
  const size_t n = candidates_.size();
  if (table_->size() != n || n > UINT32_MAX) return;
  uint32_t weights[2] = {0, 0};  // in order of first appearance
  uint64_t total_weight = 0;
  has_second_.assign(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Candidate& c = candidates_[i];
    if (!c.IsEligible()) continue;
    if (weights[0] == 0) weights[0] = c.weight;
    if (c.weight != weights[0] && weights[1] == 0) weights[1] = c.weight;
    if (c.weight != weights[0] && c.weight != weights[1]) {
      eligible_.clear();  // three or more weights: the general path
      has_second_.clear();
      return;
    }
    eligible_.push_back(static_cast<uint32_t>(i));
    has_second_[i] = c.weight == weights[1] ? 1 : 0;
    total_weight += c.weight;
  }
  // No eligible candidate: the general path reports it. Weights summing
  // past 2^64 / 100 (tens of millions of heavy candidates): the general path
  // serves them, so that on the short paths 100 W fits in 64 bits and the
  // room tests need no fallback to the division.
  if (eligible_.empty() || total_weight > UINT64_MAX / 100) {
    eligible_.clear();
    has_second_.clear();
    return;
  }
  survivor_threshold_ =
      internal::SurvivorThreshold(eligible_.size(), internal::kSurvivorQuota);
  total_weight_ = total_weight;
  if (weights[1] == 0) {
    path_ = Path::kOneWeight;
    weight_ = weights[0];
    has_second_.clear();
    if (eligible_.size() != n) {
      eligible_bits_.assign((n + 7) / 8, 0);
      for (const uint32_t i : eligible_) {
        eligible_bits_[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
      }
    }
  } else {
    path_ = Path::kTwoWeights;
    first_weight_ = weights[0];
    second_weight_ = weights[1];
  }
}

// The one-weight LargestZ of the eligible candidates for `key_state`; stores
// every eligible z in `z` when given (the vector kernel stores the
// ineligible ones too).
internal::LargestZ PreparedCandidates::FindLargestZ(uint64_t key_state,
                                                    uint64_t* z) const {
  const IdentityTable::KeyRow row = table_->ForKey(key_state);
  // The vector kernel is the faster one at every n (docs/performance.md).
  if (internal::ActiveHashKernel() == internal::HashKernel::kAvx512) {
    return internal::TableLargestZAvx512(
        row, candidates_.size(),
        eligible_bits_.empty() ? nullptr : eligible_bits_.data(),
        eligible_.size(), z);
  }
  internal::LargestZ largest = internal::LargestZ::Empty();
  for (const uint32_t i : eligible_) {
    const uint64_t zi = row.Mixed(i);
    if (z != nullptr) z[i] = zi;
    largest.Offer(zi, i);
  }
  return largest;
}

Result<size_t> PreparedCandidates::Pick(std::string_view key) const {
  if (path_ == Path::kOneWeight) {
    const internal::LargestZ largest =
        FindLargestZ(KeyHash(key).state(), nullptr);
    if (internal::ClearOfRunnerUp(largest)) return largest.index;
  } else if (path_ == Path::kTwoWeights) {
    return PickTwoWeights(key);
  }
  return WeightedRendezvous::Pick(key, candidates_, *table_);
}

namespace {

// FirstIsBetter's pairs that the brackets do not settle: BestEstimate over
// the two. Out of line and cold: inlined, its estimate array and result gave
// FirstIsBetter a stack frame and saved registers on every call; now the
// bracket comparison is small enough to be inlined into its callers.
[[gnu::noinline, gnu::cold]] bool FirstIsBetterByEstimates(
    const internal::LargestZ& a, uint32_t wa, const internal::LargestZ& b,
    uint32_t wb) {
  internal::ScoreEstimate c[2] = {
      {internal::kUnscored, Rank{0, a.z, wa, a.index}, false},
      {internal::kUnscored, Rank{0, b.z, wb, b.index}, false}};
  internal::SearchResult unused;
  return internal::BestEstimate(c, 2, internal::kScoreMargin, unused) == 0;
}

}  // namespace

// The better of two LargestZ clear of their runners-up (a, of weight wa, and
// b) by the contract's order: their brackets settle it, or BestEstimate
// does.
bool PreparedCandidates::FirstIsBetter(const internal::LargestZ& a, uint32_t wa,
                                       const internal::LargestZ& b,
                                       uint32_t wb) {
  // BestEstimate's first stage, without building a contest: most pairs end
  // here.
  const internal::Bracket ba = internal::ScoreBracket(a.z, wa);
  const internal::Bracket bb = internal::ScoreBracket(b.z, wb);
  if (internal::CertifiedAhead(ba, bb, internal::kScoreMargin)) return true;
  if (internal::CertifiedAhead(bb, ba, internal::kScoreMargin)) return false;
  return FirstIsBetterByEstimates(a, wa, b, wb);
}

// Two weights: the general pass's state with both weights' LargestZ kept in
// registers (no per-candidate weight search), then OwnerOfTwoWeights, or the
// general search when one is not clear of its runner-up.
Result<size_t> PreparedCandidates::PickTwoWeights(std::string_view key) const {
  const KeyHash hash(key);
  const auto no_load = [](size_t) { return uint64_t{0}; };
  internal::PassState pass =
      TwoWeightPass<Keep::kNothing>(hash.state(), no_load, nullptr);
  const size_t owner = OwnerOfTwoWeights(pass);
  if (owner != internal::kNone) return owner;
  return internal::PickAfterPass(hash, candidates_, *table_, pass);
}

// The better of the two weights' largest z after TwoWeightPass when both are
// clear of their runners-up; kNone otherwise (the general search decides
// then).
size_t PreparedCandidates::OwnerOfTwoWeights(
    const internal::PassState& pass) const {
  const internal::LargestZ& first = pass.groups[0].all;
  const internal::LargestZ& second = pass.groups[1].all;
  if (!internal::ClearOfRunnerUp(first) || !internal::ClearOfRunnerUp(second)) {
    return internal::kNone;
  }
  return FirstIsBetter(first, first_weight_, second, second_weight_)
             ? first.index
             : second.index;
}

// The decision after a two-weight pass that kept every z and every load, as
// DecideOneWeight makes it for one weight: `owner` is OwnerOfTwoWeights(pass)
// (kNone: the general search decides); a full owner's successor is the
// better of each weight's best member with room among the survivors
// (`listed` of them in the scratch, as SampleLoads lists them; kNone: listed
// here). A weight none of whose survivors has room drops out when its
// unlisted members provably score worse. Anything else takes the general
// search. Without `with_capacity` the short paths leave selected_capacity 0.
Result<Decision> PreparedCandidates::DecideTwoWeights(
    const BoundedLoadRendezvous& bounded, const KeyHash& hash,
    internal::PassState& pass, DecisionScratch& scratch, size_t owner,
    size_t listed, bool with_capacity) const {
  const auto general = [&] {
    return bounded.DecideAfterPass(hash, candidates_, table_.get(), scratch,
                                   pass);
  };
  if (pass.load_overflow || pass.total_load == UINT64_MAX) {
    return PickError::kLoadOverflow;
  }
  if (owner == internal::kNone) return general();
  const uint32_t weights[2] = {first_weight_, second_weight_};
  const uint64_t* const loads = scratch.loads_.data();
  const uint64_t* const z = scratch.hashes_.data();
  // The eligible weights' sum, at most 2^64 / 100 (the constructor checked).
  const uint64_t total_weight = pass.total_weight;
  const uint32_t factor = bounded.factor_percent();
  // load < Capacity(w), without the division (as the general search does);
  // 100 W fits in 64 bits, so RoomTestFor's fallback is never needed here.
  const auto room_test = [&](uint32_t w) {
    return internal::RoomTest{
        UInt128{factor} * (UInt128{pass.total_load} + 1) * w,
        uint64_t{100} * total_weight};
  };
  const internal::RoomTest room[2] = {room_test(weights[0]),
                                      room_test(weights[1])};
  // The owner's decision with `selection` of weight w; its bound only when
  // asked for (it takes a division, and Route reports no bound).
  const auto decision = [&](size_t selection, uint32_t w) {
    const UInt128 capacity = with_capacity
                                 ? BoundedLoadRendezvous::Capacity(
                                       factor, pass.total_load, w, total_weight)
                                 : 0;
    return Decision{owner, selection, selection != owner, loads[selection],
                    capacity};
  };
  const size_t owner_group = owner == pass.groups[0].all.index ? 0 : 1;
  if (room[owner_group](loads[owner])) {
    return decision(owner, weights[owner_group]);
  }
  // Each weight's best member with room among the survivors (listed
  // branch-free, as the general finish lists them): within one weight z
  // alone orders the members (score_bounds.h).
  const uint64_t threshold = survivor_threshold_;
  size_t* const survivors = scratch.survivors_.data();
  if (listed == internal::kNone) {
    listed = 0;
    for (const uint32_t i : eligible_) {
      survivors[listed] = i;
      listed += z[i] >= threshold;
    }
  }
  internal::LargestZ best[2] = {internal::LargestZ::Empty(),
                                internal::LargestZ::Empty()};
  for (size_t s = 0; s < listed; ++s) {
    const size_t i = survivors[s];
    const bool is_second = has_second_[i] != 0;
    const bool has_room = room[is_second ? 1 : 0](loads[i]);
    best[0].Offer(z[i], i, !is_second && has_room);
    best[1].Offer(z[i], i, is_second && has_room);
  }
  bool contends[2] = {true, true};
  for (size_t k = 0; k < 2; ++k) {
    internal::LargestZ& l = best[k];
    if (threshold == 0) {  // every member was listed
      contends[k] = l.count != 0;
    } else if (l.index != internal::kNone) {
      internal::BoundUnlisted(l, threshold);
    } else {
      contends[k] = false;  // unless it might beat the other's best, below
    }
    if (contends[k] && !internal::ClearOfRunnerUp(l)) return general();
  }
  if (threshold != 0) {
    // A weight whose survivors all lack room: each of its members with room
    // scores no better than z = threshold - 1 would. It drops out when the
    // other weight's best is certified ahead of that bound, as in BestEstimate.
    for (size_t k = 0; k < 2; ++k) {
      const size_t other = 1 - k;
      if (best[k].index != internal::kNone) continue;
      if (!contends[other]) return general();
      if (!internal::CertifiedAhead(
              internal::ScoreBracket(best[other].z, weights[other]),
              internal::ScoreBracket(threshold - 1, weights[k]),
              internal::kScoreMargin)) {
        return general();
      }
    }
  }
  if (!contends[0] && !contends[1]) return general();
  size_t group = contends[0] ? 0 : 1;
  if (contends[0] && contends[1]) {
    group = FirstIsBetter(best[0], weights[0], best[1], weights[1]) ? 0 : 1;
  }
  return decision(best[group].index, weights[group]);
}

// The one-weight LargestZ (the first eligible index with the largest z, and
// the largest z among the others), with every eligible z stored in the
// scratch, sized for the list; false if it could not grow. Out of line: the
// code of the common path stays a few contiguous cache lines.
bool PreparedCandidates::FindLargestZIntoScratch(
    std::string_view key, DecisionScratch& scratch,
    internal::LargestZ& largest) const {
  if (!scratch.Fit(candidates_.size())) return false;
  largest = FindLargestZ(KeyHash(key).state(), scratch.hashes_.data());
  return true;
}

namespace {

// Descending z, then ascending index (equal z: a tie the walk hands over).
void SortByZ(const uint64_t* z, size_t* begin, size_t* end) {
  std::sort(begin, end, [z](size_t a, size_t b) {
    return z[a] != z[b] ? z[a] > z[b] : a < b;
  });
}

}  // namespace

// The walk's first level, after a full owner (prepared_paths.h describes
// the walk): the owner is its first visited.
PreparedCandidates::Walk PreparedCandidates::StartWalk(
    uint32_t factor_percent, uint64_t total_load, size_t owner,
    DecisionScratch& scratch) const {
  Walk walk;
  walk.groups = path_ == Path::kTwoWeights ? 2 : 1;
  walk.weights[0] = walk.groups == 2 ? first_weight_ : weight_;
  walk.weights[1] = second_weight_;
  for (size_t k = 0; k < 2; ++k) {
    // As in RouteWithTotal: 100 W < 2^64 on the short paths.
    walk.room[k] = internal::RoomTest{
        UInt128{factor_percent} * (UInt128{total_load} + 1) * walk.weights[k],
        uint64_t{100} * total_weight_};
  }
  walk.owner = owner;
  walk.threshold = survivor_threshold_;
  walk.quota = internal::kSurvivorQuota;
  scratch.survivors_[0] = owner;
  walk.visited = walk.listed = 1;
  walk.steps = 0;
  walk.sorted = false;
  ListLevel(walk, scratch, /*ceiling=*/0);
  return walk;
}

// Appends the eligible candidates but the owner whose z lies in
// [walk.threshold, ceiling) (the first level, ceiling 0: z >=
// walk.threshold) to the walk's list. Branch-free: which candidates are
// kept is random, and as branches they would mispredict. The list has room
// for every candidate and one more (DecisionScratch::Fit): the owner is
// already in it, and may be written once more before it is dropped.
void PreparedCandidates::ListLevel(Walk& walk, DecisionScratch& scratch,
                                   uint64_t ceiling) const {
  const uint64_t* const z = scratch.hashes_.data();
  size_t* const list = scratch.survivors_.data();
  const uint64_t threshold = walk.threshold;
  const size_t owner = walk.owner;
  size_t listed = walk.listed;
  if (threshold == 0 && ceiling == 0) {  // a short list: everyone
    for (const uint32_t i : eligible_) {
      list[listed] = i;
      listed += i != owner;
    }
    walk.listed = listed;
    return;
  }
  const size_t level_begin = listed;
  // z - threshold < span: z in [threshold, ceiling), with z below the
  // threshold wrapping past the span (ceiling 0 stands for 2^64).
  const uint64_t span = ceiling - threshold;
  const size_t n = candidates_.size();
  const size_t begin = listed;
  if (internal::ActiveHashKernel() == internal::HashKernel::kAvx512) {
    // Eight z per compare, every slot read (an ineligible one's z may be
    // anything); the ineligible and the owner are dropped below.
    listed +=
        internal::ListZInRangeAvx512(z, n, threshold, span, list + listed);
  } else {
    // Every slot read too, branch-free: the write after the last kept one
    // may fall past the list once every candidate is listed (then `spare`).
    // On long lists a block of 16 with none kept (most of them: about
    // 16 kSurvivorQuota of n are kept) costs only the compares.
    const size_t size = scratch.survivors_.size();
    size_t spare;
    const auto list_range = [&](size_t from, size_t to) {
      for (size_t i = from; i < to; ++i) {
        *(listed < size ? list + listed : &spare) = i;
        listed += z[i] - threshold < span;
      }
    };
    constexpr size_t kBlock = 16;
    size_t i = 0;
    if (n >= 16 * kBlock) {
      for (; i + kBlock <= n; i += kBlock) {
        bool any = false;
        for (size_t j = i; j < i + kBlock; ++j) any |= z[j] - threshold < span;
        if (any) list_range(i, i + kBlock);
      }
    }
    list_range(i, n);
  }
  const bool every_candidate_eligible = eligible_.size() == candidates_.size();
  size_t kept = begin;
  for (size_t s = begin; s < listed; ++s) {
    const size_t i = list[s];
    list[kept] = i;
    kept += (every_candidate_eligible || candidates_[i].IsEligible()) &
            (i != owner);
  }
  walk.listed = kept;
  if (walk.sorted) SortByZ(z, list + level_begin, list + kept);
}

namespace {

// Whether a weight's next candidate to visit comes first among its weight's
// unvisited: kClear when its z is separated from the next listed one's, and
// from every unlisted z (below the threshold); kTied when a listed one comes
// near it (the general search orders them); kUnsettled when only the
// unlisted might (the next level is listed).
enum class HeadOrder : uint8_t { kNone, kClear, kTied, kUnsettled };

HeadOrder OrderOf(const internal::LargestZ& l, uint64_t threshold) {
  if (l.count == 0) return HeadOrder::kNone;
  // Every z taken was 0 (LargestZ leaves no index): a tie.
  if (l.index == internal::kNone) return HeadOrder::kTied;
  if (l.count > 1 && !internal::Separated(l.z, l.runner_up)) {
    return HeadOrder::kTied;
  }
  if (threshold != 0 && !internal::Separated(l.z, threshold - 1)) {
    return HeadOrder::kUnsettled;
  }
  return HeadOrder::kClear;
}

// Each group's LargestZ of list[begin..end)'s z, by position in the list
// (group_of(i): 0 or 1; best[1] stays empty when every candidate is in group
// 0), without LargestZ::Offer's branch on a new leader: the walk scans the
// same few candidates again at every step, where a new leader is as likely
// as not, so that branch would mispredict about ln(end - begin) times per
// step. Two passes instead: the largest z, then its position, how many have
// it (two: a tie, reported as a runner-up equal to it) and the largest of
// the others; each a short dependency chain.
template <typename GroupOf>
void LargestOfListed(const uint64_t* z, const size_t* list, size_t begin,
                     size_t end, GroupOf group_of, internal::LargestZ* best) {
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
  size_t position[2] = {internal::kNone, internal::kNone};
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
    // As LargestZ: a z of 0 never leads.
    if (top[k] == 0) position[k] = internal::kNone;
    best[k] = internal::LargestZ{top[k], runner_up[k], position[k], count[k]};
  }
}

}  // namespace

// Each weight's first unvisited entry in the sorted list (by position),
// with the next one of its weight as its runner-up, as LargestOfListed
// reports them.
void PreparedCandidates::HeadsOfSorted(const Walk& walk,
                                       const DecisionScratch& scratch,
                                       internal::LargestZ* best) const {
  const uint64_t* const z = scratch.hashes_.data();
  const size_t* const list = scratch.survivors_.data();
  for (size_t k = 0; k < 2; ++k) {
    const auto in_group = [&](size_t s) {
      return walk.groups == 1 ? k == 0
                              : (has_second_[list[s]] != 0) == (k == 1);
    };
    size_t head = walk.visited;
    while (head < walk.listed && !in_group(head)) ++head;
    if (head == walk.listed) {
      best[k] = internal::LargestZ::Empty();
      continue;
    }
    size_t next = head + 1;
    while (next < walk.listed && !in_group(next)) ++next;
    const bool has_next = next < walk.listed;
    best[k] = internal::LargestZ{z[list[head]], has_next ? z[list[next]] : 0,
                                 z[list[head]] != 0 ? head : internal::kNone,
                                 has_next ? size_t{2} : size_t{1}};
  }
}

PreparedCandidates::WalkStep PreparedCandidates::NextInKeyOrder(
    Walk& walk, DecisionScratch& scratch) const {
  const uint64_t* const z = scratch.hashes_.data();
  size_t* const list = scratch.survivors_.data();
  constexpr WalkStep kGeneralSearch{internal::kNone, 0};
  // A third step: from here on the unvisited stay sorted.
  if (++walk.steps == 3 && !walk.sorted) {
    SortByZ(z, list + walk.visited, list + walk.listed);
    walk.sorted = true;
  }
  for (;;) {
    // Each weight's largest z not visited, by its position in the list.
    internal::LargestZ best[2];
    if (walk.sorted) {
      HeadsOfSorted(walk, scratch, best);
    } else if (walk.groups == 1) {
      LargestOfListed(
          z, list, walk.visited, walk.listed, [](size_t) { return 0; }, best);
    } else {
      LargestOfListed(
          z, list, walk.visited, walk.listed,
          [this](size_t i) { return has_second_[i]; }, best);
    }
    const HeadOrder order[2] = {OrderOf(best[0], walk.threshold),
                                OrderOf(best[1], walk.threshold)};
    if (order[0] == HeadOrder::kTied || order[1] == HeadOrder::kTied) {
      return kGeneralSearch;
    }
    if (walk.groups == 1 && order[0] == HeadOrder::kClear) {
      return WalkStep{best[0].index, 0};
    }
    if (order[0] == HeadOrder::kClear && order[1] == HeadOrder::kClear) {
      const size_t a = list[best[0].index], b = list[best[1].index];
      const bool first_is_better =
          FirstIsBetter(internal::LargestZ{z[a], 0, a, 1}, walk.weights[0],
                        internal::LargestZ{z[b], 0, b, 1}, walk.weights[1]);
      return first_is_better ? WalkStep{best[0].index, 0}
                             : WalkStep{best[1].index, 1};
    }
    if (walk.groups == 2 &&
        (order[0] == HeadOrder::kNone) != (order[1] == HeadOrder::kNone)) {
      // One weight has no listed candidate left: none at all at threshold
      // 0; else the other's goes first if it is clear and certified ahead
      // of every z below the threshold, as in BestEstimate.
      const size_t j = order[0] == HeadOrder::kNone ? 1 : 0;
      if (order[j] == HeadOrder::kClear &&
          (walk.threshold == 0 ||
           internal::CertifiedAhead(
               internal::ScoreBracket(best[j].z, walk.weights[j]),
               internal::ScoreBracket(walk.threshold - 1, walk.weights[1 - j]),
               internal::kScoreMargin))) {
        return WalkStep{best[j].index, j};
      }
    }
    // Nobody listed left at threshold 0: everyone was visited (stale).
    if (walk.threshold == 0) return kGeneralSearch;
    const uint64_t ceiling = walk.threshold;
    walk.quota *= 4;
    walk.threshold = internal::SurvivorThreshold(eligible_.size(), walk.quota);
    ListLevel(walk, scratch, ceiling);
  }
}

// Writes the eligible candidates the walk did not visit (their loads are
// unread) after its visited, sorting those; returns how many.
size_t PreparedCandidates::ListUnvisited(const Walk& walk,
                                         DecisionScratch& scratch) const {
  size_t* const list = scratch.survivors_.data();
  std::sort(list, list + walk.visited);
  size_t unvisited = 0;
  const size_t* visited = list;
  const size_t* const visited_end = list + walk.visited;
  for (const uint32_t i : eligible_) {
    if (visited != visited_end && *visited == i) {
      ++visited;
      continue;
    }
    list[walk.visited + unvisited++] = i;
  }
  return unvisited;
}

// The general path, on the loads the short path sampled into `scratch`.
// Out of line: with one weight it runs only for a near-tie.
Result<Decision> PreparedCandidates::RedecideOnGeneralPath(
    const BoundedLoadRendezvous& bounded, std::string_view key,
    DecisionScratch& scratch) const {
  // Decide rewrites each load slot with the value it reads from it.
  const uint64_t* const loads = scratch.loads_.data();
  return bounded.Decide(
      key, candidates_, *table_, [loads](size_t i) { return loads[i]; },
      scratch);
}

}  // namespace poise
