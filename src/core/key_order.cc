#include "key_order.h"

#include <algorithm>
#include <utility>

#include "candidate_hash.h"
#include "one_weight_path.h"
#include "score_bounds.h"
#include "scratch_access.h"
#include "two_weight_path.h"

namespace poise::internal {
namespace {

// The candidate list as HashAndGroup sees it on the general path: z through
// the table (kept in the pass's outputs), no load.
struct TableHashView {
  const std::vector<Candidate>& candidates;
  IdentityTable::KeyRow row;

  size_t size() const { return candidates.size(); }
  bool eligible(size_t i) const { return candidates[i].IsEligible(); }
  uint32_t weight(size_t i) const { return candidates[i].weight; }
  void Hash(size_t begin, size_t end, uint64_t* z) const {
    TableMixedRange(row, begin, end, z);
  }
  static uint64_t load(size_t /*i*/) { return 0; }
};

// The whole order of the last SortTheRest on this thread.
std::vector<uint32_t>& RankedOrder() {
  thread_local std::vector<uint32_t> order;
  return order;
}

struct Approx {
  double score;
  uint32_t index;
};

}  // namespace

std::vector<size_t>& WithRoomList() {
  thread_local std::vector<size_t> with_room;
  return with_room;
}

uint64_t EligibleWeightOf(const PreparedList& list) {
  if (list.path != ListPath::kGeneral) return list.total_weight;
  uint64_t total = 0;  // fits: KeyOrder::Hashed checked WeightSumError
  for (const Candidate& c : list.candidates) {
    if (c.IsEligible()) total += c.weight;
  }
  return total;
}

Result<KeyOrder> KeyOrder::Hashed(const PreparedList& list,
                                  std::string_view key,
                                  DecisionScratch& scratch, size_t walk_quota) {
  KeyOrder order(list, key);
  order.walk_quota_ = walk_quota;
  if (const std::optional<PickError> error = order.Hash(scratch)) {
    return *error;
  }
  return order;
}

std::optional<PickError> KeyOrder::Hash(DecisionScratch& scratch) {
  const PreparedList& list = *list_;
  const std::vector<Candidate>& candidates = list.candidates;
  mode_ = Mode::kOwner;
  if (list.path != ListPath::kGeneral) {
    if (!ScratchAccess::Fit(scratch, candidates.size())) {
      return PickError::kScratchCapacityExceeded;
    }
    const uint64_t key_state = KeyHash(key_).state();
    if (list.path == ListPath::kOneWeight) {
      // The walk's first survivor level from the same pass, where it has one.
      marked_ = stop_ == Stop::kPastOwner && walk_quota_ == kSurvivorQuota &&
                list.survivor_threshold != 0;
      const LargestZ largest =
          OneWeightLargestZ(list, key_state, ScratchAccess::Hashes(scratch),
                            marked_ ? ScratchAccess::Marks(scratch) : nullptr);
      owner_ = ClearOfRunnerUp(largest) ? largest.index : kNone;
    } else {
      owner_ = TwoWeightOwner(
          list, TwoWeightPassKeepingZ(list, key_state,
                                      ScratchAccess::Hashes(scratch)));
    }
    if (owner_ == kNone) SortTheRest(scratch);  // a near-tie at the top
    return std::nullopt;
  }
  // The general path, in poise-core's order of errors.
  if (list.table->size() != candidates.size()) return PickError::kTableMismatch;
  if (candidates.empty()) return PickError::kEmpty;
  const bool any_eligible =
      std::any_of(candidates.begin(), candidates.end(),
                  [](const Candidate& c) { return c.IsEligible(); });
  if (!ScratchAccess::Fit(scratch, candidates.size())) {
    return any_eligible ? PickError::kScratchCapacityExceeded
                        : PickError::kNoEligibleCandidates;
  }
  if (!any_eligible) return PickError::kNoEligibleCandidates;
  if (const auto error = WeightSumError(candidates)) return *error;
  const KeyHash hash(key_);
  PassState pass;
  HashAndGroup<true>(
      TableHashView{candidates, list.table->ForKey(hash.state())},
      PassOutputs{ScratchAccess::Hashes(scratch),
                  ScratchAccess::Loads(scratch)},
      pass);
  const Result<size_t> owner =
      PickAfterPass(hash, candidates, *list.table, pass);
  if (!owner.ok()) return owner.error();
  owner_ = owner.value();
  return std::nullopt;
}

void KeyOrder::SortTheRest(DecisionScratch& scratch) {
  const PreparedList& list = *list_;
  const std::vector<Candidate>& candidates = list.candidates;
  const uint64_t* const z = ScratchAccess::Hashes(scratch);
  thread_local std::vector<Approx> approx;
  approx.clear();
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!candidates[i].IsEligible()) continue;
    approx.push_back(Approx{ApproxScore(z[i], candidates[i].weight),
                            static_cast<uint32_t>(i)});
  }
  std::sort(approx.begin(), approx.end(), [](const Approx& a, const Approx& b) {
    return a.score != b.score ? a.score < b.score : a.index < b.index;
  });
  // Two neighbours whose approximate scores are certified apart are in the
  // contract's order (score_bounds.h); a run of others is ordered by exact
  // ranks, and every member of a run is certified against every other run.
  std::vector<uint32_t>& order = RankedOrder();
  order.clear();
  thread_local std::vector<Rank> run;
  for (size_t begin = 0; begin < approx.size();) {
    size_t end = begin + 1;
    while (end < approx.size() &&
           !(approx[end - 1].score + 2 * kScoreMargin < approx[end].score)) {
      ++end;
    }
    if (end - begin == 1) {
      order.push_back(approx[begin].index);
    } else {
      run.clear();
      for (size_t r = begin; r < end; ++r) {
        const uint32_t i = approx[r].index;
        const uint32_t w = candidates[i].weight;
        run.push_back(Rank{Score(z[i], w), z[i], w, i});
      }
      std::sort(run.begin(), run.end(),
                [](const Rank& a, const Rank& b) { return a.Precedes(b); });
      for (const Rank& r : run) order.push_back(static_cast<uint32_t>(r.index));
    }
    begin = end;
  }
  // The candidates returned so far are the order's first.
  ranked_at_ = mode_ == Mode::kOwner ? 0 : hashed_yielded_;
  ranked_ = true;
  if (mode_ == Mode::kOwner && owner_ == kNone) owner_ = order.front();
  mode_ = Mode::kRanked;
}

