#include "two_weight_path.h"

#include "candidate_hash.h"
#include "owner_search.h"
#include "poise/hash.h"
#include "room_search.h"
#include "score_bounds.h"

namespace poise::internal {
namespace {

// Every weight's LargestZ from one pass of the vector kernel (z kept when
// given).
PassState GroupedPassImpl(const PreparedList& list, uint64_t key_state,
                          uint64_t* z) {
  LargestZ lead[kMaxGroups];
  TableLargestZByGroup(list.table->ForKey(key_state), list.candidates.size(),
                       list.group_bits.data(), list.group_count, z, lead);
  PassState pass;
  for (size_t g = 0; g < list.group_count; ++g) {
    lead[g].count = list.group_sizes[g];
    pass.groups[g] =
        WeightGroup{list.group_weights[g], lead[g], LargestZ::Empty()};
  }
  pass.group_count = list.group_count;
  // The short paths' W (0 on the general path, where the unbounded search
  // does not read it).
  pass.total_weight = list.total_weight;
  return pass;
}

// FirstIsBetter's pairs that the brackets do not settle: BestEstimate over
// the two. Out of line and cold, so that FirstIsBetter stays small enough to
// be inlined into its callers without a stack frame.
[[gnu::noinline, gnu::cold]] bool FirstIsBetterByEstimates(const LargestZ& a,
                                                           uint32_t wa,
                                                           const LargestZ& b,
                                                           uint32_t wb) {
  ScoreEstimate c[2] = {{kUnscored, Rank{0, a.z, wa, a.index}, false},
                        {kUnscored, Rank{0, b.z, wb, b.index}, false}};
  SearchResult unused;
  return BestEstimate(c, 2, kScoreMargin, unused) == 0;
}

}  // namespace

PassState TwoWeightPassKeepingZ(const PreparedList& list, uint64_t key_state,
                                uint64_t* z) {
  return GroupedPassImpl(list, key_state, z);
}

bool FirstIsBetter(const LargestZ& a, uint32_t wa, const LargestZ& b,
                   uint32_t wb) {
  const Bracket ba = ScoreBracket(a.z, wa);
  const Bracket bb = ScoreBracket(b.z, wb);
  if (CertifiedAhead(ba, bb, kScoreMargin)) return true;
  if (CertifiedAhead(bb, ba, kScoreMargin)) return false;
  return FirstIsBetterByEstimates(a, wa, b, wb);
}

size_t TwoWeightOwner(const PreparedList& list, const PassState& pass) {
  const LargestZ& first = pass.groups[0].all;
  const LargestZ& second = pass.groups[1].all;
  if (!ClearOfRunnerUp(first) || !ClearOfRunnerUp(second)) return kNone;
  return FirstIsBetter(first, list.weights[0], second, list.weights[1])
             ? first.index
             : second.index;
}

Result<size_t> PickByWeight(const PreparedList& list, std::string_view key) {
  const KeyHash hash(key);
  PassState pass = GroupedPassImpl(list, hash.state(), nullptr);
  if (list.path == ListPath::kTwoWeights) {
    const size_t owner = TwoWeightOwner(list, pass);
    if (owner != kNone) return owner;
  }
  return PickAfterPass(hash, list.candidates, *list.table, pass);
}

}  // namespace poise::internal
