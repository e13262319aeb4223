// The pass every general decision starts with: it hashes the candidates
// and groups the eligible ones by weight, keeping each weight's LargestZ
// (and, bounded, every z and the sums of loads and weights). The owner
// search (owner_search.h) and the room search (room_search.h) decide from
// what it keeps. Private to src/core (and its tests).
#ifndef POISE_SRC_CORE_HASH_AND_GROUP_H_
#define POISE_SRC_CORE_HASH_AND_GROUP_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "largest_z.h"

namespace poise::internal {

// The candidates of one weight. `room` is filled after the pass, when the
// total load is known.
struct alignas(16) WeightGroup {
  uint32_t weight;
  LargestZ all;
  LargestZ room;
};

// Weights beyond the table are scored exactly after the pass: still
// correct, just without the shortcut. Real clusters have a handful.
inline constexpr size_t kMaxGroups = 8;

struct PassState {
  WeightGroup groups[kMaxGroups];
  size_t group_count = 0;
  bool ungrouped = false;  // some eligible weight found no slot in `groups`
  uint64_t total_load = 0;
  bool load_overflow = false;  // the sampled loads' sum wrapped
  uint64_t total_weight = 0;   // eligible weights (kBounded)
};

// Where a bounded pass keeps what the room search needs (each holds size()
// entries).
struct PassOutputs {
  uint64_t* z;      // every candidate's z (ineligible: unspecified)
  uint64_t* loads;  // every eligible candidate's sampled load
};

// The group of weight w among `groups[0..count)`, added (and `count`
// raised) when it is new and the table has room; null when it is full.
inline WeightGroup* FindOrAddGroup(WeightGroup* groups, size_t& count,
                                   uint32_t w) {
  WeightGroup* g = groups;
  WeightGroup* const last = groups + count;
  while (g != last && g->weight != w) ++g;
  if (g != last) return g;
  if (count == kMaxGroups) return nullptr;
  *g = WeightGroup{w, LargestZ::Empty(), LargestZ::Empty()};
  ++count;
  return g;
}

// The eligible weights' sum, from the groups' counts rather than one more
// running sum in the pass (which ran short of registers). n < 2^32
// candidates of weight < 2^32: no wrap. Beyond, it may wrap, and SumsError
// (room_search.h) redoes both sums in order.
template <typename View>
uint64_t EligibleWeight(const View& view, const PassState& st) {
  uint64_t total_weight = 0;
  if (!st.ungrouped) {
    for (size_t k = 0; k < st.group_count; ++k) {
      total_weight += uint64_t{st.groups[k].weight} * st.groups[k].all.count;
    }
    return total_weight;
  }
  for (size_t i = 0; i < view.size(); ++i) {
    if (view.eligible(i)) total_weight += view.weight(i);
  }
  return total_weight;
}

// One pass over `view`, which provides size(), eligible(i), weight(i),
// Hash(begin, end, z) (z for a range; ineligible slots may hold anything) and,
// when kBounded, load(i), called exactly once per eligible candidate. A
// bounded pass fills `outputs`; an unbounded one ignores it.
template <bool kBounded, typename View>
void HashAndGroup(const View& view, const PassOutputs& outputs, PassState& st) {
  constexpr size_t kChunk = 64;
  uint64_t chunk[kChunk];
  uint64_t total_load = 0;
  bool load_overflow = false, ungrouped = false;
  size_t group_count = 0;
  const size_t n = view.size();
  for (size_t begin = 0; begin < n; begin += kChunk) {
    const size_t end = std::min(n, begin + kChunk);
    uint64_t* const z = kBounded ? outputs.z + begin : chunk;
    view.Hash(begin, end, z);
    for (size_t i = begin; i < end; ++i) {
      if (!view.eligible(i)) continue;
      if constexpr (kBounded) {
        const uint64_t load = view.load(i);
        outputs.loads[i] = load;
        load_overflow |= __builtin_add_overflow(total_load, load, &total_load);
      }
      WeightGroup* const g =
          FindOrAddGroup(st.groups, group_count, view.weight(i));
      if (g == nullptr) {
        ungrouped = true;
        continue;
      }
      g->all.Offer(z[i - begin], i);
    }
  }
  st.group_count = group_count;
  st.ungrouped = ungrouped;
  st.total_load = total_load;
  st.load_overflow = load_overflow;
  if constexpr (kBounded) st.total_weight = EligibleWeight(view, st);
}

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_HASH_AND_GROUP_H_
