// The owner search: the best eligible candidate by the contract's order,
// from the per-weight largest z of one pass (internal::HashAndGroup). The best
// by Rank::Precedes of a union is the best of the per-part bests, so
// partitioning the candidates by weight and comparing one estimate per
// weight (BestEstimate: by certified brackets, then approximately, exactly
// on near-ties; score_bounds.h has the proofs) gives exactly the contract's
// answer. A weight whose largest z is not clear of its runner-up, and the
// weights beyond the group table, are scored exactly. Private to src/core
// (and its tests).
#ifndef POISE_SRC_CORE_OWNER_SEARCH_H_
#define POISE_SRC_CORE_OWNER_SEARCH_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hash_and_group.h"
#include "largest_z.h"
#include "poise/hash.h"
#include "poise/types.h"
#include "score_bounds.h"

namespace poise::internal {

// A candidate's identity in a search (enough for Rank::Precedes without the
// score, which is recomputed exactly where it matters).
// Left uninitialized in a SearchResult until found: zeroing the whole
// SearchResult would take a block store at every decision.
struct Choice {
  size_t index;
  uint64_t z;
  uint32_t weight;
};

struct SearchResult {
  bool found = false;  // any eligible candidate
  Choice affinity;     // the best eligible candidate (if found)
  bool found_room = false;
  Choice selection;  // the best eligible candidate with room (if found_room)
  UInt128 selection_capacity = 0;  // its capacity (kBounded)
  size_t exact_scores = 0;  // contract logarithms computed (tests, benches)
  size_t near_ties = 0;     // comparisons the approximation could not settle
  size_t room_scans = 0;    // deeper survivor levels listed (kBounded)
};

// A candidate whose score is known approximately (within kScoreMargin of
// the contract's Score(z, weight)) or exactly.
// Trivially constructible (the estimate arrays are not cleared).
struct ScoreEstimate {
  double approx;  // NaN until Scored() (most comparisons need none)
  Rank rank;      // rank.score is valid only when `exact`
  bool exact;

