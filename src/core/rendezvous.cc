#include "poise/rendezvous.h"

#include <algorithm>

#include "candidate_hash.h"
#include "room_search.h"

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

namespace internal {
void HashIdentities(uint64_t key_state, const Candidate* c, size_t n,
                    uint64_t* z) {
  internal::HashCandidates(key_state, c, n, z);
}
}  // namespace internal

Rank RankOf(const KeyHash& key, const Candidate& candidate, size_t index) {
  const uint64_t z = key.Mixed(candidate.identity);
  return Rank{Score(z, candidate.weight), z, candidate.weight, index};
}

namespace {

// The candidate list as RunPass and Search see it: hashed from the
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
    internal::HashRange(key.state(), data, table, begin, end, z);
  }
  uint64_t Z(size_t i) const {
    return table != nullptr ? table->Mixed(key.state(), i)
                            : key.Mixed(candidates[i].identity);
  }
  uint64_t load(size_t i) const { return loads[i]; }
  UInt128 capacity(uint32_t w) const {
    return BoundedLoadRendezvous::Capacity(factor, total_load, w, total_weight);
  }
  internal::RoomTest room_test(uint32_t w) const {
    return internal::RoomTestFor(factor, total_load, w, total_weight);
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

UInt128 BoundedLoadRendezvous::Capacity(uint32_t factor_percent,
                                        uint64_t total_load, uint32_t weight,
                                        uint64_t total_weight) {
  // f < 2^32, L + 1 <= 2^64 - 1 and w < 2^32: the product fits in 128 bits,
  // and so does 100 W. Usually everything fits in 64 bits, where the
  // division is several times cheaper than the 128-bit library call;
  // integer division is exact either way, so both branches give the same
  // ceiling.
  uint64_t numerator64;
  if (total_load < UINT32_MAX && total_weight <= UINT64_MAX / 100 &&
      !__builtin_mul_overflow(uint64_t{factor_percent} * (total_load + 1),
                              uint64_t{weight}, &numerator64)) {
    const uint64_t denominator64 = uint64_t{100} * total_weight;
    return numerator64 / denominator64 +
           (numerator64 % denominator64 != 0 ? 1 : 0);
  }
  const UInt128 numerator =
      UInt128{factor_percent} * (UInt128{total_load} + 1) * UInt128{weight};
  const UInt128 denominator = UInt128{100} * total_weight;
  return numerator / denominator + (numerator % denominator != 0 ? 1 : 0);
}

Result<Decision> BoundedLoadRendezvous::DecideAfterPass(
    const KeyHash& hash, const std::vector<Candidate>& candidates,
    const IdentityTable* table, DecisionScratch& scratch,
    internal::PassState& pass) const {
  if (pass.total_weight == 0) return PickError::kNoEligibleCandidates;
  if (const auto error =
          internal::SumsError(candidates, scratch.loads_.data(), pass)) {
    return *error;
  }
  const std::vector<uint64_t>& loads = scratch.loads_;
  const internal::RoomBuffers buffers{scratch.Outputs(),
                                      scratch.survivors_.data()};
  // The affinity owner is the best candidate overall, the selection the best
  // one with room (the first with room in the key's order). A factor >= 100
  // guarantees that one has room.
  const internal::SearchResult out = internal::Search<true>(
      CandidateView{hash, candidates, table, loads.data(), factor_percent_,
                    pass.total_load, pass.total_weight},
      pass, &buffers, internal::kScoreMargin);
  if (!out.found_room) return PickError::kNoEligibleCandidates;  // unreachable
  const size_t selection = out.selection.index;
  return Decision{out.affinity.index, selection,
                  out.affinity.index != selection, loads[selection],
                  out.selection_capacity};
}

Result<Decision> BoundedLoadRendezvous::DecideAfterPassWithTotal(
    const KeyHash& hash, const std::vector<Candidate>& candidates,
    const IdentityTable* table, DecisionScratch& scratch,
    internal::PassState& pass, uint64_t total_load, bool& sampled) const {
  sampled = false;
  if (pass.total_weight == 0) return PickError::kNoEligibleCandidates;
  // Below 2^32 candidates the weights cannot wrap 64 bits (SumsError);
  // beyond, they are summed again in order, without the loads.
  if (candidates.size() > UINT32_MAX) {
    uint64_t total_weight = 0;
    for (const Candidate& c : candidates) {
      if (c.IsEligible() &&
          __builtin_add_overflow(total_weight, uint64_t{c.weight},
                                 &total_weight)) {
        return PickError::kWeightOverflow;
      }
    }
  }
  if (total_load == UINT64_MAX) return PickError::kLoadOverflow;  // T + 1
  const std::vector<uint64_t>& loads = scratch.loads_;
  const internal::RoomBuffers buffers{scratch.Outputs(),
                                      scratch.survivors_.data()};
  const internal::SearchResult out = internal::Search<true>(
      CandidateView{hash, candidates, table, loads.data(), factor_percent_,
                    total_load, pass.total_weight},
      pass, &buffers, internal::kScoreMargin);
  if (!out.found_room) {  // a stale total: the bounds of the loads' sum
    sampled = true;
    // The room search filled the groups' `room`: the pass as RunPass left it.
    for (size_t k = 0; k < pass.group_count; ++k) {
      pass.groups[k].room = internal::LargestZ::Empty();
    }
    return DecideAfterPass(hash, candidates, table, scratch, pass);
  }
  const size_t selection = out.selection.index;
  return Decision{out.affinity.index, selection,
                  out.affinity.index != selection, loads[selection],
                  out.selection_capacity};
}

// ---------------------------------------------------------------------------
// The k-th choice (retries): repeated selection of the best rank after the
// previous one, in the contract's order (Rank::Precedes), over the
// candidates `admit` accepts.

namespace {

template <typename Admit>
size_t NthInOrder(const KeyHash& hash, const std::vector<Candidate>& candidates,
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

}  // namespace

Result<size_t> WeightedRendezvous::PickNth(
    std::string_view key, const std::vector<Candidate>& candidates,
    const IdentityTable& table, size_t n) {
  if (table.size() != candidates.size()) return PickError::kTableMismatch;
  if (candidates.empty()) return PickError::kEmpty;
  size_t eligible = 0;
  for (const Candidate& c : candidates) eligible += c.IsEligible() ? 1 : 0;
  if (eligible == 0) return PickError::kNoEligibleCandidates;
  return NthInOrder(KeyHash(key), candidates, table, n % eligible,
                    [](size_t) { return true; });
}

Result<Decision> BoundedLoadRendezvous::DecideNthSampled(
    std::string_view key, const std::vector<Candidate>& candidates,
    const IdentityTable& table, const uint64_t* loads, size_t n) const {
  if (candidates.empty()) return PickError::kEmpty;
  // The contract's errors (point 8), in its order.
  bool any_eligible = false;
  for (const Candidate& c : candidates) any_eligible |= c.IsEligible();
  if (!any_eligible) return PickError::kNoEligibleCandidates;
  const Result<internal::Sums> sums = internal::SumInOrder(candidates, loads);
  if (!sums.ok()) return sums.error();
  const uint64_t total_load = sums.value().total_load;
  const uint64_t total_weight = sums.value().total_weight;
  // Unreachable (an eligible candidate has a weight), but the capacity
  // divides by it.
  if (total_weight == 0) return PickError::kNoEligibleCandidates;
  const auto has_room = [&](size_t i) {
    return UInt128{loads[i]} < Capacity(factor_percent_, total_load,
                                        candidates[i].weight, total_weight);
  };
  size_t with_room = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].IsEligible() && has_room(i)) {
      ++with_room;
    }
  }
  // A factor >= 100 leaves one with room: the capacities sum past L.
  if (with_room == 0) return PickError::kNoEligibleCandidates;  // unreachable
  const KeyHash hash(key);
  const size_t affinity =
      NthInOrder(hash, candidates, table, 0, [](size_t) { return true; });
  const size_t selection =
      NthInOrder(hash, candidates, table, n % with_room, has_room);
  return Decision{affinity, selection, affinity != selection, loads[selection],
                  Capacity(factor_percent_, total_load,
                           candidates[selection].weight, total_weight)};
}

}  // namespace poise
