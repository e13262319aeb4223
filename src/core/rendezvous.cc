#include "poise/rendezvous.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "candidate_hash.h"
#include "key_order.h"
#include "room_search.h"
#include "scratch_access.h"

namespace poise {

const char* ToString(PickError error) {
  switch (error) {
    case PickError::kEmpty:
      return "no candidates";
    case PickError::kNoEligibleCandidates:
      return "no eligible candidates";
    case PickError::kWeightOverflow:
      return "eligible weights sum past 2^64-1";
    case PickError::kLoadOverflow:
      return "sampled loads sum past 2^64-1";
    case PickError::kScratchCapacityExceeded:
      return "decision scratch could not grow";
    case PickError::kTableMismatch:
      return "identity table built for a different candidate list";
  }
  return "unknown pick error";
}

namespace {

Rank RankOf(const KeyHash& key, const Candidate& candidate, size_t index) {
  const uint64_t z = key.Mixed(candidate.identity);
  return Rank{Score(z, candidate.weight), z, candidate.weight, index};
}

// The candidate list as HashAndGroup and Search see it: hashed from the
// identities or through a table built from them; loads only when bounded.
struct CandidateView {
  const KeyHash& key;
  const std::vector<Candidate>& candidates;
  const IdentityTable* table = nullptr;
  const uint64_t* loads = nullptr;
  uint32_t factor = 0;
  uint64_t total_load = 0;
  uint64_t total_weight = 0;
  const Candidate* data = candidates.data();

  size_t size() const { return candidates.size(); }
  bool eligible(size_t i) const { return data[i].IsEligible(); }
  uint32_t weight(size_t i) const { return data[i].weight; }
  void Hash(size_t begin, size_t end, uint64_t* z) const {
    if (table != nullptr) {
      internal::TableMixedRange(table->ForKey(key.state()), begin, end, z);
    } else {
      internal::HashCandidates(key.state(), data + begin, end - begin, z);
    }
  }
  uint64_t Z(size_t i) const {
    return table != nullptr ? table->Mixed(key.state(), i)
                            : key.Mixed(candidates[i].identity);
  }
  uint64_t load(size_t i) const { return loads[i]; }
  Bound bound(uint32_t w) const {
    return {factor, total_load, w, total_weight};
  }
};

}  // namespace

namespace {

// Pick, hashing the identities (table == nullptr) or through a table.
Result<size_t> PickWith(std::string_view key,
                        const std::vector<Candidate>& candidates,
                        const IdentityTable* table) {
  if (candidates.empty()) return PickError::kEmpty;
  const KeyHash hash(key);
  const internal::SearchResult out =
      internal::ScanAndSearch<false>(CandidateView{hash, candidates, table});
  if (!out.found) return PickError::kNoEligibleCandidates;
  return out.affinity.index;
}

}  // namespace

namespace internal {
Result<size_t> PickAfterPass(const KeyHash& key,
                             const std::vector<Candidate>& candidates,
                             const IdentityTable& table,
                             internal::PassState& pass) {
  const SearchResult out = Search<false>(CandidateView{key, candidates, &table},
                                         pass, nullptr, kScoreMargin);
  if (!out.found) return PickError::kNoEligibleCandidates;
  return out.affinity.index;
}
}  // namespace internal

Result<size_t> WeightedRendezvous::Pick(
    std::string_view key, const std::vector<Candidate>& candidates) {
  return PickWith(key, candidates, nullptr);
}

Result<size_t> WeightedRendezvous::Pick(
    std::string_view key, const std::vector<Candidate>& candidates,
    const IdentityTable& table) {
  if (table.size() != candidates.size()) return PickError::kTableMismatch;
  return PickWith(key, candidates, &table);
}

Result<std::vector<Rank>> WeightedRendezvous::Ranking(
    std::string_view key, const std::vector<Candidate>& candidates) {
  if (candidates.empty()) return PickError::kEmpty;
  const KeyHash hash(key);
  std::vector<Rank> ranks;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].IsEligible()) {
      ranks.push_back(RankOf(hash, candidates[i], i));
    }
  }
  if (ranks.empty()) return PickError::kNoEligibleCandidates;
  std::sort(ranks.begin(), ranks.end(),
            [](const Rank& a, const Rank& b) { return a.Precedes(b); });
  return ranks;
}

// ---------------------------------------------------------------------------
// Bounded decisions on loads read already

