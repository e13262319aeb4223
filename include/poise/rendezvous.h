// Weighted rendezvous hashing and its bounded-load refinement.
//
// WeightedRendezvous gives every key a stable, weight-proportional preference
// order over backends. BoundedLoadRendezvous walks that order and takes the
// first backend whose in-flight load is below its bound (poise/bound.h), so
// an idle cluster routes exactly like WeightedRendezvous and a hot owner
// spills to the key's next choice instead of melting.
#ifndef POISE_RENDEZVOUS_H_
#define POISE_RENDEZVOUS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "poise/bound.h"
#include "poise/hash.h"
#include "poise/identity_table.h"
#include "poise/types.h"

namespace poise {

class WeightedRendezvous final {
 public:
  // The index of the key's owner among the eligible candidates. O(n), no
  // allocation.
  static Result<size_t> Pick(std::string_view key,
                             const std::vector<Candidate>& candidates);

  // The same, with the identities' hashing precomputed: `table` must have
  // been built from the identities of `candidates`, in order (weights and
  // eligibility are read from `candidates`). kTableMismatch when the sizes
  // differ.
  static Result<size_t> Pick(std::string_view key,
                             const std::vector<Candidate>& candidates,
                             const IdentityTable& table);

  // Every eligible candidate, best first (for tools and tests; allocates).
  static Result<std::vector<Rank>> Ranking(
      std::string_view key, const std::vector<Candidate>& candidates);

  // The key's (n + 1)-th choice among the eligible candidates: n = 0 is
  // Pick's owner, n = 1 the candidate Ranking lists second, and n wraps
  // around (it is taken modulo the number of eligible candidates). For
  // retries: one hashing pass and n + 1 exact scores per weight for n below
  // 7 and at most 8 weights, else O(size * (n + 1)) exact scores; no
  // allocation. `table` as for Pick (kTableMismatch).
  static Result<size_t> PickNth(std::string_view key,
                                const std::vector<Candidate>& candidates,
                                const IdentityTable& table, size_t n);
};

class BoundedLoadRendezvous final {
 public:
  static constexpr uint32_t kDefaultFactorPercent = 150;
  static constexpr uint32_t kMinFactorPercent = 100;

  BoundedLoadRendezvous() = default;

  // The policy for a balance factor in percent; none below kMinFactorPercent,
  // where the bounds could leave no candidate with room.
  static std::optional<BoundedLoadRendezvous> Create(uint32_t factor_percent) {
    if (factor_percent < kMinFactorPercent) return std::nullopt;
    return BoundedLoadRendezvous(factor_percent);
  }

  uint32_t factor_percent() const { return factor_percent_; }

  // The bound of a candidate of `weight` when the bounds count `total_load`
  // calls and the eligible weights sum to `total_weight` (Bound's
  // requirements apply).
  Bound BoundFor(uint64_t total_load, uint32_t weight,
                 uint64_t total_weight) const {
    return {factor_percent_, total_load, weight, total_weight};
  }

  // Bound(...).Capacity(): ceil(factor * (total_load + 1) * weight /
  // (100 * total_weight)), exact. Requires total_load < UINT64_MAX and
  // 0 < total_weight.
  static UInt128 Capacity(uint32_t factor_percent, uint64_t total_load,
                          uint32_t weight, uint64_t total_weight) {
    return Bound(factor_percent, total_load, weight, total_weight).Capacity();
  }

  // Reads `load(i)` (any callable size_t -> uint64_t) exactly once for every
  // eligible candidate, then selects the first candidate in the key's
  // weighted-rendezvous order whose load is below its bound, L being the
  // loads' sum. Thread-safe for distinct scratches.
  template <typename LoadFn>
  Result<Decision> Decide(std::string_view key,
                          const std::vector<Candidate>& candidates,
                          LoadFn&& load, DecisionScratch& scratch) const {
    if (const auto error = ReadLoads(candidates, load, scratch)) return *error;
    return DecideOnLoads(key, candidates, nullptr, scratch.loads(), scratch);
  }

  // The same, with the identities' hashing precomputed (see
  // WeightedRendezvous::Pick with a table).
  template <typename LoadFn>
  Result<Decision> Decide(std::string_view key,
                          const std::vector<Candidate>& candidates,
                          const IdentityTable& table, LoadFn&& load,
                          DecisionScratch& scratch) const {
    if (table.size() != candidates.size()) return PickError::kTableMismatch;
    if (const auto error = ReadLoads(candidates, load, scratch)) return *error;
    return DecideOnLoads(key, candidates, &table, scratch.loads(), scratch);
  }

  // The key's (n + 1)-th choice with room: Decide's selection for n = 0, and
  // for n > 0 the (n + 1)-th candidate in the key's order among those whose
  // load is below their bound (Decide's bounds, from the same loads), n
  // taken modulo their number. `affinity` is the first candidate overall,
  // `spilled` is selection != affinity. For retries: each eligible load read
  // once into `scratch`, then PickNth's cost, n counted among those with room.
  // Errors as Decide's, plus kTableMismatch.
  template <typename LoadFn>
  Result<Decision> DecideNth(std::string_view key,
                             const std::vector<Candidate>& candidates,
                             const IdentityTable& table, LoadFn&& load,
                             size_t n, DecisionScratch& scratch) const {
    if (table.size() != candidates.size()) return PickError::kTableMismatch;
    if (candidates.empty()) return PickError::kEmpty;
    if (const auto error = ReadLoads(candidates, load, scratch)) return *error;
    return DecideNthOnLoads(key, candidates, table, scratch.loads(), n);
  }

  // Decide on loads read already: `loads[i]` for every eligible i (it may
  // be the scratch's own). `table` may be null (the identities are hashed).
  Result<Decision> DecideOnLoads(std::string_view key,
                                 const std::vector<Candidate>& candidates,
                                 const IdentityTable* table,
                                 const uint64_t* loads,
                                 DecisionScratch& scratch) const;

  // DecideNth on loads read already.
  Result<Decision> DecideNthOnLoads(std::string_view key,
                                    const std::vector<Candidate>& candidates,
                                    const IdentityTable& table,
                                    const uint64_t* loads, size_t n) const;

 private:
  // Sizes the scratch and reads every eligible load into it, once. The
  // errors poise-core reports first: no candidates, none eligible.
  template <typename LoadFn>
  static std::optional<PickError> ReadLoads(
      const std::vector<Candidate>& candidates, LoadFn& load,
      DecisionScratch& scratch) {
    const size_t n = candidates.size();
    if (n == 0) return PickError::kEmpty;
    bool any_eligible = false;
    if (scratch.Fit(n)) {
      uint64_t* const loads = scratch.loads();
      for (size_t i = 0; i < n; ++i) {
        if (!candidates[i].IsEligible()) continue;
        any_eligible = true;
        loads[i] = static_cast<uint64_t>(load(i));
      }
      if (any_eligible) return std::nullopt;
      return PickError::kNoEligibleCandidates;
    }
    for (const Candidate& c : candidates) any_eligible |= c.IsEligible();
    return any_eligible ? PickError::kScratchCapacityExceeded
                        : PickError::kNoEligibleCandidates;
  }

  explicit BoundedLoadRendezvous(uint32_t factor_percent)
      : factor_percent_(factor_percent) {}

  uint32_t factor_percent_ = kDefaultFactorPercent;
};

}  // namespace poise

#endif  // POISE_RENDEZVOUS_H_
