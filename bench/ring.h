// A ring like gRPC's ring_hash default, for comparing picks: at least 1024
// entries, weighted, entries hashed from "identity_j", the key's 64-bit hash
// binary-searched. Shared by poise_core_bench and poise_key_cache_bench.
#ifndef POISE_BENCH_RING_H_
#define POISE_BENCH_RING_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "poise/hash.h"
#include "poise/types.h"

namespace poise::bench {

struct Ring {
  std::vector<std::pair<uint64_t, uint32_t>> entries;  // hash, backend
};

inline Ring BuildRing(const std::vector<Candidate>& candidates) {
  uint64_t total_weight = 0;
  for (const auto& c : candidates) total_weight += c.weight;
  const size_t min_ring = std::max<size_t>(1024, candidates.size());
  Ring ring;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const auto count = static_cast<size_t>(
        (min_ring * candidates[i].weight + total_weight - 1) / total_weight);
    uint64_t base = Fnv1a(candidates[i].identity);
    for (size_t j = 0; j < count; ++j) {
      ring.entries.emplace_back(
          Mix64(Fnv1aUpdate(base, "_" + std::to_string(j))),
          static_cast<uint32_t>(i));
    }
  }
  std::sort(ring.entries.begin(), ring.entries.end());
  return ring;
}

inline uint32_t RingPick(const Ring& ring, std::string_view key) {
  const uint64_t h = Mix64(Fnv1a(key));
  auto it = std::lower_bound(ring.entries.begin(), ring.entries.end(), h,
                             [](const std::pair<uint64_t, uint32_t>& e,
                                uint64_t v) { return e.first < v; });
  if (it == ring.entries.end()) it = ring.entries.begin();
  return it->second;
}

}  // namespace poise::bench

#endif  // POISE_BENCH_RING_H_
