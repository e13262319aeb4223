#include "two_weight_path.h"

#include "candidate_hash.h"
#include "owner_search.h"
#include "poise/hash.h"
#include "room_search.h"
#include "score_bounds.h"

namespace poise::internal {
namespace {

// Both weights' LargestZ from one pass of the vector kernel (z kept when
// given).
PassState TwoWeightPassImpl(const PreparedList& list, uint64_t key_state,
                            uint64_t* z) {
  LargestZ lead[2];
  TableLargestZTwoWeights(
      list.table->ForKey(key_state), list.candidates.size(),
      list.eligible_bits.empty() ? nullptr : list.eligible_bits.data(),
      list.second_bits.data(), z, lead);
  lead[0].count = list.group_sizes[0];
  lead[1].count = list.group_sizes[1];
  const LargestZ& first = lead[0];
  const LargestZ& second = lead[1];
  PassState pass;
  pass.groups[0] = WeightGroup{list.weights[0], first, LargestZ::Empty()};
  pass.groups[1] = WeightGroup{list.weights[1], second, LargestZ::Empty()};
  pass.group_count = 2;
  // Below 2^32 candidates of weight below 2^32: no wrap.
  pass.total_weight = uint64_t{list.weights[0]} * first.count +
                      uint64_t{list.weights[1]} * second.count;
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

PassState TwoWeightPass(const PreparedList& list, uint64_t key_state) {
  return TwoWeightPassImpl(list, key_state, nullptr);
}

PassState TwoWeightPassKeepingZ(const PreparedList& list, uint64_t key_state,
                                uint64_t* z) {
  return TwoWeightPassImpl(list, key_state, z);
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

Result<size_t> PickTwoWeights(const PreparedList& list, std::string_view key) {
  const KeyHash hash(key);
  PassState pass = TwoWeightPass(list, hash.state());
  const size_t owner = TwoWeightOwner(list, pass);
  if (owner != kNone) return owner;
  return PickAfterPass(hash, list.candidates, *list.table, pass);
}

}  // namespace poise::internal
