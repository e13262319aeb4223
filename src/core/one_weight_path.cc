#include "one_weight_path.h"

#include "candidate_hash.h"

namespace poise::internal {

LargestZ OneWeightLargestZ(const PreparedList& list, uint64_t key_state,
                           uint64_t* z) {
  const IdentityTable::KeyRow row = list.table->ForKey(key_state);
  // The vector kernel is the faster one at every n (docs/performance.md).
  if (ActiveHashKernel() == HashKernel::kAvx512) {
    return TableLargestZAvx512(
        row, list.candidates.size(),
        list.eligible_bits.empty() ? nullptr : list.eligible_bits.data(),
        list.eligible.size(), z);
  }
  LargestZ largest = LargestZ::Empty();
  for (const uint32_t i : list.eligible) {
    const uint64_t zi = row.Mixed(i);
    if (z != nullptr) z[i] = zi;
    largest.Offer(zi, i);
  }
  return largest;
}

}  // namespace poise::internal
