// Weighted rendezvous hashing and its bounded-load refinement.
//
// WeightedRendezvous gives every key a stable, weight-proportional preference
// order over backends. BoundedLoadRendezvous walks that order and takes the
// first backend whose sampled in-flight load is below its bound, so an idle
// cluster routes exactly like WeightedRendezvous and a hot owner spills to the
// key's next choice instead of melting.
#ifndef POISE_RENDEZVOUS_H_
#define POISE_RENDEZVOUS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "poise/hash.h"
#include "poise/identity_table.h"
#include "poise/internal/pass.h"

namespace poise {

// One backend as seen by a single decision. `identity` is borrowed.
struct Candidate {
  std::string_view identity;
  uint32_t weight = 1;   // a zero weight makes the candidate ineligible
  bool eligible = true;  // ineligible candidates are never hashed or sampled

  bool IsEligible() const { return eligible && weight != 0; }
};

enum class PickError : uint8_t {
  kEmpty,                 // no candidates at all
  kNoEligibleCandidates,  // candidates, but none eligible
  kWeightOverflow,        // eligible weights sum past UINT64_MAX
  kLoadOverflow,  // sampled loads (plus the new request) past UINT64_MAX
  kScratchCapacityExceeded,  // the sample buffer could not grow
  kTableMismatch,  // the IdentityTable has a different number of identities
};

// A stable, human-readable name for logs and statuses.
const char* ToString(PickError error);

// A value or a PickError; the core never throws.
template <typename T>
class Result final {
 public:
  // Implicit on purpose: `return value;` and `return PickError::k...;`.
  // NOLINTNEXTLINE(google-explicit-constructor)
  Result(T value) : v_(std::move(value)) {}
  // NOLINTNEXTLINE(google-explicit-constructor)
  Result(PickError error) : v_(error) {}

  bool ok() const { return v_.index() == 0; }
  const T& value() const { return std::get<0>(v_); }
  T& value() { return std::get<0>(v_); }
  PickError error() const { return std::get<1>(v_); }

 private:
  std::variant<T, PickError> v_;
};

// The position of one candidate in a key's preference order.
struct Rank {
  double score;  // -ln U / weight; smaller is better
  uint64_t z;    // the mixed hash; larger breaks score ties
  uint32_t weight;
  size_t index;  // position in the candidate list; earlier breaks the rest

  // The contract's total order: smaller score, then larger z, then larger
  // weight (duplicate identities), then the earlier entry.
  bool Precedes(const Rank& other) const {
    if (score != other.score) return score < other.score;
    if (z != other.z) return z > other.z;
    if (weight != other.weight) return weight > other.weight;
    return index < other.index;
  }
};

Rank RankOf(const KeyHash& key, const Candidate& candidate, size_t index);

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
  // retries, so simple rather than fast: O(size * (n mod eligible + 1))
  // exact scores, no allocation. `table` as for Pick (kTableMismatch).
  static Result<size_t> PickNth(std::string_view key,
                                const std::vector<Candidate>& candidates,
                                const IdentityTable& table, size_t n);
};

// An exact unsigned 128-bit integer: the type of a capacity, which is
// ceil(f (L + 1) w / (100 W)) with f < 2^32, L + 1 < 2^64 and w < 2^32, so
// the numerator and the quotient always fit (as in poise-core, which reports
// capacities as u128). __extension__ keeps -Wpedantic builds quiet.
__extension__ using UInt128 = unsigned __int128;

// The outcome of one bounded-load decision. Indices refer to the candidate
// list.
struct Decision {
  size_t affinity;         // the unconstrained weighted-rendezvous owner
  size_t selection;        // the first candidate in the owner's order with room
  bool spilled;            // selection != affinity
  uint64_t selected_load;  // the selection's sampled load
  UInt128 selected_capacity;  // its bound, exact
};

// Per-thread working memory of Decide: the sampled loads, the candidates'
// hashes and a list of indices (24 bytes per candidate). It grows to the
// largest candidate count seen and is then reused, so decisions stop
// allocating after warm-up. Not thread-safe: give each thread its own.
class DecisionScratch final {
 public:
  explicit DecisionScratch(size_t max_candidates = kUnlimited)
      : max_candidates_(max_candidates) {}

  static constexpr size_t kUnlimited = static_cast<size_t>(-1);

  // The largest candidate count served without allocating.
  size_t capacity() const {
    return std::min(
        {loads_.capacity(), hashes_.capacity(), survivors_.capacity()});
  }
  // Returns the retained memory to the allocator.
  void Release() {
    auto drop = [](auto& v) {
      v.clear();
      v.shrink_to_fit();
    };
    drop(loads_);
    drop(hashes_);
    drop(survivors_);
  }

 private:
  friend class BoundedLoadRendezvous;
  friend class PreparedCandidates;

  internal::PassOutputs Outputs() {
    return internal::PassOutputs{hashes_.data(), loads_.data()};
  }

  // Sizes every buffer for n candidates without throwing; false if they
  // could not grow. Within the capacity already held it never allocates.
  // survivors_ has one slot more: a branch-free listing may write one past
  // the last index it keeps (PreparedCandidates' walk).
  bool Fit(size_t n) {
    if (n > max_candidates_) return false;
    // Sized for n already (every decision but the first on a list).
    if (loads_.size() == n && hashes_.size() == n &&
        survivors_.size() == n + 1) {
      return true;
    }
    if (n > capacity()) {  // a failed attempt may grow some of them
      try {
        loads_.reserve(n);
        hashes_.reserve(n);
        survivors_.reserve(n + 1);
      } catch (const std::bad_alloc&) {
        return false;
      } catch (const std::length_error&) {
        return false;
      }
    }
    loads_.resize(n);
    hashes_.resize(n);
    survivors_.resize(n + 1);
    return true;
  }

