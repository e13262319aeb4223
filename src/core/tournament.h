// The fast path of the ranking: one pass that finds, per distinct weight, the
// candidate with the largest mixed hash z, then compares those leaders by
// certified bounds of their scores, else by a cheap libm logarithm with a
// certified error margin, computing the contract logarithm only for
// near-ties (below). Private to src/core (and its tests); see rendezvous.cc
// and prepared_candidates.cc for use.
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
#include <limits>
#include <optional>
#include <vector>

#include "poise/detail/pass.h"
#include "poise/hash.h"
#include "poise/rendezvous.h"

namespace poise::internal {

using detail::Decisive;
using detail::kNone;
using detail::Leader;
using detail::Separated;
using detail::SurvivorThreshold;

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

// Before any logarithm, Contest() tries bounds from the series of the true
// logarithm. With s as above, u = s / 2^53 and x = 1 - u, both exact in
// double (x = (2^53 - s) 2^-53), and -ln u = sum over k >= 1 of x^k / k, so
//   lo = x + x^2/2 + x^3/3 + x^4/4  <=  -ln u  <=  lo + x^5 / (5 u) = hi,
// taken for u >= 1/8 (beyond, hi is +inf); for u >= 1/2 the tail bound
// 0.4 x^5 >= x^5 / (5 u) serves without a division. A leader's x is small
// (about 1 / the members of its weight), so its bounds are tight:
// (hi - lo) / lo < 1e-4 for x < 0.1; a lone member's x is uniform, hence
// the division rather than one constant bound of the tail. Error budget, as
// for A:
//  * evaluating lo and hi in double (u and 5 u need no rounding but one):
//    a relative error below 8 * 2^-53 of values below 3.7, < 3.3e-15;
//  * the contract: |S - (-ln u) / w| < 3e-14 / w + 2^-48 (its logarithm's
//    error, then the rounding of its division);
//  * multiplying lo and hi by fl(1/w) adds a relative error below 2^-52,
//    < 8.3e-16 of values below 3.7.
// So S lies in [lo/w - E, hi/w + E] with E < 7.4e-14 as above, and the
// same rule certifies: fl(hi_lead/w + 2 kScoreMargin) < lo_k/w implies
// S_lead < S_k. These bounds take no call and no table, unlike log().
struct Bracket {
  double lo;
  double hi;  // +inf when u < 1/8
};

inline Bracket ScoreBracket(uint64_t z, uint32_t weight) {
  const uint64_t s = (z >> 11) + 1;
  const double inv_w = 1.0 / static_cast<double>(weight);  // off the chain
  const double x = static_cast<double>((uint64_t{1} << 53) - s) * 0x1p-53;
  const double x2 = x * x;
  const double lo = x + x2 * (0.5 + x * (1.0 / 3 + x * 0.25));
  const double x5 = x2 * x2 * x;
  double hi = std::numeric_limits<double>::infinity();
  if (s >= (uint64_t{1} << 52)) {
    hi = lo + 0.4 * x5;
  } else if (s >= (uint64_t{1} << 50)) {
    hi = lo + x5 / (5 * (static_cast<double>(s) * 0x1p-53));
  }
  return Bracket{lo * inv_w, hi * inv_w};
}

// A candidate's identity in the contest (enough for Rank::Precedes without the
// score, which is recomputed exactly where it matters).
// Left uninitialized in an Outcome until found: zeroing the whole Outcome
// took a `rep stos`, tens of cycles, at every decision.
struct Choice {
  size_t index;
  uint64_t z;
  uint32_t weight;
};

struct Outcome {
  bool found = false;  // any eligible candidate
  Choice affinity;     // the best eligible candidate (if found)
  bool found_room = false;
  Choice selection;  // the best eligible candidate with room (if found_room)
  UInt128 selection_capacity = 0;  // its capacity (kBounded)
  size_t exact_scores = 0;  // contract logarithms computed (tests, benches)
  size_t near_ties = 0;     // contests the approximation could not settle
  size_t room_scans = 0;    // deeper survivor levels listed (kBounded)
};

// A contender whose score is known approximately (within kScoreMargin of
// the contract's Score(z, weight)) or exactly.
// Trivially constructible (the contest arrays are not cleared).
struct Contender {
  double approx;  // NaN until Scored() (most contests need no approx)
  Rank rank;      // rank.score is valid only when `exact`
  bool exact;

