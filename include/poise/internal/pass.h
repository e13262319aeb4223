// Not API: nothing here is meant to be called by users, and all of it may
// change in any release. The integer half of a decision, in a header so that
// Decide() can sample its caller's load function inside the loop that hashes
// and groups the candidates (one pass over the list instead of two). The
// scoring, with its floating-point contract, stays out of line in src/core
// (score_bounds.h proves why the per-weight largest z is exact).
#ifndef POISE_INTERNAL_PASS_H_
#define POISE_INTERNAL_PASS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace poise::internal {

inline constexpr size_t kNone = static_cast<size_t>(-1);

// Whether a load is below a bound ceil(num / den) (den > 0), without the
// division: for an integer load, load < ceil(num / den) <=> load * den < num.
// num < 2^128 and den < 2^64, so load * den < 2^128: exact.
struct RoomTest {
  __extension__ using UInt128 = unsigned __int128;  // as poise::UInt128
  UInt128 num;
  uint64_t den;

  bool operator()(uint64_t load) const { return UInt128{load} * den < num; }
};

// The largest z of a stream offered in index order, its index (the first
// index wins equal z), the largest z among the others (the runner-up) and how
// many entries were taken. Trivially constructible so that the group table
// costs nothing until used: start from LargestZ::Empty().
struct LargestZ {
  uint64_t z;
  uint64_t runner_up;
  size_t index;
  size_t count;  // entries offered with take == true

  static LargestZ Empty() { return LargestZ{0, 0, kNone, 0}; }

  // Offers (candidate_z, i) if `take`. Bitwise logic on purpose: `take` is
  // data-dependent (has the backend room?) and would mispredict as a branch;
  // a new leader is rare (about ln n times per pass), so that branch is cheap.
  // A refused entry is offered as z = 0, which never leads (strictly larger
  // z is needed) and cannot raise the runner-up. Neither can a taken z = 0
  // lead: if every taken z is 0, index stays kNone with count > 0, and the
  // owner search re-ranks that group exactly.
  void Offer(uint64_t candidate_z, size_t i, bool take = true) {
    count += take;
    const uint64_t zt = take ? candidate_z : uint64_t{0};
    if (zt > z) {
      runner_up = z;  // the old leader was >= every earlier z
      z = zt;
      index = i;
      return;
    }
    runner_up = std::max(runner_up, zt);
  }
};

// True when every z' <= z_other provably ranks after z_max at equal weight
// (src/core/score_bounds.h has the argument).
inline bool Separated(uint64_t z_max, uint64_t z_other) {
  const uint64_t s_max = (z_max >> 11) + 1;
  const uint64_t s = (z_other >> 11) + 1;
  return s_max - s > (s_max >> 30);
}

// Whether a weight group's largest z is its best member by the contract's
// order with no logarithm: it exists and no other member's z comes near it.
inline bool ClearOfRunnerUp(const LargestZ& l) {
  return l.index != kNone && (l.count <= 1 || Separated(l.z, l.runner_up));
}

// The survivor threshold: about `quota` of n uniformly distributed z reach
// it; 0 (everyone survives) for short lists. A room search lists the
// survivors first: the best candidate with room is usually among them.
inline constexpr size_t kSurvivorQuota = 8;
inline uint64_t SurvivorThreshold(size_t n, size_t quota) {
  if (n <= 2 * quota) return 0;
  return UINT64_MAX - (UINT64_MAX / n) * quota;
}

// A leader offered only the survivors of `threshold` (> 0): the members not
// listed have z < threshold, so its runner-up is bounded by threshold - 1.
inline void BoundUnlisted(LargestZ& l, uint64_t threshold) {
  l.count = std::max<size_t>(l.count, 2);
  l.runner_up = std::max(l.runner_up, threshold - 1);
}

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

// One pass over `view`, which provides size(), eligible(i), weight(i),
// Hash(begin, end, z) (z for a range; ineligible slots may hold anything) and,
// when kBounded, load(i), called exactly once per eligible candidate. A
// bounded pass fills `outputs`; an unbounded one ignores it.
template <bool kBounded, typename View>
void RunPass(const View& view, const PassOutputs& outputs, PassState& st) {
  constexpr size_t kChunk = 64;
  uint64_t chunk[kChunk];
  uint64_t total_load = 0;
  bool load_overflow = false, ungrouped = false;
  size_t group_count = 0;
  WeightGroup* const groups = st.groups;
  const size_t n = view.size();
  for (size_t begin = 0; begin < n; begin += kChunk) {
    const size_t end = std::min(n, begin + kChunk);
    uint64_t* const z = kBounded ? outputs.z + begin : chunk;
    view.Hash(begin, end, z);
    for (size_t i = begin; i < end; ++i) {
      if (!view.eligible(i)) continue;
      const uint32_t w = view.weight(i);
      if constexpr (kBounded) {
        const uint64_t sampled = view.load(i);
        outputs.loads[i] = sampled;
        load_overflow |=
            __builtin_add_overflow(total_load, sampled, &total_load);
      }
      WeightGroup* g = groups;
      WeightGroup* const last = groups + group_count;
      while (g != last && g->weight != w) ++g;
      if (g == last) {
        if (group_count == kMaxGroups) {
          ungrouped = true;
          continue;
        }
        *g = WeightGroup{w, LargestZ::Empty(), LargestZ::Empty()};
        ++group_count;
      }
      g->all.Offer(z[i - begin], i);
    }
  }
  st.group_count = group_count;
  st.ungrouped = ungrouped;
  st.total_load = total_load;
  st.load_overflow = load_overflow;
  if constexpr (kBounded) {
    // The eligible weights' sum, from the groups' counts rather than one
    // more running sum in the loop (which ran short of registers). n < 2^32
    // candidates of weight < 2^32: no wrap. Beyond, it may wrap, and
    // SumsError (src/core/room_search.h) redoes both sums in order.
    uint64_t total_weight = 0;
    for (size_t k = 0; k < group_count; ++k) {
      total_weight += uint64_t{groups[k].weight} * groups[k].all.count;
    }
    if (ungrouped) {
      total_weight = 0;
      for (size_t i = 0; i < n; ++i) {
        if (view.eligible(i)) total_weight += view.weight(i);
      }
    }
    st.total_weight = total_weight;
  }
}

}  // namespace poise::internal

#endif  // POISE_INTERNAL_PASS_H_
