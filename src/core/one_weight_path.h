// The one-weight path: with every eligible candidate of one weight, the
// key's order is the order of z (score_bounds.h), so the owner is the
// largest z when it is clear of its runner-up. Private to src/core.
#ifndef POISE_SRC_CORE_ONE_WEIGHT_PATH_H_
#define POISE_SRC_CORE_ONE_WEIGHT_PATH_H_

#include <cstdint>

#include "largest_z.h"
#include "prepared_list.h"

namespace poise::internal {

// The LargestZ of `list`'s eligible candidates for `key_state` (a one-weight
// list), by the vector kernel (candidate_hash.h); stores every z, the
// ineligible ones' too, in `z` when given, and in `marks` when given (n / 64
// + 1 words) a bit for every z >= list.survivor_threshold: a walk's first
// survivor level (key_order_walk.h).
LargestZ OneWeightLargestZ(const PreparedList& list, uint64_t key_state,
                           uint64_t* z, uint64_t* marks = nullptr);

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_ONE_WEIGHT_PATH_H_