namespace {

// The hashing pass over the candidates (loads copied into the scratch on the
// way) and both searches, every bound counting `total_load` calls.
internal::SearchResult SearchWithLoads(
    const KeyHash& hash, const std::vector<Candidate>& candidates,
    const IdentityTable* table, const uint64_t* loads, uint32_t factor,
    uint64_t total_load, DecisionScratch& scratch, internal::PassState& pass) {
  const internal::RoomBuffers buffers{
      internal::PassOutputs{internal::ScratchAccess::Hashes(scratch),
                            internal::ScratchAccess::Loads(scratch)},
      internal::ScratchAccess::List(scratch)};
  return internal::Search<true>(
      CandidateView{hash, candidates, table, loads, factor, total_load,
                    pass.total_weight},
      pass, &buffers, internal::kScoreMargin);
}

// What keeps a decision from starting, in poise-core's order: a table for
// another list, no candidates, then none eligible before a scratch that
// cannot grow.
std::optional<PickError> UsableError(const std::vector<Candidate>& candidates,
                                     const IdentityTable* table,
                                     DecisionScratch& scratch) {
  if (table != nullptr && table->size() != candidates.size()) {
    return PickError::kTableMismatch;
  }
  if (candidates.empty()) return PickError::kEmpty;
  if (internal::ScratchAccess::Fit(scratch, candidates.size())) {
    return std::nullopt;
  }
  const bool any_eligible =
      std::any_of(candidates.begin(), candidates.end(),
                  [](const Candidate& c) { return c.IsEligible(); });
  return any_eligible ? PickError::kScratchCapacityExceeded
                      : PickError::kNoEligibleCandidates;
}

Result<Decision> DecisionOf(const internal::SearchResult& out,
                            const uint64_t* loads) {
  // A factor >= 100 leaves a candidate with room (the bounds sum past L).
  if (!out.found_room) return PickError::kNoEligibleCandidates;
  const size_t selection = out.selection.index;
  return Decision{out.affinity.index, selection,
                  out.affinity.index != selection, loads[selection],
                  out.selection_capacity};
}

}  // namespace

Result<Decision> BoundedLoadRendezvous::DecideOnLoads(
    std::string_view key, const std::vector<Candidate>& candidates,
    const IdentityTable* table, const uint64_t* loads,
    DecisionScratch& scratch) const {
  if (const auto error = UsableError(candidates, table, scratch)) {
    return *error;
  }
  const KeyHash hash(key);
  const CandidateView view{hash, candidates, table, loads};
  internal::PassState pass;
  internal::HashAndGroup<true>(
      view,
      internal::PassOutputs{internal::ScratchAccess::Hashes(scratch),
                            internal::ScratchAccess::Loads(scratch)},
      pass);
  if (pass.total_weight == 0) return PickError::kNoEligibleCandidates;
  if (const auto error = internal::SumsError(
          candidates, internal::ScratchAccess::Loads(scratch), pass)) {
    return *error;
  }
  const internal::SearchResult out = SearchWithLoads(
      hash, candidates, table, internal::ScratchAccess::Loads(scratch),
      factor_percent_, pass.total_load, scratch, pass);
  return DecisionOf(out, internal::ScratchAccess::Loads(scratch));
}

// ---------------------------------------------------------------------------
// The k-th choice (retries), in the contract's order (Rank::Precedes), over
// the candidates `admit` accepts.

namespace {

// Every admitted candidate ranked exactly, the best rank after the previous
// one n + 1 times: O(size * (n + 1)) scores, for what NthByLargestZ leaves.
template <typename Admit>
size_t NthByExactRanks(const KeyHash& hash,
                       const std::vector<Candidate>& candidates,
                       const IdentityTable& table, size_t n, Admit admit) {
  const auto rank = [&](size_t i) {
    const uint64_t z = table.Mixed(hash.state(), i);
    return Rank{Score(z, candidates[i].weight), z, candidates[i].weight, i};
  };
  bool have_previous = false;
  Rank previous{};
  for (size_t step = 0; step <= n; ++step) {
    bool have_best = false;
    Rank best{};
    for (size_t i = 0; i < candidates.size(); ++i) {
      if (!candidates[i].IsEligible() || !admit(i)) continue;
      const Rank r = rank(i);
      if (have_previous && !previous.Precedes(r)) continue;
      if (!have_best || r.Precedes(best)) {
        best = r;
        have_best = true;
      }
    }
    previous = best;  // the caller's n is below the number admitted
    have_previous = true;
  }
  return previous.index;
}

// The largest z of one weight's admitted candidates, best first (equal z:
// the earlier index), at most `keep` of them.
constexpr size_t kMaxKept = 8;
struct LargestZs {
  uint32_t weight = 0;
  size_t size = 0;
  uint64_t z[kMaxKept] = {};
  size_t index[kMaxKept] = {};

