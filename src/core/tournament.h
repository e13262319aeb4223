// The fast path of the ranking: one pass that finds, per distinct weight, the
// candidate with the largest mixed hash z, then compares those leaders by a
// cheap libm logarithm with a certified error margin, computing the contract
// logarithm only for near-ties (below). Private to src/core (and its tests);
// see rendezvous.cc for use.
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
#include <cmath>
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
// Trivially constructible so that the group table costs nothing until used:
// start from Leader::Empty().
struct Leader {
  uint64_t z;
  uint64_t runner_up;
  size_t index;
  size_t count;  // entries offered with take == true

  static Leader Empty() { return Leader{0, 0, kNone, 0}; }

  // Offers (candidate_z, i) if `take`. Bitwise logic on purpose: `take` is
  // data-dependent (has the backend room?) and would mispredict as a branch;
  // a new leader is rare (about ln n times per pass), so that branch is cheap.
  // A refused entry is offered as z = 0, which never leads (strictly larger
  // z is needed) and cannot raise the runner-up. Neither can a taken z = 0
  // lead: if every taken z is 0, index stays kNone with count > 0, and
  // Decisive() says no, so the group is re-ranked exactly.
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

  // The leader is the group's best by Rank::Precedes without any logarithm.
  bool Decisive() const {
    return index != kNone && (count <= 1 || Separated(z, runner_up));
  }
};

// Comparing leaders of different weights without the contract logarithm.
//
// The contract's score is S = fl(-LnUnit(z) / w), and LnUnit takes ~13
// divisions. Across groups, the tournament first compares the cheap
//   A = fl(fl(k53 - log(s)) / w),   s = (z >> 11) + 1,  k53 = fl(53 ln 2),
// and asks for S only when A cannot separate two contenders. Error budget
// for |A - S| (all quantities below are < 64, so one ulp is <= 2^-47):
//  * libm: |log(s) - ln s| <= 4 ulp(ln s) <= 2^-45. We assume only this
//    (glibc documents < 1 ulp; fast_path_test measures the whole |A - S|).
//  * k53 is 53 ln 2 correctly rounded: <= 2^-48 (checked in the test).
//  * the subtraction rounds by <= 2^-48.
//    So |fl(k53 - log s) - (-ln(s / 2^53))| <= 2^-45 + 2^-47 < 3.6e-14.
//  * the contract: |LnUnit(z) - ln(s / 2^53)| < 3e-14 (see above; measured
//    1.4e-14 by fast_path_test, which asserts < 1e-13; with that looser
//    figure E stays below 1.5e-13, still 6x inside the margin).
//  * both divisions by the same w >= 1 shrink the difference and add at
//    most half an ulp each: <= 2 * 2^-48 < 7.2e-15.
// Hence |A - S| <= E := 3.6e-14 + 3e-14 + 7.2e-15 < 7.4e-14 for every z
// and w. Contest() treats a leader as ahead of k only when
// fl(A_lead + 2 kScoreMargin) < A_k; that sum rounds down by at most
// 2^-48, so A_k > A_lead + 2 kScoreMargin - 2^-48, and with
// kScoreMargin = 2^-40 (~9.1e-13) >= E + 2^-49 (more than 10x over):
//   S_lead <= A_lead + E < A_k - E <= S_k,
// a strict inequality of the contract scores, which is exactly what
// Rank::Precedes decides first. Everything not separated this way gets
// its exact S and the full order (score, larger z, larger weight, earlier
// index). A larger margin is sound too (tests use one to force the
// fallback on real keys); a smaller one is not.
inline constexpr double kScoreMargin = 0x1p-40;
inline constexpr double k53Ln2 = 36.736800569677101399;  // 53 ln 2

// A, the approximate score of z at weight w (see above).
inline double ApproxScore(uint64_t z, uint32_t weight) {
  const uint64_t s = (z >> 11) + 1;  // exact as a double: s <= 2^53
  return (k53Ln2 - std::log(static_cast<double>(s))) /
         static_cast<double>(weight);
}

// A candidate's identity in the contest (enough for Rank::Precedes without the
// score, which is recomputed exactly where it matters).
struct Choice {
  size_t index = kNone;
  uint64_t z = 0;
  uint32_t weight = 0;
};

struct Outcome {
  bool found = false;  // any eligible candidate
  Choice affinity{};   // the best eligible candidate
  bool found_room = false;
  Choice selection{};               // the best eligible candidate with room
  uint64_t selection_capacity = 0;  // its capacity (kBounded)
  size_t exact_scores = 0;  // contract logarithms computed (tests, benches)
  size_t near_ties = 0;     // contests the approximation could not settle
  size_t room_scans = 0;    // weights scanned in full for room (kBounded)
};