  // Fills `approx`; returns it.
  double Scored() {
    if (std::isnan(approx)) approx = ApproxScore(rank.z, rank.weight);
    return approx;
  }
};

inline constexpr double kUnscored = std::numeric_limits<double>::quiet_NaN();

// The certification rule (see above): a's contract score is strictly below
// b's when a's upper bound plus 2 * margin is below b's lower bound.
inline bool CertifiedAhead(const Bracket& a, const Bracket& b, double margin) {
  return a.hi + 2 * margin < b.lo;
}

// The contender with the smallest upper bound, and whether that is
// certified ahead of every other.
struct Lead {
  size_t index;
  double reach;  // its upper bound + 2 * margin
  bool certified;
};

inline Lead LeadOf(const Bracket* b, size_t count, double margin) {
  size_t lead = 0;
  for (size_t k = 1; k < count; ++k) {
    if (b[k].hi < b[lead].hi) lead = k;
  }
  bool certified = true;
  for (size_t k = 0; k < count; ++k) {
    certified &= k == lead || CertifiedAhead(b[lead], b[k], margin);
  }
  return Lead{lead, b[lead].hi + 2 * margin, certified};
}

// Picks the best of `c[0..count)` by Rank::Precedes. The brackets settle
// it when one contender's upper bound is more than 2 * margin below every
// other's lower bound; else the approximation does when the approximate
// leader is that far ahead of everyone else (an approximate score is a
// bracket of width 0: the margin covers its error); otherwise the leader
// and every contender within reach get their exact contract score and the
// contract's full order decides. Returns the winner's position in `c`.
inline size_t Contest(Contender* c, size_t count, double margin, Outcome& out) {
  // One contender (a cluster of one weight) wins without a logarithm.
  if (count == 1) return 0;
  Bracket b[detail::kMaxGroups + 1];
  for (size_t k = 0; k < count; ++k) {
    b[k] = c[k].exact ? Bracket{c[k].rank.score, c[k].rank.score}
                      : ScoreBracket(c[k].rank.z, c[k].rank.weight);
  }
  Lead lead = LeadOf(b, count, margin);
  if (lead.certified) return lead.index;
  for (size_t k = 0; k < count; ++k) {
    const double approx = c[k].Scored();
    b[k] = Bracket{approx, approx};
  }
  lead = LeadOf(b, count, margin);
  if (lead.certified) return lead.index;
  ++out.near_ties;
  auto make_exact = [&](Contender& x) {
    if (x.exact) return;
    x.rank.score = Score(x.rank.z, x.rank.weight);
    x.exact = true;
    ++out.exact_scores;
  };
  make_exact(c[lead.index]);
  size_t best = lead.index;
  for (size_t k = 0; k < count; ++k) {
    if (k == lead.index || lead.reach < b[k].lo) continue;  // certified behind
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

// Whether a load is below a bound ceil(num / den) (den > 0), without the
// division: for an integer load, load < ceil(num / den) <=> load * den < num.
// num < 2^128 and den < 2^64, so load * den < 2^128: exact.
struct RoomTest {
  UInt128 num;
  uint64_t den;

  bool operator()(uint64_t load) const { return UInt128{load} * den < num; }
};

// load < Capacity(factor, total_load, weight, total_weight) as a RoomTest.
// When 100 W does not fit in 64 bits (W > 1.8e17: tens of millions of heavy
// candidates), load * 100 W could pass 2^128; the test then compares with
// the capacity itself, load < c being load * 1 < c.
inline RoomTest RoomTestFor(uint32_t factor, uint64_t total_load,
                            uint32_t weight, uint64_t total_weight) {
  if (total_weight > UINT64_MAX / 100) {
    return {BoundedLoadRendezvous::Capacity(factor, total_load, weight,
                                            total_weight),
            1};
  }
  return {UInt128{factor} * (UInt128{total_load} + 1) * weight,
          uint64_t{100} * total_weight};
}

// poise-core's checks of the sums after a bounded pass that made them
// (`loads` as it sampled them): for each eligible candidate in index order
// its load is added to L (kLoadOverflow on a wrap), then its weight to W
// (kWeightOverflow); then L + 1 must not wrap (kLoadOverflow). Below 2^32
// candidates W < 2^32 (2^32 - 1) < 2^64 cannot wrap, so the pass's flag
// answers; beyond, which sum wraps first decides, so they are redone in
// order.
inline std::optional<PickError> SumsError(
    const std::vector<Candidate>& candidates, const uint64_t* loads,
    const detail::PassState& pass) {
  if (candidates.size() > UINT32_MAX) {
    uint64_t total_load = 0, total_weight = 0;
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!candidates[i].IsEligible()) continue;
      if (__builtin_add_overflow(total_load, loads[i], &total_load)) {
        return PickError::kLoadOverflow;
      }
      if (__builtin_add_overflow(total_weight, uint64_t{candidates[i].weight},
                                 &total_weight)) {
        return PickError::kWeightOverflow;
      }
    }
  } else if (pass.load_overflow) {
    return PickError::kLoadOverflow;
  }
  if (pass.total_load == UINT64_MAX) return PickError::kLoadOverflow;
  return std::nullopt;
}

// What the bounded tournament keeps for the room search after its pass
// (each holds field.size() entries; DecisionScratch owns them).
struct RoomBuffers {
  detail::Kept kept;
  size_t* survivors;  // indices whose z reached the survivor threshold
  size_t quota = detail::kSurvivorQuota;  // tests vary it
};

// Finishes the tournament after detail::RunPass over `field`, which provides
//   size(), eligible(i), weight(i), Z(i), and for kBounded capacity(w) and
//   load(i) (the loads the pass sampled).
// The best by Rank::Precedes of a union is the best of the per-part bests, so
// partitioning the candidates by weight (and, for the selection, by weight
// among those with room: capacity depends only on the weight) and comparing
// one leader per part (Contest: approximately, exactly on near-ties) gives
// exactly the contract's answer.
//
// The selection (kBounded) is found in three steps of growing cost:
//  1. The affinity owner has room: it is also the best candidate with room.
//  2. Otherwise the "survivors" are listed, the candidates whose z reached a
//     threshold that about `quota` of them reach. A weight's best member with
//     room among its survivors is its best member with room overall, because
//     every other member has a smaller z (and within one weight, z decides:
//     see the argument at the top). Its runner-up is bounded by the
//     threshold, so Decisive() is asked with that bound.
//  3. A weight none of whose survivors has room is dropped when it provably
//     cannot beat a contender already found, else searched again among a
//     four times larger quota of survivors, and so on.
template <bool kBounded, typename Field>
Outcome Finish(const Field& field, detail::PassState& pass,
               const RoomBuffers* buffers, double margin) {
  using detail::WeightGroup;
  Outcome out;
  WeightGroup* const groups = pass.groups;
  const size_t group_count = pass.group_count;
  const size_t n = field.size();
  // The group of weight w, or group_count.
  auto group_of = [&](uint32_t w) {
    size_t k = 0;
    while (k != group_count && groups[k].weight != w) ++k;
    return k;
  };
  // Candidates of weights beyond the group table, scored exactly.
  auto for_each_ungrouped = [&](auto&& fn) {
    if (!pass.ungrouped) return;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t w = field.weight(i);
      if (!field.eligible(i) || group_of(w) != group_count) continue;
      const uint64_t zi = field.Z(i);
      ++out.exact_scores;
      fn(i, Rank{Score(zi, w), zi, w, i});
    }
  };
  RoomTest room_test[detail::kMaxGroups];  // filled in step 2 (kBounded)

