// Not API: nothing here is meant to be called by users, and all of it may
// change in any release. Included by poise/rendezvous.h, whose Decide is a
// template: the pass that hashes the candidates, groups them by weight and
// samples the caller's load function must be compiled where the load function
// is known, so that the call is inlined into the loop. The scoring half stays
// out of line (src/core/rendezvous.cc, with the contract's floating-point
// flags).
#ifndef POISE_INTERNAL_BOUNDED_DECIDE_H_
#define POISE_INTERNAL_BOUNDED_DECIDE_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "poise/hash.h"
#include "poise/identity_table.h"
#include "poise/internal/pass.h"
#include "poise/rendezvous.h"

namespace poise::internal {

// z = KeyHash::Mixed(c[i].identity) for every eligible c[i], i < n, from
// KeyHash::state() (the core's hashing kernels; other slots unspecified).
void HashIdentities(uint64_t key_state, const Candidate* c, size_t n,
                    uint64_t* z);

// z[k] for candidate begin + k, k < end - begin: through `table` when there is
// one (built from the identities of c), else from the identities.
inline void HashRange(uint64_t key_state, const Candidate* c,
                      const IdentityTable* table, size_t begin, size_t end,
                      uint64_t* z) {
  if (table != nullptr) {
    table->MixedRange(key_state, begin, end, z);
  } else {
    HashIdentities(key_state, c + begin, end - begin, z);
  }
}

// The candidates as RunPass reads them, with the caller's load function
// inlined into the pass.
template <typename LoadFn>
struct SampledCandidateView {
  uint64_t key_state;
  const Candidate* candidates;
  size_t n;
  const IdentityTable* table;
  LoadFn& load_fn;

  size_t size() const { return n; }
  bool eligible(size_t i) const { return candidates[i].IsEligible(); }
  uint32_t weight(size_t i) const { return candidates[i].weight; }
  void Hash(size_t begin, size_t end, uint64_t* z) const {
    HashRange(key_state, candidates, table, begin, end, z);
  }
  uint64_t load(size_t i) const { return static_cast<uint64_t>(load_fn(i)); }
};

}  // namespace poise::internal

namespace poise {

// Inline, as if written in the class.
template <typename LoadFn>
inline Result<Decision> BoundedLoadRendezvous::DecideWith(
    std::string_view key, const std::vector<Candidate>& candidates,
    const IdentityTable* table, LoadFn& load, DecisionScratch& scratch,
    const uint64_t* total_load, bool* sampled) const {
  const size_t n = candidates.size();
  if (n == 0) return PickError::kEmpty;
  if (!scratch.Fit(n)) {  // poise-core asks for eligibility first
    const bool any_eligible =
        std::any_of(candidates.begin(), candidates.end(),
                    [](const Candidate& c) { return c.IsEligible(); });
    return any_eligible ? PickError::kScratchCapacityExceeded
                        : PickError::kNoEligibleCandidates;
  }
  const KeyHash hash(key);
  internal::PassState pass;
  internal::RunPass<true>(
      internal::SampledCandidateView<LoadFn>{hash.state(), candidates.data(), n,
                                             table, load},
      scratch.Outputs(), pass);
  if (total_load != nullptr) {
    return DecideAfterPassWithTotal(hash, candidates, table, scratch, pass,
                                    *total_load, *sampled);
  }
  return DecideAfterPass(hash, candidates, table, scratch, pass);
}

}  // namespace poise

#endif  // POISE_INTERNAL_BOUNDED_DECIDE_H_
