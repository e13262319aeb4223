// The two-weight path: each candidate is offered to both weights' LargestZ
// and taken by its own, so both stay in registers and no candidate's weight
// is searched for; the owner is the better of the two leaders by certified
// bounds of their scores. The general path's lists of three to kMaxGroups
// weights take the same pass (one LargestZ per weight) before the general
// search. Private to src/core.
#ifndef POISE_SRC_CORE_TWO_WEIGHT_PATH_H_
#define POISE_SRC_CORE_TWO_WEIGHT_PATH_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "hash_and_group.h"
#include "largest_z.h"
#include "poise/types.h"
#include "prepared_list.h"

namespace poise::internal {

// The pass HashAndGroup makes for a two-weight list (groups 0 and 1 are
// list.weights[0] and [1]), without the loads, storing every eligible z in
// `z`.
PassState TwoWeightPassKeepingZ(const PreparedList& list, uint64_t key_state,
                                uint64_t* z);

// The better of the two weights' leaders after that pass when both are
// clear of their runners-up; kNone otherwise (the general search decides).
size_t TwoWeightOwner(const PreparedList& list, const PassState& pass);

// WeightedRendezvous::Pick's answer for a grouped list (list.group_count
// != 0: two weights, or three to kMaxGroups on the general path), from one
// pass of the vector kernel over every weight: with two weights the better
// leader when both are clear of their runners-up, else the general search
// from that pass.
Result<size_t> PickByWeight(const PreparedList& list, std::string_view key);

// Whether a (of weight wa) precedes b (of weight wb) by the contract's
// order; both clear of their runners-up. Their brackets settle most pairs.
bool FirstIsBetter(const LargestZ& a, uint32_t wa, const LargestZ& b,
                   uint32_t wb);

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_TWO_WEIGHT_PATH_H_