size_t KeyOrder::Next(DecisionScratch& scratch) {
  if (mode_ == Mode::kPrefix) {
    const std::vector<Candidate>& candidates = list_->candidates;
    while (prefix_at_ < prefix_size_) {
      const size_t i = prefix_[prefix_at_++];
      if (i < candidates.size() && candidates[i].IsEligible()) {
        ++yielded_;
        return i;
      }
    }
    // Past the prefix: the order hashed, and its first yielded_ (the
    // prefix's eligible) passed over.
    if (const std::optional<PickError> error = Hash(scratch)) {
      error_ = error;
      mode_ = Mode::kEnd;
      return kNone;
    }
    for (size_t j = 0; j < yielded_; ++j) {
      if (NextHashed(scratch) == kNone) return kNone;
    }
  }
  const size_t i = NextHashed(scratch);
  if (i != kNone) ++yielded_;
  return i;
}

size_t KeyOrder::NextHashed(DecisionScratch& scratch) {
  switch (mode_) {
    case Mode::kOwner:
      mode_ = Mode::kWalk;
      walk_started_ = false;
      ++hashed_yielded_;
      return owner_;
    case Mode::kWalk: {
      const PreparedList& list = *list_;
      if (list.path == ListPath::kGeneral) {
        SortTheRest(scratch);
        return NextHashed(scratch);
      }
      if (!walk_started_) {
        walk_ = StartWalk(list, owner_, scratch, walk_quota_, marked_);
        walk_started_ = true;
      }
      const WalkStep step = NextInKeyOrder(list, walk_, scratch);
      if (step.position == kNone) {
        if (walk_.visited == list.eligible.size()) {
          mode_ = Mode::kEnd;
          return kNone;
        }
        SortTheRest(scratch);  // a near-tie the walk cannot order
        return NextHashed(scratch);
      }
      const size_t i = ScratchAccess::List(scratch)[step.position];
      MarkVisited(walk_, step.position, ScratchAccess::List(scratch));
      ++hashed_yielded_;
      return i;
    }
    case Mode::kRanked: {
      const std::vector<uint32_t>& order = RankedOrder();
      if (ranked_at_ == order.size()) {
        mode_ = Mode::kEnd;
        return kNone;
      }
      ++hashed_yielded_;
      return order[ranked_at_++];
    }
    case Mode::kPrefix:
    case Mode::kEnd:
      break;
  }
  return kNone;
}

size_t KeyOrder::Yielded(size_t j, DecisionScratch& scratch) const {
  if (mode_ == Mode::kPrefix) {  // the j-th eligible of the prefix
    const std::vector<Candidate>& candidates = list_->candidates;
    for (size_t at = 0; at < prefix_at_; ++at) {
      const size_t i = prefix_[at];
      if (i < candidates.size() && candidates[i].IsEligible() && j-- == 0) {
        return i;
      }
    }
    return kNone;
  }
  if (ranked_) return RankedOrder()[j];
  if (!walk_started_) return owner_;  // only the owner was returned
  return ScratchAccess::List(scratch)[j];
}

}  // namespace poise::internal
