// What the core reads of an IdentityTable beyond its public face (the SIMD
// kernels' view of a key row) and how it builds one from the identity
// store's rows. Internal: not installed.
#ifndef POISE_SRC_CORE_IDENTITY_TABLE_ACCESS_H_
#define POISE_SRC_CORE_IDENTITY_TABLE_ACCESS_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "poise/identity_table.h"

namespace poise::internal {

struct IdentityRow;  // src/core/identity_store.h

struct IdentityTableAccess {
  // What KeyRow::Mixed(i) is made of, for loops that hash many identities
  // at once: Mixed(i) == Mix64(row.key_state() * Powers(row)[i] +
  // Offsets(row)[i]), and Powers(row)[i] == CommonPower(row) for every i
  // unless that is 0 (the identities differ in length; a power of the odd
  // FNV prime is never 0).
  //
  // A loop that stores each z through a uint64_t* should read a KeyRow
  // rather than call IdentityTable::Mixed(): the store may alias the
  // table's size_t size_, so Mixed() would reload it every time.
  static const uint64_t* Powers(const IdentityTable::KeyRow& row) {
    return row.power_;
  }
  static const uint64_t* Offsets(const IdentityTable::KeyRow& row) {
    return row.row_;
  }
  static uint64_t CommonPower(const IdentityTable::KeyRow& row) {
    return row.common_power_;
  }

  // A table of `n` rows hashed ahead (each identity's p^m and D(l) in row
  // order), transposed; `keep` owns the rows' identities.
  static std::shared_ptr<const IdentityTable> FromRows(
      const IdentityRow* const* rows, size_t n,
      std::shared_ptr<const void> keep);
};

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_IDENTITY_TABLE_ACCESS_H_
