#include "prepared_list.h"

#include <utility>

#include "largest_z.h"

namespace poise::internal {
namespace {

// Empties `v` and frees its storage (clear() keeps it): a picker keeps its
// prepared lists while it lives, one per channel.
template <typename T>
void Free(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

// The eligible candidates and their weights, if there are at most two
// distinct ones (in order of first appearance); false for more.
bool ListEligible(PreparedList& list) {
  const size_t n = list.candidates.size();
  list.has_second.assign(n, 0);
  list.eligible.reserve(n);  // at most n, and usually n (every one READY)
  for (size_t i = 0; i < n; ++i) {
    const Candidate& c = list.candidates[i];
    if (!c.IsEligible()) continue;
    uint32_t* const w = list.weights;
    if (w[0] == 0) w[0] = c.weight;
    if (c.weight != w[0] && w[1] == 0) w[1] = c.weight;
    if (c.weight != w[0] && c.weight != w[1]) return false;
    list.eligible.push_back(static_cast<uint32_t>(i));
    list.has_second[i] = c.weight == w[1] ? 1 : 0;
    list.total_weight += c.weight;
  }
  return true;
}

// bit i % 8 of byte i / 8 set for every i < n with of(i).
template <typename Predicate>
std::vector<uint8_t> BitsOf(size_t n, Predicate of) {
  std::vector<uint8_t> bits((n + 7) / 8, 0);
  for (size_t i = 0; i < n; ++i) {
    if (of(i)) bits[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
  }
  return bits;
}

// The eligible candidates' weights as groups (in order of first
// appearance), each with its bit array, when there are at most kMaxGroups
// distinct ones; none otherwise.
void GroupByWeight(PreparedList& list) {
  const size_t n = list.candidates.size();
  const size_t bytes = (n + 7) / 8;
  size_t count = 0;
  std::vector<uint8_t> bits;
  for (size_t i = 0; i < n; ++i) {
    const Candidate& c = list.candidates[i];
    if (!c.IsEligible()) continue;
    size_t g = 0;
    while (g < count && list.group_weights[g] != c.weight) ++g;
    if (g == count) {
      if (count == kMaxGroups) return;
      list.group_weights[count] = c.weight;
      list.group_sizes[count] = 0;
      ++count;
      bits.resize(count * bytes, 0);
    }
    bits[g * bytes + i / 8] |= static_cast<uint8_t>(1u << (i % 8));
    ++list.group_sizes[g];
  }
  list.group_count = count;
  list.group_bits = std::move(bits);
}

void TakeGeneralPath(PreparedList& list) {
  list.path = ListPath::kGeneral;
  Free(list.eligible);
  Free(list.has_second);
  list.weights[0] = list.weights[1] = 0;
  list.total_weight = 0;
  // Three to kMaxGroups weights: each weight's leader from one pass.
  GroupByWeight(list);
  if (list.group_count < 3) {
    list.group_count = 0;
    Free(list.group_bits);
  }
}

}  // namespace

PreparedList PrepareList(std::vector<Candidate> candidates,
                         std::shared_ptr<const IdentityTable> table) {
  PreparedList list;
  list.candidates = std::move(candidates);
  list.table = table != nullptr ? std::move(table)
                                : std::make_shared<const IdentityTable>();
  const size_t n = list.candidates.size();
  if (list.table->size() != n || n > UINT32_MAX) return list;
  // No eligible candidate: the general path reports it. Weights summing
  // past 2^64 / 100 (tens of millions of heavy candidates): the general
  // path serves them, so that on the short paths 100 W fits in 64 bits.
  if (!ListEligible(list) || list.eligible.empty() ||
      list.total_weight > UINT64_MAX / 100) {
    TakeGeneralPath(list);
    return list;
  }
  list.survivor_threshold =
      SurvivorThreshold(list.eligible.size(), kSurvivorQuota);
  if (list.weights[1] != 0) {
    list.path = ListPath::kTwoWeights;
    GroupByWeight(list);  // the two weights, in the same order
    return list;
  }
  list.path = ListPath::kOneWeight;
  Free(list.has_second);
  if (!list.every_candidate_eligible()) {
    list.eligible_bits =
        BitsOf(n, [&](size_t i) { return list.candidates[i].IsEligible(); });
  }
  return list;
}

}  // namespace poise::internal