// A contender whose score is known approximately (within kScoreMargin of
// the contract's Score(z, weight)) or exactly.
// Trivially constructible (the contest arrays are not cleared).
struct Contender {
  double approx;
  Rank rank;  // rank.score is valid only when `exact`
  uint64_t capacity;
  bool exact;
};

// Picks the best of `c[0..count)` by Rank::Precedes. The approximation
// settles it when the approximate leader is more than 2 * margin ahead of
// everyone else; otherwise the leader and every contender within reach get
// their exact contract score and the contract's full order decides.
// Returns the winner's position in `c`.
inline size_t Contest(Contender* c, size_t count, double margin, Outcome& out) {
  size_t lead = 0;
  for (size_t k = 1; k < count; ++k) {
    if (c[k].approx < c[lead].approx) lead = k;
  }
  // Certified: exact_lead <= approx_lead + margin < approx_k - margin <=
  // exact_k, so the leader's exact score is strictly smaller.
  const double reach = c[lead].approx + 2 * margin;
  bool settled = true;
  for (size_t k = 0; k < count; ++k) {
    settled &= k == lead || reach < c[k].approx;
  }
  if (settled) return lead;
  ++out.near_ties;
  auto make_exact = [&](Contender& x) {
    if (x.exact) return;
    x.rank.score = Score(x.rank.z, x.rank.weight);
    x.exact = true;
    ++out.exact_scores;
  };
  make_exact(c[lead]);
  size_t best = lead;
  for (size_t k = 0; k < count; ++k) {
    if (k == lead || reach < c[k].approx) continue;  // certified behind
    make_exact(c[k]);
    if (c[k].rank.Precedes(c[best].rank)) best = k;
  }
  return best;
}

// Keeps `best` the better of itself and `rank` by the contract's order;
// true when `rank` took its place.
inline bool Improve(bool& have, Rank& best, const Rank& rank) {
  const bool better = !have || rank.Precedes(best);
  if (better) best = rank;
  have = true;
  return better;
}

// What the bounded tournament keeps for the room search after its pass
// (both hold field.size() entries; DecisionScratch owns them).
struct RoomBuffers {
  uint64_t* z;        // every candidate's z, by index
  size_t* survivors;  // indices whose z reached the survivor threshold
  size_t quota = 16;  // the expected number of survivors (tests vary it)
};

// The survivor threshold: about `quota` of n uniformly distributed z reach
// it; 0 (everyone survives) for short lists.
inline uint64_t SurvivorThreshold(size_t n, size_t quota) {
  if (n <= 2 * quota) return 0;
  return UINT64_MAX - (UINT64_MAX / n) * quota;
}