  size_t max_candidates_;
  std::vector<uint64_t> loads_;    // the sampled loads, by index
  std::vector<uint64_t> hashes_;   // every candidate's z, by index
  std::vector<size_t> survivors_;  // see src/core/room_search.h
};

class BoundedLoadRendezvous final {
  friend class PreparedCandidates;  // DecideAfterPass after its own pass

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

  // The key's (n + 1)-th choice with room: Decide's selection for n = 0, and
  // for n > 0 the (n + 1)-th candidate in the key's order among those whose
  // load is below their capacity (the capacities of Decide, from the same
  // sampled loads), n taken modulo their number. `affinity` is the first
  // candidate overall, `spilled` is selection != affinity. For retries: each
  // eligible load sampled once into `scratch`, then O(size * (n mod with
  // room + 1)) exact scores, no allocation after the scratch's warm-up.
  // Errors as Decide's, plus kTableMismatch.
  template <typename LoadFn>
  Result<Decision> DecideNth(std::string_view key,
                             const std::vector<Candidate>& candidates,
                             const IdentityTable& table, LoadFn&& load,
                             size_t n, DecisionScratch& scratch) const {
    if (table.size() != candidates.size()) return PickError::kTableMismatch;
    if (!scratch.Fit(candidates.size())) {
      return PickError::kScratchCapacityExceeded;
    }
    for (size_t i = 0; i < candidates.size(); ++i) {
      scratch.loads_[i] = candidates[i].IsEligible() ? load(i) : 0;
    }
    return DecideNthSampled(key, candidates, table, scratch.loads_.data(), n);
  }

  // ceil(factor * (total_load + 1) * weight / (100 * total_weight)), exact.
  // Requires total_load < UINT64_MAX and 0 < weight <= total_weight.
  static UInt128 Capacity(uint32_t factor_percent, uint64_t total_load,
                          uint32_t weight, uint64_t total_weight);

  // Samples `load(i)` (any callable size_t -> uint64_t) exactly once for every
  // eligible candidate, then selects the first candidate in the key's
  // weighted-rendezvous order whose load is below its capacity. Thread-safe
  // for distinct scratches.
  template <typename LoadFn>
  Result<Decision> Decide(std::string_view key,
                          const std::vector<Candidate>& candidates,
                          LoadFn&& load, DecisionScratch& scratch) const {
    return DecideWith(key, candidates, nullptr, load, scratch);
  }

  // The same, with the identities' hashing precomputed (see
  // WeightedRendezvous::Pick with a table).
  template <typename LoadFn>
  Result<Decision> Decide(std::string_view key,
                          const std::vector<Candidate>& candidates,
                          const IdentityTable& table, LoadFn&& load,
                          DecisionScratch& scratch) const {
    if (table.size() != candidates.size()) return PickError::kTableMismatch;
    return DecideWith(key, candidates, &table, load, scratch);
  }

 private:
  // Decide, with or without a table: the pass that hashes, groups and
  // samples (a template, so the caller's load function is inlined into it),
  // then DecideAfterPass. Defined in poise/internal/bounded_decide.h.
  // With `total_load`, every bound is computed from *total_load instead of
  // the sum of the sampled loads (DecideAfterPassWithTotal).
  template <typename LoadFn>
  Result<Decision> DecideWith(std::string_view key,
                              const std::vector<Candidate>& candidates,
                              const IdentityTable* table, LoadFn& load,
                              DecisionScratch& scratch,
                              const uint64_t* total_load = nullptr,
                              bool* sampled = nullptr) const;

  // The scoring half of Decide, out of line so the floating-point contract
  // is compiled once, with the contract's flags.
  Result<Decision> DecideAfterPass(const KeyHash& hash,
                                   const std::vector<Candidate>& candidates,
                                   const IdentityTable* table,
                                   DecisionScratch& scratch,
                                   internal::PassState& pass) const;

  // DecideAfterPass with every bound computed from `total_load` (T) instead
  // of the sum of the loads the pass sampled: the selection is the first
  // candidate in the key's order whose load is below Capacity(factor, T, w,
  // W) (PreparedCandidates::RouteWithTotal's rule). Errors: no eligible
  // candidate, weights summing past 2^64 - 1, then T = 2^64 - 1
  // (kLoadOverflow); the loads' sum is not checked. When no candidate has
  // room under T, `sampled` is set and the answer is DecideAfterPass's.
  Result<Decision> DecideAfterPassWithTotal(
      const KeyHash& hash, const std::vector<Candidate>& candidates,
      const IdentityTable* table, DecisionScratch& scratch,
      internal::PassState& pass, uint64_t total_load, bool& sampled) const;

  // DecideNth after its loads are sampled (`loads[i]` for eligible i).
  Result<Decision> DecideNthSampled(std::string_view key,
                                    const std::vector<Candidate>& candidates,
                                    const IdentityTable& table,
                                    const uint64_t* loads, size_t n) const;

  explicit BoundedLoadRendezvous(uint32_t factor_percent)
      : factor_percent_(factor_percent) {}

  uint32_t factor_percent_ = kDefaultFactorPercent;
};

}  // namespace poise

// The templates above, defined apart (not API).
#include "poise/internal/bounded_decide.h"  // IWYU pragma: export

#endif  // POISE_RENDEZVOUS_H_
