#include "poise/rendezvous.h"

#include <algorithm>

namespace poise {

const char* ToString(PickError error) {
  switch (error) {
    case PickError::kEmpty:
      return "no candidates";
    case PickError::kNoEligibleCandidates:
      return "no eligible candidates";
    case PickError::kWeightOverflow:
      return "eligible weights sum past 2^32-1";
    case PickError::kLoadOverflow:
      return "sampled loads sum past 2^64-1";
    case PickError::kScratchCapacityExceeded:
      return "decision scratch could not grow";
  }
  return "unknown pick error";
}

Rank RankOf(const KeyHash& key, const Candidate& candidate, size_t index) {
  const uint64_t z = key.Mixed(candidate.identity);
  return Rank{Score(z, candidate.weight), z, candidate.weight, index};
}

Result<size_t> WeightedRendezvous::Pick(
    std::string_view key, const std::vector<Candidate>& candidates) {
  if (candidates.empty()) return PickError::kEmpty;
  const KeyHash hash(key);
  bool found = false;
  Rank best{};
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!candidates[i].IsEligible()) continue;
    const Rank rank = RankOf(hash, candidates[i], i);
    if (!found || rank.Precedes(best)) best = rank;
    found = true;
  }
  if (!found) return PickError::kNoEligibleCandidates;
  return best.index;
}

Result<std::vector<Rank>> WeightedRendezvous::Ranking(
    std::string_view key, const std::vector<Candidate>& candidates) {
  if (candidates.empty()) return PickError::kEmpty;
  const KeyHash hash(key);
  std::vector<Rank> ranks;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].IsEligible()) {
      ranks.push_back(RankOf(hash, candidates[i], i));
    }
  }
  if (ranks.empty()) return PickError::kNoEligibleCandidates;
  std::sort(ranks.begin(), ranks.end(),
            [](const Rank& a, const Rank& b) { return a.Precedes(b); });
  return ranks;
}

uint64_t BoundedLoadRendezvous::Capacity(uint32_t factor_percent,
                                         uint64_t total_load, uint32_t weight,
                                         uint32_t total_weight) {
  // f < 2^32, L + 1 <= 2^64 - 1 and w < 2^32: the product fits in 128 bits.
  using u128 = unsigned __int128;
  const u128 numerator =
      u128{factor_percent} * (u128{total_load} + 1) * u128{weight};
  const u128 denominator = u128{100} * total_weight;
  const u128 capacity =
      numerator / denominator + (numerator % denominator != 0 ? 1 : 0);
  return capacity > u128{UINT64_MAX} ? UINT64_MAX
                                     : static_cast<uint64_t>(capacity);
}

Result<Decision> BoundedLoadRendezvous::DecideSampled(
    std::string_view key, const std::vector<Candidate>& candidates,
    const std::vector<uint64_t>& loads, uint64_t total_load,
    uint64_t total_weight, bool load_overflow) const {
  if (total_weight == 0) return PickError::kNoEligibleCandidates;
  if (total_weight > UINT32_MAX) return PickError::kWeightOverflow;
  if (load_overflow || total_load == UINT64_MAX) {
    return PickError::kLoadOverflow;
  }
  const auto weight_sum = static_cast<uint32_t>(total_weight);
  const KeyHash hash(key);
  // One pass: the best candidate overall is the affinity owner, the best one
  // with room is the selection. A factor >= 100 guarantees one has room.
  bool have_affinity = false;
  bool have_selection = false;
  Rank affinity{};
  Rank selection{};
  uint64_t selection_capacity = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& candidate = candidates[i];
    if (!candidate.IsEligible()) continue;
    const Rank rank = RankOf(hash, candidate, i);
    if (!have_affinity || rank.Precedes(affinity)) {
      affinity = rank;
      have_affinity = true;
    }
    if (have_selection && !rank.Precedes(selection)) continue;
    const uint64_t capacity =
        Capacity(factor_percent_, total_load, candidate.weight, weight_sum);
    if (loads[i] < capacity) {
      selection = rank;
      selection_capacity = capacity;
      have_selection = true;
    }
  }
  if (!have_selection) return PickError::kNoEligibleCandidates;  // unreachable
  return Decision{affinity.index, selection.index,
                  affinity.index != selection.index, loads[selection.index],
                  selection_capacity};
}

}  // namespace poise
