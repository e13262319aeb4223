// The fast path of the ranking: one pass that finds, per distinct weight, the
// candidate with the largest mixed hash z, then computes one logarithm per
// weight. Private to src/core (and its tests); see rendezvous.cc for use.
//
// Why the per-weight argmax of z is exact. Within one weight w, score =
// -LnUnit(z) / w and LnUnit depends on z only through s = (z >> 11) + 1.
//  * Equal s: equal LnUnit, equal score, so Rank::Precedes falls through to
//    the larger z, then (same weight) the earlier index: exactly the argmax of
//    z with the earliest index on equal z.
//  * s_max - s > (s_max >> 30), i.e. s/s_max < 1 - 2^-30: the true logarithms
//    differ by ln(s_max/s) >= 1 - s/s_max > 2^-30 ~ 9.3e-10. The computed
//    LnUnit is within eps of ln(s / 2^53), where eps < 3e-14 (series
//    truncation 2 t^27/(27(1-t^2)) <= 1.2e-14 for t <= 1/3, plus a few
//    roundings of values below 37; fast_path_test measures max |error| =
//    1.4e-14 and asserts < 1e-13). As 2 eps << 2^-30, LnUnit(s) <
//    LnUnit(s_max), so -LnUnit(s)/w >= -LnUnit(s_max)/w (division by the same w
//    is monotone; a tie after rounding is broken by the larger z = s_max's).
//  * Anything in between (0 < s_max - s <= s_max >> 30, probability ~n 2^-30
//    per key) is not argued about: the group is re-ranked exactly.
// The runner-up z of each group tells which case applies: if it is
// separated from the leader, every other member (z <= runner-up) is too.
#ifndef POISE_SRC_CORE_TOURNAMENT_H_
#define POISE_SRC_CORE_TOURNAMENT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "poise/hash.h"
#include "poise/rendezvous.h"

namespace poise::internal {

inline constexpr size_t kNone = static_cast<size_t>(-1);

// True when every z' <= z_other provably ranks after z_max at equal weight.
inline bool Separated(uint64_t z_max, uint64_t z_other) {
  const uint64_t s_max = (z_max >> 11) + 1;
  const uint64_t s = (z_other >> 11) + 1;
  return s_max - s > (s_max >> 30);
}

// Argmax of z over a stream in index order (the first index wins equal z),
// and the largest z among the others.
struct Leader {
  uint64_t z = 0;
  uint64_t runner_up = 0;
  size_t index = kNone;
  size_t count = 0;  // entries offered with take == true

  // Offers (candidate_z, i) if `take`. Bitwise logic on purpose: `take` is
  // data-dependent (has the backend room?) and would mispredict as a branch;
  // a new leader is rare (about ln n times per pass), so that branch is cheap.
  void Offer(uint64_t candidate_z, size_t i, bool take = true) {
    count += take;
    const bool lead = take & ((candidate_z > z) | (index == kNone));
    if (lead) {
      runner_up = z;  // the old leader was >= every earlier z
      z = candidate_z;
      index = i;
      return;
    }
    runner_up = std::max(runner_up, take ? candidate_z : uint64_t{0});
  }

  // The leader is the group's best by Rank::Precedes without any logarithm.
  bool Decisive() const { return count <= 1 || Separated(z, runner_up); }
};

struct Outcome {
  bool found = false;  // any eligible candidate
  Rank affinity{};     // the best eligible candidate
  bool found_room = false;
  Rank selection{};  // the best eligible candidate with room (kBounded)
  uint64_t selection_capacity = 0;  // its capacity
};

// Keeps `best` the better of itself and `rank` by the contract's order;
// true when `rank` took its place.
inline bool Improve(bool& have, Rank& best, const Rank& rank) {
  const bool better = !have || rank.Precedes(best);
  if (better) best = rank;
  have = true;
  return better;
}

// Runs the tournament over `field`, which provides:
//   size(), eligible(i), weight(i), Hash(begin, end, z*) (z for a range;
//   ineligible slots may hold anything), Z(i), and for kBounded capacity(w)
//   and load(i).
// The best by Rank::Precedes of a union is the best of the per-part bests, so
// partitioning the candidates by weight (and, for the selection, by weight
// among those with room: capacity depends only on the weight) and comparing
// one exactly-scored leader per part gives exactly the contract's answer.
template <bool kBounded, typename Field>
Outcome RunTournament(const Field& field) {
  struct Group {
    uint32_t weight;
    uint64_t capacity;
    Leader all;
    Leader room;
  };
  // Weights beyond the table are scored exactly on the spot: still correct,
  // just without the shortcut. Real clusters have a handful of weights.
  constexpr size_t kMaxGroups = 8;
  Group groups[kMaxGroups];
  size_t group_count = 0;
  Outcome out;

  constexpr size_t kChunk = 64;
  uint64_t z[kChunk];
  const size_t n = field.size();
  for (size_t begin = 0; begin < n; begin += kChunk) {
    const size_t end = std::min(n, begin + kChunk);
    field.Hash(begin, end, z);
    for (size_t i = begin; i < end; ++i) {
      if (!field.eligible(i)) continue;
      const uint32_t w = field.weight(i);
      const uint64_t zi = z[i - begin];
      Group* g = groups;
      Group* const last = groups + group_count;
      while (g != last && g->weight != w) ++g;
      if (g == last && group_count < kMaxGroups) {
        *g = Group{w, kBounded ? field.capacity(w) : 0, {}, {}};
        ++group_count;
      }
      if (g != groups + kMaxGroups) {
        g->all.Offer(zi, i);
        if (kBounded) g->room.Offer(zi, i, field.load(i) < g->capacity);
        continue;
      }
      const Rank rank{Score(zi, w), zi, w, i};
      Improve(out.found, out.affinity, rank);
      if (!kBounded) continue;
      const uint64_t capacity = field.capacity(w);
      if (field.load(i) < capacity &&
          Improve(out.found_room, out.selection, rank)) {
        out.selection_capacity = capacity;
      }
    }
  }

  // The best of one weight's members (with room if `room`), scored exactly.
  auto exact = [&](const Group& g, bool room) {
    bool have = false;
    Rank best{};
    for (size_t i = 0; i < n; ++i) {
      if (!field.eligible(i) || field.weight(i) != g.weight) continue;
      if (room && !(field.load(i) < g.capacity)) continue;
      const uint64_t zi = field.Z(i);
      Improve(have, best, Rank{Score(zi, g.weight), zi, g.weight, i});
    }
    return best;
  };
  auto leader_rank = [&](const Group& g, const Leader& l, bool room) {
    return l.Decisive() ? Rank{Score(l.z, g.weight), l.z, g.weight, l.index}
                        : exact(g, room);
  };
  for (size_t k = 0; k < group_count; ++k) {
    const Group& g = groups[k];
    const Rank best = leader_rank(g, g.all, false);
    Improve(out.found, out.affinity, best);
    if (!kBounded || g.room.index == kNone) continue;
    // The overall leader often has room: reuse its score.
    if (Improve(
            out.found_room, out.selection,
            g.room.index == best.index ? best : leader_rank(g, g.room, true))) {
      out.selection_capacity = g.capacity;
    }
  }
  return out;
}

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_TOURNAMENT_H_