  // The best of group k's members (with room if `room`), scored exactly.
  auto exact = [&](size_t k, bool room) {
    const uint32_t w = groups[k].weight;
    bool have = false;
    Rank best{};
    for (size_t i = 0; i < n; ++i) {
      if (!field.eligible(i) || field.weight(i) != w) continue;
      if (room && !room_test[k](field.load(i))) continue;
      const uint64_t zi = field.Z(i);
      ++out.exact_scores;
      Improve(have, best, Rank{Score(zi, w), zi, w, i});
    }
    return best;
  };
  // A group's leader as a contender: scored only if Contest needs it when
  // the z argmax is decisive, else the group re-ranked exactly. A libm
  // logarithm is taken only where the brackets cannot settle a contest (a
  // cold libm call costs a few hundred cycles inside a channel).
  auto contender = [&](size_t k, const Leader& l, bool room) {
    const uint32_t w = groups[k].weight;
    if (Decisive(l)) {
      return Contender{kUnscored, Rank{0, l.z, w, l.index}, false};
    }
    const Rank best = exact(k, room);
    return Contender{best.score, best, true};
  };
  auto exact_contender = [](const Rank& r) {
    return Contender{r.score, r, true};
  };
  auto choice = [](const Rank& r) { return Choice{r.index, r.z, r.weight}; };

