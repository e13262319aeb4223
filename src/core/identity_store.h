// The process-wide store of hashed identities behind
// poise::router's backend lists (one per gRPC channel).
//
// A channel's IdentityTable costs 2 KiB + 8 bytes per identity, and every
// channel of a process to the same service lists the same identities: 100
// channels to 1,000 backends held 100 identical tables (200 MiB), and every
// address change rehashed all 1,000 identities. The store keeps
//   - one row per identity (IdentityRow: p^m and D(l) for every l, in row
//     order), hashed the first time any list names it and freed when no
//     table uses it any more, and
//   - one table per distinct identity sequence, built from those rows (a
//     transposition, no hashing) and handed out to every list that names
//     the same identities in the same order; freed with its last holder.
// So a process hashes each identity once while any list holds it, and an
// update that changes one address of a list hashes that one identity and
// copies the other rows into the new table.
//
// Thread-safe: Share() takes one mutex, held while it hashes and builds (so
// concurrent updates to the same new list hash each identity once). Tables
// are immutable once handed out, and picks read them without a lock.
#ifndef POISE_SRC_CORE_IDENTITY_STORE_H_
#define POISE_SRC_CORE_IDENTITY_STORE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "poise/identity_table.h"
#include "src/core/weak_registry.h"

namespace poise::internal {

// One identity hashed on its own: what an IdentityTable keeps of it, with
// the 256 offsets in row order (a table holds them transposed).
struct IdentityRow {
  std::string identity;
  uint64_t power = 0;    // p^m, m = identity bytes + 1
  size_t users = 0;      // tables built from it; guarded by the store's mutex
  uint64_t offset[256];  // D(l) for l = 0..255
};

// Computes row->power and row->offset from `identity` (the kernel
// IdentityTable's constructors use: AVX-512 where the CPU has it).
void HashIdentityRow(std::string_view identity, IdentityRow* row);

// What a store holds and has done, for tests and measurements.
struct IdentityStoreCounts {
  size_t rows = 0;    // identities with a row alive
  size_t tables = 0;  // tables alive (or kept alive by a copy)
  // Since the store was created:
  uint64_t identities_hashed = 0;    // rows computed
  uint64_t tables_built = 0;         // tables transposed from rows
  uint64_t tables_shared = 0;        // Share() calls answered with a live table
  uint64_t table_bytes_written = 0;  // offsets and powers the builds wrote
};

class IdentityStore final {
 public:
  // The process's store, used by poise::router. Never destroyed, so tables
  // may be released at any time, also during exit.
  static IdentityStore& Global();

  // A store of its own (tests); it must outlive every table it hands out.
  IdentityStore() = default;
  IdentityStore(const IdentityStore&) = delete;
  IdentityStore& operator=(const IdentityStore&) = delete;

  // The table of `identities` in that order: the live one if a list of the
  // same sequence holds it, else built from the identities' rows (each
  // hashed first unless some live table has it). Its identity(i) views the
  // row's own copy. An empty list gives an empty table, not stored.
  std::shared_ptr<const IdentityTable> Share(
      const std::vector<std::string_view>& identities);

  IdentityStoreCounts counts() const;

 private:
  struct Hold;  // one table's rows
  struct HoldDeleter;
  struct SequenceHash {
    size_t operator()(const std::vector<IdentityRow*>& rows) const;
  };
  void Release(const Hold* hold);
  void ReleaseLocked(const Hold* hold);

  mutable std::mutex mu_;
  std::unordered_map<std::string_view, IdentityRow*> rows_;  // by identity
  // By row sequence; a table's rows stay alive while it is listed live.
  WeakRegistry<std::vector<IdentityRow*>, const IdentityTable, SequenceHash>
      tables_;
  size_t tables_alive_ = 0;     // Holds not yet released
  IdentityStoreCounts totals_;  // the since-created fields
};

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_IDENTITY_STORE_H_