// Runs the tournament over `field`, which provides:
//   size(), eligible(i), weight(i), Hash(begin, end, z*) (z for a range;
//   ineligible slots may hold anything), Z(i), and for kBounded capacity(w)
//   and load(i).
// The best by Rank::Precedes of a union is the best of the per-part bests, so
// partitioning the candidates by weight (and, for the selection, by weight
// among those with room: capacity depends only on the weight) and comparing
// one leader per part (Contest: approximately, exactly on near-ties) gives
// exactly the contract's answer.
//
// The selection (kBounded) is found after the pass, in three steps of
// growing cost:
//  1. The affinity owner has room: it is also the best candidate with room.
//  2. Otherwise the pass also listed the "survivors", the candidates whose z
//     reached a threshold that about `quota` of them reach. A weight's best
//     member with room among its survivors is its best member with room
//     overall, because every other member has a smaller z (and within one
//     weight, z decides: see the argument at the top). Its runner-up is
//     bounded by the threshold, so Decisive() is asked with that bound.
//  3. A weight none of whose survivors has room is scanned in full (its
//     members' z were kept in `buffers.z`).
template <bool kBounded, typename Field>
Outcome RunTournament(const Field& field, const RoomBuffers* buffers = nullptr,
                      double margin = kScoreMargin) {
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
  bool have_spot = false, have_spot_room = false;
  Rank spot{}, spot_room{};
  uint64_t spot_room_capacity = 0;

  const size_t n = field.size();
  const uint64_t threshold =
      kBounded ? SurvivorThreshold(n, buffers->quota) : 0;
  size_t survivor_count = 0;
  size_t* const survivors = kBounded ? buffers->survivors : nullptr;
  constexpr size_t kChunk = 64;
  uint64_t chunk[kChunk];
  for (size_t begin = 0; begin < n; begin += kChunk) {
    const size_t end = std::min(n, begin + kChunk);
    uint64_t* const z = kBounded ? buffers->z + begin : chunk;
    field.Hash(begin, end, z);
    for (size_t i = begin; i < end; ++i) {
      if (!field.eligible(i)) continue;
      const uint32_t w = field.weight(i);
      const uint64_t zi = z[i - begin];
      Group* g = groups;
      Group* const last = groups + group_count;
      while (g != last && g->weight != w) ++g;
      if (g == last && group_count < kMaxGroups) {
        *g = Group{w, 0, Leader::Empty(), Leader::Empty()};
        ++group_count;
      }
      if (g != groups + kMaxGroups) {
        g->all.Offer(zi, i);
        if (kBounded) {
          // Branch-free: written always, kept when it reached the threshold.
          survivors[survivor_count] = i;
          survivor_count += zi >= threshold;
        }
        continue;
      }
      const Rank rank{Score(zi, w), zi, w, i};
      ++out.exact_scores;
      Improve(have_spot, spot, rank);
      if (!kBounded) continue;
      const uint64_t capacity = field.capacity(w);
      if (field.load(i) < capacity &&
          Improve(have_spot_room, spot_room, rank)) {
        spot_room_capacity = capacity;
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
      ++out.exact_scores;
      Improve(have, best, Rank{Score(zi, g.weight), zi, g.weight, i});
    }
    return best;
  };
  // A group's leader as a contender: approximately scored when the z argmax
  // is decisive, else the group re-ranked exactly.
  auto contender = [&](const Group& g, const Leader& l, bool room) {
    if (l.Decisive()) {
      return Contender{ApproxScore(l.z, g.weight),
                       Rank{0, l.z, g.weight, l.index}, g.capacity, false};
    }
    const Rank best = exact(g, room);
    return Contender{best.score, best, g.capacity, true};
  };
  auto exact_contender = [](const Rank& r, uint64_t capacity) {
    return Contender{r.score, r, capacity, true};
  };
  auto choice = [](const Rank& r) { return Choice{r.index, r.z, r.weight}; };

  Contender all[kMaxGroups + 1];
  size_t all_count = 0;
  for (size_t k = 0; k < group_count; ++k) {
    all[all_count++] = contender(groups[k], groups[k].all, false);
  }
  if (have_spot) all[all_count++] = exact_contender(spot, 0);
  if (all_count == 0) return out;
  out.found = true;
  const Contender& owner = all[Contest(all, all_count, margin, out)];
  out.affinity = choice(owner.rank);
  if (!kBounded) return out;

  // 1. The owner has room.
  const uint64_t owner_capacity = field.capacity(owner.rank.weight);
  if (field.load(owner.rank.index) < owner_capacity) {
    out.found_room = true;
    out.selection = out.affinity;
    out.selection_capacity = owner_capacity;
    return out;
  }
  // 2. The best member with room of each weight, among the survivors.
  for (size_t k = 0; k < group_count; ++k) {
    groups[k].capacity = field.capacity(groups[k].weight);
  }
  auto group_of = [&](uint32_t w) {
    Group* g = groups;
    while (g != groups + group_count && g->weight != w) ++g;
    return g;
  };
  for (size_t k = 0; k < survivor_count; ++k) {
    const size_t i = buffers->survivors[k];
    Group& g = *group_of(field.weight(i));
    g.room.Offer(buffers->z[i], i, field.load(i) < g.capacity);
  }
  for (size_t k = 0; k < group_count; ++k) {
    Group& g = groups[k];
    if (threshold == 0) continue;  // everyone survived: the leaders are exact
    if (g.room.index != kNone) {
      // Members that did not survive have z < threshold.
      g.room.count = std::max<size_t>(g.room.count, 2);
      g.room.runner_up = std::max(g.room.runner_up, threshold - 1);
      continue;
    }
    // 3. No survivor of this weight has room: scan all its members.
    ++out.room_scans;
    g.room = Leader::Empty();
    for (size_t i = 0; i < n; ++i) {
      if (!field.eligible(i) || field.weight(i) != g.weight) continue;
      g.room.Offer(buffers->z[i], i, field.load(i) < g.capacity);
    }
  }

  Contender room[kMaxGroups + 1];
  size_t room_count = 0;
  for (size_t k = 0; k < group_count; ++k) {
    const Group& g = groups[k];
    if (g.room.count == 0) continue;
    // A weight's leader often has room: reuse its contender.
    if (g.room.index == all[k].rank.index) {
      room[room_count] = all[k];
      room[room_count++].capacity = g.capacity;
    } else {
      room[room_count++] = contender(g, g.room, true);
    }
  }
  if (have_spot_room) {
    room[room_count++] = exact_contender(spot_room, spot_room_capacity);
  }
  if (room_count == 0) return out;
  const Contender& won = room[Contest(room, room_count, margin, out)];
  out.found_room = true;
  out.selection = choice(won.rank);
  out.selection_capacity = won.capacity;
  return out;
}

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_TOURNAMENT_H_
