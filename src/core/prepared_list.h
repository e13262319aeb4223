// A candidate list prepared once for many decisions (a picker's snapshot):
// what the short paths need to know of it, computed when it is built. Which
// path serves it depends only on its eligible weights:
//  - one weight: the contract's order is the order of z alone
//    (score_bounds.h proves it for a largest z clear of its runner-up), so
//    the owner is one loop over the eligible candidates (one_weight_path.h);
//  - two weights: both weights' largest z kept at once, compared by
//    certified bounds of their scores (two_weight_path.h);
//  - anything else (three or more weights, none eligible, 2^32 or more
//    candidates, weights summing past 2^64 / 100, a table that does not
//    match): the general search of poise/rendezvous.h.
// The answers are the same on every path. Private to src/core (and its
// tests).
#ifndef POISE_SRC_CORE_PREPARED_LIST_H_
#define POISE_SRC_CORE_PREPARED_LIST_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "hash_and_group.h"
#include "poise/identity_table.h"
#include "poise/types.h"

namespace poise::internal {

enum class ListPath : uint8_t { kOneWeight, kTwoWeights, kGeneral };

struct PreparedList {
  std::vector<Candidate> candidates;
  // Holds the identities of `candidates`, in order (never null).
  std::shared_ptr<const IdentityTable> table;
  ListPath path = ListPath::kGeneral;

  // The rest is set only on the short paths, where there are fewer than
  // 2^32 candidates and 100 W fits in 64 bits (so every Bound there takes
  // no division).
  std::vector<uint32_t> eligible;  // ascending, as the contract visits them
  // One weight, some candidates ineligible: bit i % 8 of byte i / 8 is
  // candidate i's eligibility (for the vector kernel); empty otherwise.
  std::vector<uint8_t> eligible_bits;
  // The weights in order of first appearance (one weight: weights[1] = 0).
  uint32_t weights[2] = {0, 0};
  // Two weights: 1 where candidate i has weights[1] (0 for the
  // ineligible); empty with one weight.
  std::vector<uint8_t> has_second;
  uint64_t total_weight = 0;  // W, the eligible weights' sum
  // SurvivorThreshold(eligible.size(), kSurvivorQuota), once per list.
  uint64_t survivor_threshold = 0;

  // Two weights (weights[0] then weights[1]), and on the general path three
  // to kMaxGroups of them: the eligible candidates of each weight, in order
  // of first appearance, for the vector kernel's one pass over all groups
  // (TableLargestZByGroup). Group g's bit array is group_bits[g * bytes ..
  // (g + 1) * bytes), bytes = (n + 7) / 8; group_count 0: not grouped.
  std::vector<uint8_t> group_bits;
  size_t group_count = 0;
  uint32_t group_weights[kMaxGroups] = {};
  size_t group_sizes[kMaxGroups] = {};
  bool every_candidate_eligible() const {
    return eligible.size() == candidates.size();
  }
  // The group (0 or 1) of an eligible candidate on a short path.
  size_t GroupOf(size_t i) const {
    return has_second.empty() ? 0 : has_second[i];
  }
};

// `table` must hold the identities of `candidates`, in order; with a
// missing or different one the list takes the general path, which reports
// kTableMismatch.
PreparedList PrepareList(std::vector<Candidate> candidates,
                         std::shared_ptr<const IdentityTable> table);

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_PREPARED_LIST_H_