  Contender all[detail::kMaxGroups + 1];
  size_t all_count = 0;
  for (size_t k = 0; k < group_count; ++k) {
    all[all_count++] = contender(k, groups[k].all, false);
  }
  bool have_spot = false;
  Rank spot{};
  for_each_ungrouped(
      [&](size_t, const Rank& r) { Improve(have_spot, spot, r); });
  if (have_spot) all[all_count++] = exact_contender(spot);
  if (all_count == 0) return out;
  out.found = true;
  const Contender& owner = all[Contest(all, all_count, margin, out)];
  out.affinity = choice(owner.rank);
  if constexpr (!kBounded) {
    return out;
  } else {
    auto finish = [&](const Rank& selection) {
      out.found_room = true;
      out.selection = choice(selection);
      // The only division: the decision never needs the bound itself.
      out.selection_capacity = field.capacity(selection.weight);
      return out;
    };
    // 1. The owner has room.
    if (field.room_test(owner.rank.weight)(field.load(owner.rank.index))) {
      return finish(owner.rank);
    }
    for (size_t k = 0; k < group_count; ++k) {
      room_test[k] = field.room_test(groups[k].weight);
    }
    bool have_spot_room = false;
    Rank spot_room{};
    for_each_ungrouped([&](size_t i, const Rank& r) {
      if (field.room_test(r.weight)(field.load(i))) {
        Improve(have_spot_room, spot_room, r);
      }
    });
    // 2. The best member with room of each weight, among the survivors:
    // the candidates whose z reached a threshold that about `quota` of them
    // reach. Listed branch-free: every index written, kept when its z is in
    // the level's range.
    // 3. A weight none of whose survivors has room: its members with room
    // all have z < threshold, so none scores better than z = threshold - 1
    // would (within the error budget E of the scores, see above). When a
    // contender is already ahead of that by four margins, the weight cannot
    // win and is dropped; otherwise the next level lists the z in
    // [threshold', threshold) for a four times larger quota, down to
    // threshold 0, where every member has been seen.
    const uint64_t* const z = buffers->kept.z;
    size_t* const survivors = buffers->survivors;
    Contender room[detail::kMaxGroups + 1];
    size_t room_count = 0;
    if (have_spot_room) room[room_count++] = exact_contender(spot_room);
    size_t open[detail::kMaxGroups];  // weights whose best with room is unknown
    bool is_open[detail::kMaxGroups];
    size_t open_count = group_count;
    for (size_t k = 0; k < group_count; ++k) {
      open[k] = k;
      is_open[k] = true;
    }
    size_t quota = buffers->quota;
    uint64_t ceiling = 0;  // this level lists z in [threshold, ceiling)
    for (bool first = true; open_count != 0; first = false) {
      const uint64_t threshold = SurvivorThreshold(n, quota);
      size_t listed = 0;
      if (first) {
        for (size_t i = 0; i < n; ++i) {
          survivors[listed] = i;
          listed += z[i] >= threshold;
        }
      } else {
        const uint64_t span = ceiling - threshold;
        for (size_t i = 0; i < n; ++i) {
          survivors[listed] = i;
          listed += z[i] - threshold < span;  // wraps for z < threshold
        }
      }
      for (size_t s = 0; s < listed; ++s) {
        const size_t i = survivors[s];
        if (!field.eligible(i)) continue;  // its z slot is unspecified
        const size_t k = group_of(field.weight(i));
        if (k == group_count || !is_open[k]) continue;
        groups[k].room.Offer(z[i], i, room_test[k](field.load(i)));
      }
      size_t still = 0;
      for (size_t o = 0; o < open_count; ++o) {
        const size_t k = open[o];
        Leader& l = groups[k].room;
        if (l.index == kNone && threshold != 0) {
          open[still++] = k;  // none of its survivors has room
          continue;
        }
        is_open[k] = false;
        if (l.count == 0) continue;  // every member seen: it has no room
        if (threshold != 0) detail::BoundUnlisted(l, threshold);
        // A weight's leader often has room: reuse its contender.
        room[room_count++] =
            l.index == all[k].rank.index ? all[k] : contender(k, l, true);
      }
      open_count = still;
      if (open_count == 0) break;
      double ahead = std::numeric_limits<double>::infinity();
      for (size_t c = 0; c < room_count; ++c) {
        ahead = std::min(ahead, room[c].Scored());
      }
      still = 0;
      for (size_t o = 0; o < open_count; ++o) {
        const size_t k = open[o];
        if (ahead + 4 * margin < ApproxScore(threshold - 1, groups[k].weight)) {
          is_open[k] = false;  // cannot win
          continue;
        }
        open[still++] = k;
      }
      open_count = still;
      if (open_count != 0) ++out.room_scans;
      ceiling = threshold;
      quota *= 4;
    }
    if (room_count == 0) return out;
    return finish(room[Contest(room, room_count, margin, out)].rank);
  }
}

// The pass and the finish over one field (tests, and Pick). For kBounded the
// field's load(i) is sampled once by the pass into buffers->loads; Finish
// reads field.load(i) again, so the field must return the same value.
template <bool kBounded, typename Field>
Outcome RunTournament(const Field& field, const RoomBuffers* buffers = nullptr,
                      double margin = kScoreMargin) {
  detail::PassState pass;
  detail::RunPass<kBounded>(field, kBounded ? buffers->kept : detail::Kept{},
                            pass);
  return Finish<kBounded>(field, pass, buffers, margin);
}

// WeightedRendezvous::Pick's answer from a pass made elsewhere over the
// table's hashes (PreparedCandidates): `pass` must be what RunPass<false>
// produces for (key, candidates, table); then the answers are the same.
Result<size_t> FinishPick(const KeyHash& key,
                          const std::vector<Candidate>& candidates,
                          const IdentityTable& table, detail::PassState& pass);

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_TOURNAMENT_H_
