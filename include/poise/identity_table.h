// The per-identity half of the hash contract, computed once per backend list.
//
// A candidate's mixed hash is z = Mix64(FNV-1a over key-state ‖ identity ‖
// 0xFF), and the FNV walk over the identity is the bulk of a pick's work. It
// can be moved out of the pick because of how an FNV-1a step treats the low
// byte. One step is h' = (h ^ b) * p (mod 2^64). With l = h mod 256,
//   h ^ b = h + d,  d = (l ^ b) - l  (a small signed integer),
// so h' = h * p + d * p, and the low byte of h' is ((l ^ b) * p) mod 256: it
// depends on l and b alone. Over the m = |identity| + 1 bytes of one
// candidate, the d's therefore depend only on the key state's low byte, and
//   FNV(h) = h * p^m + D(h mod 256),   D(l) = FNV(l) - l * p^m   (mod 2^64).
// The table keeps p^m per identity and D(l) for all 256 values of l, so a pick
// hashes a candidate with one multiply-add and one load, bit for bit the same
// as the contract (the core's tests check it against KeyHash::Mixed on
// millions of random keys and identities).
//
// Cost: 2 KiB + 8 bytes per identity, built in O(256 * total identity bytes);
// build it when the backend list changes and share it (it is immutable, so
// concurrent picks may read it) across the snapshots of that list. The
// gRPC policies get theirs from a process-wide store instead: one table per
// distinct identity sequence, built from rows hashed once per identity.
#ifndef POISE_IDENTITY_TABLE_H_
#define POISE_IDENTITY_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "poise/hash.h"

namespace poise {

struct Candidate;

namespace internal {
struct IdentityTableAccess;  // the core's own reads and builds
}  // namespace internal

class IdentityTable final {
 public:
  IdentityTable() = default;

  // Prepares every identity in order (eligible or not: eligibility may change
  // between decisions, identities may not).
  explicit IdentityTable(const std::vector<std::string_view>& identities);
  explicit IdentityTable(const std::vector<Candidate>& candidates);

  size_t size() const { return size_; }
  // Identity i, as the table holds it: a copy of the constructor's (or the
  // shared row's) bytes, valid while the table or a copy of it lives.
  std::string_view identity(size_t i) const { return identities_[i]; }
  size_t memory_bytes() const {
    return (power_.capacity() + 256 * size_) * sizeof(uint64_t);
  }

  // KeyHash::Mixed(identity i), from the table.
  uint64_t Mixed(uint64_t key_state, size_t i) const {
    return Mix64(key_state * power_[i] + Row(key_state)[i]);
  }

  // Mixed(key_state, i) for every i, with the key's row located once: for
  // a loop over the identities.
  class KeyRow {
   public:
    uint64_t Mixed(size_t i) const {
      return Mix64(key_state_ * power_[i] + row_[i]);
    }
    uint64_t key_state() const { return key_state_; }

   private:
    friend class IdentityTable;
    friend struct internal::IdentityTableAccess;
    KeyRow(uint64_t key_state, const uint64_t* power, const uint64_t* row,
           uint64_t common_power)
        : key_state_(key_state),
          power_(power),
          row_(row),
          common_power_(common_power) {}
    uint64_t key_state_;
    const uint64_t* power_;
    const uint64_t* row_;
    uint64_t common_power_;
  };
  KeyRow ForKey(uint64_t key_state) const {
    return {key_state, power_.data(), Row(key_state), common_power_};
  }

  // z[k] = Mixed(key_state, begin + k) for k < end - begin.
  void MixedRange(uint64_t key_state, size_t begin, size_t end,
                  uint64_t* z) const {
    const uint64_t* row = Row(key_state);
    for (size_t i = begin; i < end; ++i) {
      z[i - begin] = Mix64(key_state * power_[i] + row[i]);
    }
  }

 private:
  friend struct internal::IdentityTableAccess;
  void SetCommonPower();

  const uint64_t* Row(uint64_t key_state) const {
    return offset_.get() + (key_state & 0xff) * size_;
  }

  size_t size_ = 0;
  std::vector<uint64_t> power_;  // p^m, m = identity bytes + 1
  uint64_t common_power_ = 0;    // every p^m when all are equal, else 0
  // D(l) for identity i at [l * size_ + i]. Not a vector: a table built
  // from shared rows writes every element once and should not zero 2 KiB
  // per identity first. Immutable, so copies share it.
  std::shared_ptr<const uint64_t[]> offset_;
  // Views into what keep_ owns: the constructor's identities copied into
  // one buffer, or the shared rows. Shared, so a copy of the table keeps
  // its views valid.
  std::vector<std::string_view> identities_;
  std::shared_ptr<const void> keep_;
};

}  // namespace poise

#endif  // POISE_IDENTITY_TABLE_H_