  // Fills `approx`; returns it.
  double Scored() {
    if (std::isnan(approx)) approx = ApproxScore(rank.z, rank.weight);
    return approx;
  }
};

inline constexpr double kUnscored = std::numeric_limits<double>::quiet_NaN();

// The estimate with the smallest upper bound, and whether that is certified
// ahead of every other.
struct SmallestUpperBound {
  size_t index;
  double reach;  // its upper bound + 2 * margin
  bool certified;
};

inline SmallestUpperBound FindSmallestUpperBound(const Bracket* b, size_t count,
                                                 double margin) {
  size_t smallest = 0;
  for (size_t k = 1; k < count; ++k) {
    if (b[k].hi < b[smallest].hi) smallest = k;
  }
  bool certified = true;
  for (size_t k = 0; k < count; ++k) {
    certified &= k == smallest || CertifiedAhead(b[smallest], b[k], margin);
  }
  return SmallestUpperBound{smallest, b[smallest].hi + 2 * margin, certified};
}

// The best of `c[0..count)` by Rank::Precedes. The brackets settle it when
// one estimate's upper bound is more than 2 * margin below every other's
// lower bound; else the approximation does when the smallest approximate
// score is that far below every other (an approximate score is a bracket of
// width 0: the margin covers its error); otherwise that one and every
// estimate within its reach get their exact contract score and the
// contract's full order decides. Returns the best one's position in `c`.
inline size_t BestEstimate(ScoreEstimate* c, size_t count, double margin,
                           SearchResult& out) {
  // One estimate (a cluster of one weight) is the best without a logarithm.
  if (count == 1) return 0;
  Bracket b[internal::kMaxGroups + 1];
  for (size_t k = 0; k < count; ++k) {
    b[k] = c[k].exact ? Bracket{c[k].rank.score, c[k].rank.score}
                      : ScoreBracket(c[k].rank.z, c[k].rank.weight);
  }
  SmallestUpperBound lead = FindSmallestUpperBound(b, count, margin);
  if (lead.certified) return lead.index;
  for (size_t k = 0; k < count; ++k) {
    const double approx = c[k].Scored();
    b[k] = Bracket{approx, approx};
  }
  lead = FindSmallestUpperBound(b, count, margin);
  if (lead.certified) return lead.index;
  ++out.near_ties;
  auto make_exact = [&](ScoreEstimate& x) {
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
inline bool KeepBetter(bool& have, Rank& best, const Rank& rank) {
  const bool better = !have || rank.Precedes(best);
  if (better) best = rank;
  have = true;
  return better;
}

inline Choice ChoiceOf(const Rank& r) { return Choice{r.index, r.z, r.weight}; }

inline ScoreEstimate ExactEstimate(const Rank& r) {
  return ScoreEstimate{r.score, r, true};
}

// The weight groups of a pass over `view`, which provides size(),
// eligible(i), weight(i) and Z(i), and what both searches ask of them.
// Exact scores computed are counted in `out`.
template <typename View>
class WeightGroups {
 public:
  WeightGroups(const View& view, PassState& pass, SearchResult& out)
      : view_(view), pass_(pass), out_(out) {}

  const View& view() const { return view_; }
  size_t count() const { return pass_.group_count; }
  WeightGroup& operator[](size_t k) const { return pass_.groups[k]; }

  // The group of weight w, or count().
  size_t GroupOf(uint32_t w) const {
    size_t k = 0;
    while (k != pass_.group_count && pass_.groups[k].weight != w) ++k;
    return k;
  }

  // fn(i, rank) for every eligible candidate of a weight beyond the group
  // table, scored exactly.
  template <typename Fn>
  void ForEachUngrouped(Fn&& fn) const {
    if (!pass_.ungrouped) return;
    for (size_t i = 0; i < view_.size(); ++i) {
      const uint32_t w = view_.weight(i);
      if (!view_.eligible(i) || GroupOf(w) != pass_.group_count) continue;
      const uint64_t zi = view_.Z(i);
      ++out_.exact_scores;
      fn(i, Rank{Score(zi, w), zi, w, i});
    }
  }

  // The best of group k's members i with taken(i), scored exactly.
  template <typename Taken>
  Rank ExactBest(size_t k, const Taken& taken) const {
    const uint32_t w = pass_.groups[k].weight;
    bool have = false;
    Rank best{};
    for (size_t i = 0; i < view_.size(); ++i) {
      if (!view_.eligible(i) || view_.weight(i) != w) continue;
      if (!taken(i)) continue;
      const uint64_t zi = view_.Z(i);
      ++out_.exact_scores;
      KeepBetter(have, best, Rank{Score(zi, w), zi, w, i});
    }
    return best;
  }

  // Group k's best member among those with taken(i), whose largest z is
  // `l`: unscored when `l` is clear of its runner-up (BestEstimate scores it
  // only if it must), else the group re-ranked exactly. A libm logarithm is
  // taken only where the brackets cannot settle a comparison (a cold libm
  // call is slow inside a channel, whose caches are cold).
  template <typename Taken>
  ScoreEstimate EstimateOf(size_t k, const LargestZ& l,
                           const Taken& taken) const {
    const uint32_t w = pass_.groups[k].weight;
    if (ClearOfRunnerUp(l)) {
      return ScoreEstimate{kUnscored, Rank{0, l.z, w, l.index}, false};
    }
    return ExactEstimate(ExactBest(k, taken));
  }

 private:
  const View& view_;
  PassState& pass_;
  SearchResult& out_;
};

// Every eligible candidate is taken.
struct TakeAll {
  bool operator()(size_t /*index*/) const { return true; }
};

// The owner: fills `estimates` with one estimate per weight group, in group
// order, then the best ungrouped candidate if any, sets `count` and returns
// the owner's position among them (meaningless when count is 0: no
// candidate is eligible).
template <typename View>
size_t FindOwner(const WeightGroups<View>& groups, double margin,
                 ScoreEstimate* estimates, size_t& count, SearchResult& out) {
  count = 0;
  for (size_t k = 0; k < groups.count(); ++k) {
    estimates[count++] = groups.EstimateOf(k, groups[k].all, TakeAll{});
  }
  bool have_best_ungrouped = false;
  Rank best_ungrouped{};
  groups.ForEachUngrouped([&](size_t, const Rank& r) {
    KeepBetter(have_best_ungrouped, best_ungrouped, r);
  });
  if (have_best_ungrouped) estimates[count++] = ExactEstimate(best_ungrouped);
  if (count == 0) return kNone;
  return BestEstimate(estimates, count, margin, out);
}

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_OWNER_SEARCH_H_
