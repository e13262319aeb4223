// The vocabulary the core's algorithms share: what a decision is given
// (Candidate), what it answers (Result, Decision, Rank), how it fails
// (PickError) and the working memory it reuses (DecisionScratch). Nothing
// here computes a route; poise/rendezvous.h does.
#ifndef POISE_TYPES_H_
#define POISE_TYPES_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace poise {

class BoundedLoadRendezvous;
namespace internal {
struct ScratchAccess;  // src/core/scratch_access.h
}  // namespace internal

// An exact unsigned 128-bit integer: the type of a capacity (poise/bound.h).
// __extension__ keeps -Wpedantic builds quiet.
__extension__ using UInt128 = unsigned __int128;

// One backend as seen by a single decision. `identity` is borrowed.
struct Candidate {
  std::string_view identity;
  uint32_t weight = 1;   // a zero weight makes the candidate ineligible
  bool eligible = true;  // ineligible candidates are never hashed or read

  bool IsEligible() const { return eligible && weight != 0; }
};

enum class PickError : uint8_t {
  kEmpty,                    // no candidates at all
  kNoEligibleCandidates,     // candidates, but none eligible
  kWeightOverflow,           // eligible weights sum past UINT64_MAX
  kLoadOverflow,             // the loads (plus the new request) past UINT64_MAX
  kScratchCapacityExceeded,  // the scratch could not grow
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

  // The contract's total order (K5): smaller score, then larger z, then
  // larger weight (duplicate identities), then the earlier entry.
  bool Precedes(const Rank& other) const {
    if (score != other.score) return score < other.score;
    if (z != other.z) return z > other.z;
    if (weight != other.weight) return weight > other.weight;
    return index < other.index;
  }
};

// The outcome of one bounded-load decision. Indices refer to the candidate
// list.
struct Decision {
  size_t affinity;         // the unconstrained weighted-rendezvous owner
  size_t selection;        // the first candidate in the owner's order with room
  bool spilled;            // selection != affinity
  uint64_t selected_load;  // the selection's load
  UInt128 selected_capacity;  // its bound, exact
};

// Per-thread working memory of the bounded decisions: every candidate's
// load and hash, and a list of indices. It grows to the largest candidate
// count seen and is then reused, so decisions stop allocating after
// warm-up. Not thread-safe: give each thread its own.
class DecisionScratch final {
 public:
  explicit DecisionScratch(size_t max_candidates = kUnlimited)
      : max_candidates_(max_candidates) {}

  static constexpr size_t kUnlimited = static_cast<size_t>(-1);

  // The largest candidate count served without allocating.
  size_t capacity() const {
    return std::min({loads_.capacity(), hashes_.capacity(), list_.capacity(),
                     marks_.capacity() * 64});
  }
  // Returns the retained memory to the allocator.
  void Release() {
    auto drop = [](auto& v) {
      v.clear();
      v.shrink_to_fit();
    };
    drop(loads_);
    drop(hashes_);
    drop(list_);
    drop(marks_);
  }

 private:
  friend class BoundedLoadRendezvous;     // reads the loads into it
  friend struct internal::ScratchAccess;  // the core's decisions

  // Sizes the buffers for n candidates without throwing; false if they could
  // not grow (or n is past the maximum). Within the capacity already held it
  // never allocates. The index list has one slot more than n: a branch-free
  // listing may write one past the last index it keeps.
  bool Fit(size_t n) {
    if (n > max_candidates_) return false;
    // Every decision but the first on a list. The four are resized together
    // (or emptied together, by Release or a move), so the list's size says
    // what they were sized for; an n of kUnlimited could never be held.
    if (n != kUnlimited && list_.size() == n + 1) return true;
    const size_t words = n / 64 + 1;
    if (n > capacity()) {  // a failed attempt may grow some of them
      try {
        loads_.reserve(n);
        hashes_.reserve(n);
        list_.reserve(n + 1);
        marks_.reserve(words);
      } catch (const std::bad_alloc&) {
        return false;
      } catch (const std::length_error&) {
        return false;
      }
    }
    loads_.resize(n);
    hashes_.resize(n);
    list_.resize(n + 1);
    marks_.resize(words);
    return true;
  }

  // The buffers, sized by Fit(n): loads and hashes by candidate index, a
  // list of indices (n + 1 entries), and a bit per candidate (n / 64 + 1
  // words).
  uint64_t* loads() { return loads_.data(); }
  uint64_t* hashes() { return hashes_.data(); }
  size_t* list() { return list_.data(); }
  uint64_t* marks() { return marks_.data(); }

  size_t max_candidates_;
  std::vector<uint64_t> loads_;
  std::vector<uint64_t> hashes_;
  std::vector<size_t> list_;
  std::vector<uint64_t> marks_;
};

}  // namespace poise

#endif  // POISE_TYPES_H_
