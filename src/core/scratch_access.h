// The core's view of a DecisionScratch's buffers, which its public face
// keeps private: the loads and hashes by candidate index, the list of
// indices (one entry more than n), a bit per candidate, and Fit(n), which
// sizes them. Internal: not installed.
#ifndef POISE_SRC_CORE_SCRATCH_ACCESS_H_
#define POISE_SRC_CORE_SCRATCH_ACCESS_H_

#include <cstddef>
#include <cstdint>

#include "poise/types.h"

namespace poise::internal {

struct ScratchAccess {
  static bool Fit(DecisionScratch& s, size_t n) { return s.Fit(n); }
  static uint64_t* Loads(DecisionScratch& s) { return s.loads(); }
  static uint64_t* Hashes(DecisionScratch& s) { return s.hashes(); }
  static size_t* List(DecisionScratch& s) { return s.list(); }
  // A bit per candidate: the first survivor level a hashing pass marked
  // (key_order_walk.h).
  static uint64_t* Marks(DecisionScratch& s) { return s.marks(); }
};

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_SCRATCH_ACCESS_H_
