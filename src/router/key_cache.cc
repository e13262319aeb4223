#include "src/router/key_cache.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <random>
#include <type_traits>
#include <utility>

#include "absl/hash/hash.h"
#include "poise/hash.h"
#include "poise/types.h"
#include "src/core/weak_registry.h"

namespace poise::router {

// ---------------------------------------------------------------------------
// Slots

// One entry. header: the version (bits 0-31, odd while a writer has the
// slot), the key's length in bytes (32-39) and the prefix's size (40-47; 0:
// empty).
// Trivial to construct: the slots live in zero-filled pages (below), every
// word 0 until written.
struct alignas(64) KeyOrderCache::Slot {
  static constexpr size_t kKeyWords = kMaxKeyBytes / 8;
  static constexpr size_t kPrefixWords =
      KeyOrderPrefix::kCapacity * sizeof(uint16_t) / 8;

  std::atomic<uint64_t> header;
  std::atomic<uint64_t> prefix[kPrefixWords];
  std::atomic<uint64_t> key[kKeyWords];

  static uint64_t Header(uint64_t version, size_t key_bytes,
                         size_t prefix_size) {
    return (version & 0xFFFF'FFFFu) | (uint64_t{key_bytes} << 32) |
           (uint64_t{prefix_size} << 40);
  }
  static size_t KeyBytes(uint64_t header) { return (header >> 32) & 0xFF; }
  static size_t PrefixSize(uint64_t header) { return (header >> 40) & 0xFF; }
};

// Where a key would be: its bytes as zero-padded words, its hash, its set,
// its tag in the set's word and its doorkeeper signature.
struct KeyOrderCache::Probe {
  bool cacheable;
  size_t bytes;
  uint64_t words[Slot::kKeyWords];
  size_t set;
  uint16_t tag;  // 1..0x7FFF
  uint64_t hash;
  uint32_t signature;  // never 0, which stands for none
};

namespace {

constexpr uint16_t kTagMask = 0x7FFF;
constexpr uint16_t kReferenced = 0x8000;

uint16_t WayOf(uint64_t tags, size_t way) {
  return static_cast<uint16_t>(tags >> (16 * way));
}

// A fair index in [0, n) from 64 random bits (multiply and keep the high
// half: no division).
size_t IndexIn(uint64_t bits, size_t n) {
  return static_cast<size_t>((UInt128{bits} * n) >> 64);
}

// Random per process, so keys chosen to meet in one set of one process do
// not in another.
uint64_t ProcessSeed() {
  static const uint64_t seed = [] {
    try {
      std::random_device device;
      return (uint64_t{device()} << 32) ^ device();
    } catch (...) {
      return reinterpret_cast<uintptr_t>(&seed) ^ 0x9E3779B97F4A7C15u;
    }
  }();
  return seed;
}

// The hash of a key's words (zero-padded) and length: multiply-xorshift
// rounds, then SplitMix64's finaliser (Mix64).
uint64_t HashOfWords(const uint64_t* words, size_t bytes) {
  uint64_t h = ProcessSeed() ^ (bytes * 0x9E3779B97F4A7C15u);
  for (size_t w = 0; w < (bytes + 7) / 8; ++w) {
    h = (h ^ words[w]) * 0xBF58476D1CE4E5B9u;
    h ^= h >> 31;
  }
  return Mix64(h);
}

}  // namespace

namespace {
// Ids for the lookup records: an address may be a later cache's.
std::atomic<uint64_t> next_cache_id{1};
}  // namespace

// The slots in pages of zeros from the kernel, mapped on first use: a
// cache costs the memory of the entries it has written (as a rule every
// page, once the cache is warm), not its size.
KeyOrderCache::Slot* KeyOrderCache::MapSlots(size_t count) {
  static_assert(sizeof(Slot) == 64, "one cache line per entry");
  static_assert(std::is_trivially_default_constructible_v<Slot> &&
                    std::is_trivially_destructible_v<Slot>,
                "slots are the zero pages' bytes");
  void* pages = mmap(nullptr, count * sizeof(Slot), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (pages == MAP_FAILED) throw std::bad_alloc();
  return new (pages) Slot[count];  // no initialisation: they are zeros
}

void KeyOrderCache::UnmapSlots::operator()(Slot* slots) const {
  munmap(slots, count * sizeof(Slot));
}

KeyOrderCache::KeyOrderCache(size_t entries)
    : id_(next_cache_id.fetch_add(1, std::memory_order_relaxed)),
      sets_(std::max<size_t>(1, (entries + kWays - 1) / kWays)),
      door_size_(sets_ * kWays / 2),
      slots_(MapSlots(sets_ * kWays), UnmapSlots{sets_ * kWays}),
      tags_(new std::atomic<uint64_t>[sets_]()),
      door_(new std::atomic<uint32_t>[door_size_]()) {}

KeyOrderCache::~KeyOrderCache() = default;

size_t KeyOrderCache::memory_bytes() const {
  // Every page counted, written or not.
  return sizeof(*this) + sets_ * kWays * sizeof(Slot) +
         sets_ * sizeof(uint64_t) + door_size_ * sizeof(uint32_t);
}

KeyOrderCache::Probe KeyOrderCache::ProbeOf(std::string_view key) const {
  Probe p{};
  p.cacheable = key.size() <= kMaxKeyBytes;
  if (!p.cacheable) return p;
  p.bytes = key.size();
  if (!key.empty()) std::memcpy(p.words, key.data(), key.size());
  const uint64_t h = HashOfWords(p.words, key.size());
  p.set = IndexIn(h, sets_);
  const auto tag = static_cast<uint16_t>(h & kTagMask);
  p.tag = tag != 0 ? tag : uint16_t{1};
  p.hash = h;
  p.signature = static_cast<uint32_t>(h >> 15) | 1u;
  return p;
}

bool KeyOrderCache::ReadSlot(const Slot& slot, const Probe& probe,
                             KeyOrderPrefix* prefix) {
  const uint64_t header = slot.header.load(std::memory_order_acquire);
  if ((header & 1) != 0 || Slot::KeyBytes(header) != probe.bytes) return false;
  const size_t size = Slot::PrefixSize(header);
  if (size == 0 || size > KeyOrderPrefix::kCapacity) return false;
  // Acquire loads (plain moves on x86-64): a word written after the
  // writer took the slot makes the version check below see it taken.
  uint64_t words[Slot::kKeyWords];
  uint64_t order[Slot::kPrefixWords];
  for (size_t w = 0; w < Slot::kKeyWords; ++w) {
    words[w] = slot.key[w].load(std::memory_order_acquire);
  }
  for (size_t w = 0; w < Slot::kPrefixWords; ++w) {
    order[w] = slot.prefix[w].load(std::memory_order_acquire);
  }
  // The copy is the slot's only if no writer took it meanwhile.
  if (slot.header.load(std::memory_order_relaxed) != header) return false;
  if (std::memcmp(words, probe.words, sizeof(words)) != 0) return false;
  std::memcpy(prefix->index, order, sizeof(order));
  prefix->size = size;
  return true;
}

// ---------------------------------------------------------------------------
// The adaptive lookups

thread_local KeyOrderCache::LookupRecord KeyOrderCache::this_threads_record;

void KeyOrderCache::RecordLookup(LookupRecord& r, bool useful) {
  r.useful += useful ? 1 : 0;
  if (++r.looked < kWindow) return;
  r.bypassed = r.useful < kWindowUsefulToStay;
  r.looked = r.useful = 0;
}

// ---------------------------------------------------------------------------
// Lookups and inserts

KeyOrderCache::Lookup KeyOrderCache::LookUp(std::string_view key,
                                            KeyOrderPrefix* prefix,
                                            LookupRecord& record) {
  if (record.cache != id_) record = LookupRecord{id_};
  const Probe p = ProbeOf(key);
  if (!p.cacheable) return Lookup::kMiss;
  std::atomic<uint64_t>& set_tags = tags_[p.set];
  const uint64_t tags = set_tags.load(std::memory_order_relaxed);
  for (size_t way = 0; way < kWays; ++way) {
    const uint16_t t = WayOf(tags, way);
    if ((t & kTagMask) != p.tag) continue;
    if (!ReadSlot(slots_[p.set * kWays + way], p, prefix)) continue;
    if ((t & kReferenced) == 0) {
      set_tags.fetch_or(uint64_t{kReferenced} << (16 * way),
                        std::memory_order_relaxed);
    }
    RecordLookup(record, true);
    return Lookup::kHit;
  }
  // The doorkeeper admits a key whose signature one of its two places still
  // holds from its last miss (two: keys that take turns at one place still
  // get in).
  std::atomic<uint32_t>& first =
      door_[IndexIn((p.hash << 32) | (p.hash >> 32), door_size_)];
  std::atomic<uint32_t>& second =
      door_[IndexIn((p.hash << 16) | (p.hash >> 48), door_size_)];
  const bool admit = first.load(std::memory_order_relaxed) == p.signature ||
                     second.load(std::memory_order_relaxed) == p.signature;
  if (!admit) {
    first.store(p.signature, std::memory_order_relaxed);
    second.store(p.signature, std::memory_order_relaxed);
  }
  RecordLookup(record, admit);
  return admit ? Lookup::kAdmit : Lookup::kMiss;
}

void KeyOrderCache::Insert(std::string_view key, const KeyOrderPrefix& prefix) {
  const Probe p = ProbeOf(key);
  if (!p.cacheable || prefix.size == 0 ||
      prefix.size > KeyOrderPrefix::kCapacity) {
    return;
  }
  std::atomic<uint64_t>& set_tags = tags_[p.set];
  const uint64_t tags = set_tags.load(std::memory_order_relaxed);
  // The way of the key's tag (the key's own entry, as a rule), else CLOCK:
  // an empty way, else one not referenced since the last sweep, else (all
  // referenced) a sweep: every bit cleared, the way by the hash.
  size_t way = kWays;
  for (size_t w = 0; w < kWays && way == kWays; ++w) {
    if ((WayOf(tags, w) & kTagMask) == p.tag) way = w;
  }
  for (size_t w = 0; w < kWays && way == kWays; ++w) {
    if ((WayOf(tags, w) & kTagMask) == 0) way = w;
  }
  for (size_t w = 0; w < kWays && way == kWays; ++w) {
    if ((WayOf(tags, w) & kReferenced) == 0) way = w;
  }
  const bool sweep = way == kWays;
  if (sweep) way = p.signature % kWays;

  Slot& slot = slots_[p.set * kWays + way];
  uint64_t header = slot.header.load(std::memory_order_relaxed);
  if ((header & 1) != 0 || !slot.header.compare_exchange_strong(
                               header, header + 1, std::memory_order_relaxed)) {
    return;  // another writer has the slot
  }
  // Release stores: the odd version is visible before any word of the new
  // entry.
  for (size_t w = 0; w < Slot::kKeyWords; ++w) {
    slot.key[w].store(p.words[w], std::memory_order_release);
  }
  uint64_t order[Slot::kPrefixWords] = {};
  std::memcpy(order, prefix.index, prefix.size * sizeof(uint16_t));
  for (size_t w = 0; w < Slot::kPrefixWords; ++w) {
    slot.prefix[w].store(order[w], std::memory_order_release);
  }
  slot.header.store(Slot::Header(header + 2, p.bytes, prefix.size),
                    std::memory_order_release);

  // The tag last: a reader that sees it before the entry misses, one that
  // sees the old tag with the new entry finds another key and misses too.
  const uint64_t field = uint64_t{0xFFFF} << (16 * way);
  uint64_t expected = set_tags.load(std::memory_order_relaxed);
  uint64_t desired;
  do {
    desired = (expected & ~field) | (uint64_t{p.tag} << (16 * way));
    if (sweep) {
      for (size_t w = 0; w < kWays; ++w) {
        desired &= ~(uint64_t{kReferenced} << (16 * w));
      }
    }
  } while (!set_tags.compare_exchange_weak(expected, desired,
                                           std::memory_order_relaxed));
}

// ---------------------------------------------------------------------------
// Sharing

namespace {

// A cache with the table it caches orders of, held so that the table's
// address (in the cache's key) names it while the cache lives.
struct SharedCache {
  SharedCache(std::shared_ptr<const IdentityTable> t, size_t entries)
      : cache(entries), table(std::move(t)) {}
  KeyOrderCache cache;
  const std::shared_ptr<const IdentityTable> table;
};

// What a shared cache is for: a list of the table's identities with these
// weights, and the size asked for.
struct SharingKey {
  const IdentityTable* table;
  size_t entries;
  std::vector<uint32_t> weights;

  bool operator==(const SharingKey& other) const {
    return table == other.table && entries == other.entries &&
           weights == other.weights;
  }
  template <typename H>
  friend H AbslHashValue(H h, const SharingKey& key) {
    return H::combine(std::move(h), key.table, key.entries, key.weights);
  }
};

using SharedCaches = internal::WeakRegistryLocked<SharingKey, SharedCache,
                                                  absl::Hash<SharingKey>>;

SharedCaches& TheSharedCaches() {
  static auto* const caches = new SharedCaches();  // never destroyed
  return *caches;
}

}  // namespace

std::shared_ptr<KeyOrderCache> ShareKeyOrderCache(
    std::shared_ptr<const IdentityTable> table, std::vector<uint32_t> weights,
    size_t entries) {
  const SharingKey key{table.get(), entries, std::move(weights)};
  std::shared_ptr<SharedCache> shared =
      TheSharedCaches().FindOrMake(key, [&table, entries] {
        return std::make_shared<SharedCache>(std::move(table), entries);
      });
  return {shared, &shared->cache};
}

size_t LiveKeyOrderCaches() { return TheSharedCaches().live(); }

}  // namespace poise::router