  void Offer(uint64_t zi, size_t i, size_t keep) {
    if (size == keep && zi <= z[keep - 1]) return;
    size_t at = size < keep ? size++ : keep - 1;
    for (; at > 0 && z[at - 1] < zi; --at) {
      z[at] = z[at - 1];
      index[at] = index[at - 1];
    }
    z[at] = zi;
    index[at] = i;
  }
};

// The same answer from the z of one hashing pass: within one weight the
// contract's order is the order of z wherever two z are separated
// (score_bounds.h), so when a weight's (n + 2)-th largest z is separated
// from its (n + 1)-th, every member of that weight past the n + 1 largest
// ranks after n + 1 of its own and cannot be the (n + 1)-th overall. Only
// those n + 1 per weight are ranked exactly. Answer() is nullopt
// (NthByExactRanks decides) for more than kMaxGroups weights, n + 2 past
// kMaxKept, or a near-tie at a cut.
template <typename Admit>
class NthByLargestZ {
 public:
  NthByLargestZ(size_t n, Admit admit)
      : n_(n), keep_(n + 2), admit_(admit), usable_(n + 2 <= kMaxKept) {}

  // The search will be offered only the z at or above `threshold` (one
  // weight): it answers only where n + 2 of them are admitted, which then
  // are the weight's n + 2 largest.
  void OfferedOnlyFrom(uint64_t threshold) { partial_ = threshold != 0; }

  // Candidate i (of `c`) and its z, in any order of i.
  void Offer(const Candidate& c, size_t i, uint64_t z) {
    if (!usable_ || !c.IsEligible() || !admit_(i)) return;
    LargestZs* w = weights_;
    while (w != weights_ + weight_count_ && w->weight != c.weight) ++w;
    if (w == weights_ + weight_count_) {
      if (weight_count_ == internal::kMaxGroups) {
        usable_ = false;
        return;
      }
      w->weight = c.weight;
      ++weight_count_;
    }
    w->Offer(z, i, keep_);
  }

  std::optional<size_t> Answer() const {
    if (!usable_) return std::nullopt;
    if (weight_count_ == 1) {
      if (const std::optional<size_t> found = AnswerByZ(weights_[0])) {
        return found;
      }
    }
    Rank ranked[internal::kMaxGroups * (kMaxKept - 1)];
    size_t count = 0;
    for (size_t g = 0; g < weight_count_; ++g) {
      const LargestZs& w = weights_[g];
      if (partial_ && w.size < keep_) return std::nullopt;
      if (w.size == keep_ && !internal::Separated(w.z[n_], w.z[n_ + 1])) {
        return std::nullopt;
      }
      for (size_t j = 0; j < std::min(w.size, n_ + 1); ++j) {
        ranked[count++] =
            Rank{Score(w.z[j], w.weight), w.z[j], w.weight, w.index[j]};
      }
    }
    if (count <= n_) return std::nullopt;  // the caller's n is below it
    std::nth_element(
        ranked, ranked + n_, ranked + count,
        [](const Rank& a, const Rank& b) { return a.Precedes(b); });
    return ranked[n_].index;
  }

 private:
  // One weight: where each of its n + 1 largest z is separated from the
  // next, the order of z is the contract's, no score needed; nullopt
  // otherwise (the scores decide).
  std::optional<size_t> AnswerByZ(const LargestZs& w) const {
    if (w.size <= n_ || (partial_ && w.size < keep_)) return std::nullopt;
    for (size_t j = 0; j + 1 < w.size && j <= n_; ++j) {
      if (!internal::Separated(w.z[j], w.z[j + 1])) return std::nullopt;
    }
    return w.index[n_];
  }

