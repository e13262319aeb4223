#include "one_weight_path.h"

#include "candidate_hash.h"

namespace poise::internal {

LargestZ OneWeightLargestZ(const PreparedList& list, uint64_t key_state,
                           uint64_t* z, uint64_t* marks) {
  return TableLargestZ(
      list.table->ForKey(key_state), list.candidates.size(),
      list.eligible_bits.empty() ? nullptr : list.eligible_bits.data(),
      list.eligible.size(), z, SurvivorBits{list.survivor_threshold, marks});
}

}  // namespace poise::internal
