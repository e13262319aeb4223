#include "one_weight_path.h"

#include "candidate_hash.h"

namespace poise::internal {

LargestZ OneWeightLargestZ(const PreparedList& list, uint64_t key_state,
                           uint64_t* z) {
  return TableLargestZ(
      list.table->ForKey(key_state), list.candidates.size(),
      list.eligible_bits.empty() ? nullptr : list.eligible_bits.data(),
      list.eligible.size(), z);
}

}  // namespace poise::internal