  size_t n_;
  size_t keep_;
  Admit admit_;
  bool usable_;
  bool partial_ = false;
  LargestZs weights_[internal::kMaxGroups];
  size_t weight_count_ = 0;
};

// One hashing pass over the candidates, each z at or above `threshold`
// offered to each search: every z for threshold 0; else (searches told
// OfferedOnlyFrom(threshold)) each block's listed by one vector compare,
// about SurvivorThreshold's quota of them.
template <typename... Searches>
void OfferZFrom(const KeyHash& hash, const std::vector<Candidate>& candidates,
                const IdentityTable& table, uint64_t threshold,
                Searches&... searches) {
  const IdentityTable::KeyRow row = table.ForKey(hash.state());
  constexpr size_t kBlock = 64;
  uint64_t z[kBlock];
  size_t listed[kBlock];
  for (size_t begin = 0; begin < candidates.size(); begin += kBlock) {
    const size_t end = std::min(candidates.size(), begin + kBlock);
    internal::TableMixedRange(row, begin, end, z);
    if (threshold == 0) {
      for (size_t i = begin; i < end; ++i) {
        (searches.Offer(candidates[i], i, z[i - begin]), ...);
      }
      continue;
    }
    const size_t count = internal::ListZInRange(z, end - begin, threshold,
                                                0 - threshold, listed);
    for (size_t k = 0; k < count; ++k) {
      const size_t i = begin + listed[k];
      (searches.Offer(candidates[i], i, z[listed[k]]), ...);
    }
  }
}

// The search's answer, or the exact ranks' where it has none.
template <typename Admit>
size_t AnswerOf(const NthByLargestZ<Admit>& search, const KeyHash& hash,
                const std::vector<Candidate>& candidates,
                const IdentityTable& table, size_t n, Admit admit) {
  if (const std::optional<size_t> found = search.Answer()) return *found;
  return NthByExactRanks(hash, candidates, table, n, admit);
}

constexpr auto kAdmitAll = [](size_t) { return true; };

// The owner and the (k + 1)-th that `admit` allows, from one hashing pass.
// On one weight (`one_weight`) a long list's pass offers only the largest
// z, those that a threshold about kSurvivorQuota per candidate asked for
// lets through: both answers are almost always among them. Where they are
// not, the pass is made again with every z.
template <typename Admit>
std::pair<size_t, size_t> OwnerAndNth(const KeyHash& hash,
                                      const std::vector<Candidate>& candidates,
                                      const IdentityTable& table, size_t k,
                                      Admit admit, bool one_weight) {
  const uint64_t threshold =
      one_weight ? internal::SurvivorThreshold(
                       candidates.size(), internal::kSurvivorQuota * (k + 2))
                 : 0;
  if (threshold != 0) {
    NthByLargestZ first(0, kAdmitAll);
    NthByLargestZ nth(k, admit);
    first.OfferedOnlyFrom(threshold);
    nth.OfferedOnlyFrom(threshold);
    OfferZFrom(hash, candidates, table, threshold, first, nth);
    const std::optional<size_t> owner = first.Answer();
    const std::optional<size_t> chosen = nth.Answer();
    if (owner.has_value() && chosen.has_value()) return {*owner, *chosen};
  }
  NthByLargestZ first(0, kAdmitAll);
  NthByLargestZ nth(k, admit);
  OfferZFrom(hash, candidates, table, 0, first, nth);
  return {AnswerOf(first, hash, candidates, table, 0, kAdmitAll),
          AnswerOf(nth, hash, candidates, table, k, admit)};
}

}  // namespace

Result<size_t> WeightedRendezvous::PickNth(
    std::string_view key, const std::vector<Candidate>& candidates,
    const IdentityTable& table, size_t n) {
  if (table.size() != candidates.size()) return PickError::kTableMismatch;
  if (candidates.empty()) return PickError::kEmpty;
  size_t eligible = 0;
  for (const Candidate& c : candidates) eligible += c.IsEligible() ? 1 : 0;
  if (eligible == 0) return PickError::kNoEligibleCandidates;
  const KeyHash hash(key);
  NthByLargestZ nth(n % eligible, kAdmitAll);
  OfferZFrom(hash, candidates, table, 0, nth);
  return AnswerOf(nth, hash, candidates, table, n % eligible, kAdmitAll);
}

Result<Decision> BoundedLoadRendezvous::DecideNthOnLoads(
    std::string_view key, const std::vector<Candidate>& candidates,
    const IdentityTable& table, const uint64_t* loads, size_t n) const {
  if (candidates.empty()) return PickError::kEmpty;
  // The contract's errors (K8), in its order: with none eligible the sums
  // add nothing (no overflow) and W is 0.
  const Result<internal::Sums> sums = internal::SumInOrder(candidates, loads);
  if (!sums.ok()) return sums.error();
  const uint64_t total_load = sums.value().total_load;
  const uint64_t total_weight = sums.value().total_weight;
  if (total_weight == 0) return PickError::kNoEligibleCandidates;
  internal::WalkBounds bounds(factor_percent_, total_load, total_weight);
  const auto has_room = [&](size_t i) {
    return bounds.For(candidates[i].weight).HasRoom(loads[i]);
  };
  // Only n mod with_room is needed: counting stops past n.
  size_t with_room = 0;
  for (size_t i = 0; i < candidates.size() && with_room <= n; ++i) {
    if (candidates[i].IsEligible() && has_room(i)) {
      ++with_room;
    }
  }
  // A factor >= 100 leaves one with room: the capacities sum past L.
  if (with_room == 0) return PickError::kNoEligibleCandidates;  // unreachable
  const auto [affinity, selection] =
      OwnerAndNth(KeyHash(key), candidates, table, n % with_room, has_room,
                  sums.value().one_weight != 0);
  return Decision{
      affinity, selection, affinity != selection, loads[selection],
      BoundFor(total_load, candidates[selection].weight, total_weight)
          .Capacity()};
}

}  // namespace poise
