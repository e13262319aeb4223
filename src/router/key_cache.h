// A cache of key orders: for a routing key, the first backends of its order
// (its owner and next choices, the contract's K5), so that a key seen again
// is routed without hashing every backend (src/router/picker.h, "The key
// cache").
//
// An order depends only on the key, the backends' identities in list order
// and their weights: not on their states or loads. So one cache serves every
// picker of a list (a channel builds a new picker at every connectivity
// change) and every channel whose list has the same identity table and the
// same weights (ShareKeyOrderCache). It goes with the last picker holding
// it, and a list with other identities or weights gets another cache: a
// prefix is never read for a list it was not computed for.
//
// Layout: sets of kWays slots of 64 bytes, each one key (up to kMaxKeyBytes
// bytes, inline: a hit compares every byte, not a hash) and its prefix of
// KeyOrderPrefix::kCapacity backend indices (16 bits each); per set a 64-bit
// word of 15-bit tags with a reference bit each, so a lookup reads the slot
// of a matching tag only. Admission: a missed key is inserted only when it
// was missed recently (a doorkeeper: one 32-bit key signature per two
// entries; a miss writes the key's at its two places), so a key seen once
// evicts nothing and costs no prefix. Eviction: CLOCK within the set (a slot
// hit since the set's last sweep is kept). Memory: kBytesPerEntry (64 + 2 + 2)
// bytes per entry: 1.06 MiB at the default 16,384 entries (KeyCacheConfig,
// src/router/config.h); the slots' pages are the kernel's zero pages until
// an entry is written into them, so an idle cache holds only the tags and
// the doorkeeper's signatures (4 of the 68 bytes per entry).
//
// Lock-free, for pickers called from many threads: every slot is a seqlock.
// A writer takes a slot by a compare-and-swap of its version to odd (the
// loser of a race skips its insert), writes it and publishes the next even
// version; a reader copies the slot and keeps the copy only if the version
// was even and unchanged. Every field is an atomic, its words written with
// release and read with acquire (plain moves on x86-64), so no fence is
// needed and there is no data race.
//
// Adaptive lookups: a thread whose last kWindow lookups on a cache found or
// admitted fewer than kWindowUsefulToStay of their keys looks up only one key
// in kBypassStride there (the others are picked as without a cache) until a
// window of its lookups does that many again; so a stream of distinct keys
// pays about 1/kBypassStride of a lookup per pick.
#ifndef POISE_SRC_ROUTER_KEY_CACHE_H_
#define POISE_SRC_ROUTER_KEY_CACHE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "poise/identity_table.h"

namespace poise::router {

// A key's first backends in its order, by index into the list: the owner
// over every backend first.
struct KeyOrderPrefix {
  static constexpr size_t kCapacity = 8;
  uint16_t index[kCapacity];
  size_t size = 0;
};

class KeyOrderCache final {
 public:
  static constexpr size_t kWays = 4;
  static constexpr size_t kMaxKeyBytes = 40;
  // Indices are 16 bits: lists of at most this many backends.
  static constexpr size_t kMaxBackends = 65536;
  static constexpr size_t kBytesPerEntry = 64 + 2 + 2;
  // The adaptive lookups (above).
  static constexpr uint32_t kWindow = 64;
  static constexpr uint32_t kWindowUsefulToStay = 4;
  static constexpr uint32_t kBypassStride = 256;

  // At least kWays entries; rounded up to a multiple of kWays.
  explicit KeyOrderCache(size_t entries);
  KeyOrderCache(const KeyOrderCache&) = delete;
  KeyOrderCache& operator=(const KeyOrderCache&) = delete;
  ~KeyOrderCache();

  enum class Lookup : uint8_t {
    kHit,    // *prefix is the key's
    kAdmit,  // a miss, of a key missed recently: Insert() its prefix
    kMiss,   // a miss; also a key past kMaxKeyBytes, or a bypassed lookup
  };
  // Inline: a bypassed lookup costs a few instructions in the pick.
  Lookup Find(std::string_view key, KeyOrderPrefix* prefix) {
    LookupRecord& record = this_threads_record;
    if (record.cache == id_ && record.bypassed &&
        ++record.picks % kBypassStride != 0) {
      return Lookup::kMiss;
    }
    return LookUp(key, prefix, record);
  }

  // Stores `prefix` (1 to kCapacity indices) for `key` (at most
  // kMaxKeyBytes: longer keys are not stored). A concurrent insert into the
  // same slot wins; this one is then dropped.
  void Insert(std::string_view key, const KeyOrderPrefix& prefix);

  size_t entries() const { return sets_ * kWays; }
  size_t memory_bytes() const;

 private:
  struct Slot;
  struct Probe;
  Probe ProbeOf(std::string_view key) const;
  static bool ReadSlot(const Slot& slot, const Probe& probe,
                       KeyOrderPrefix* prefix);
  // The adaptive lookups: one thread's recent lookups on one cache, and what
  // a lookup did (found or admitted the key: useful).
  struct LookupRecord {
    uint64_t cache = 0;  // the id of the cache looked up last
    bool bypassed = false;
    uint32_t picks = 0;  // while bypassed
    uint32_t looked = 0;
    uint32_t useful = 0;  // hits and admitted keys
  };
  static thread_local LookupRecord this_threads_record;
  Lookup LookUp(std::string_view key, KeyOrderPrefix* prefix,
                LookupRecord& record);
  static void RecordLookup(LookupRecord& record, bool useful);

  const uint64_t id_;  // names it in its threads' lookup records
  const size_t sets_;
  const size_t door_size_;
  static Slot* MapSlots(size_t count);
  struct UnmapSlots {
    size_t count;
    void operator()(Slot* slots) const;
  };
  const std::unique_ptr<Slot[], UnmapSlots> slots_;  // sets_ * kWays
  // By set: kWays x (a 15-bit tag, 0 when empty; the reference bit).
  const std::unique_ptr<std::atomic<uint64_t>[]> tags_;
  const std::unique_ptr<std::atomic<uint32_t>[]> door_;  // key signatures
};

// The process's cache of `entries` entries for lists of `table`'s identities
// in that order with these `weights` (by list index): the live one if a
// picker of such a list holds it, else a new one. Thread-safe.
std::shared_ptr<KeyOrderCache> ShareKeyOrderCache(
    std::shared_ptr<const IdentityTable> table, std::vector<uint32_t> weights,
    size_t entries);

// How many caches ShareKeyOrderCache() has alive (for tests).
size_t LiveKeyOrderCaches();

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_KEY_CACHE_H_
