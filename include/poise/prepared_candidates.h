// A candidate list prepared once for many decisions (a picker's snapshot).
//
// It answers exactly as WeightedRendezvous::Pick and
// BoundedLoadRendezvous::Decide with an IdentityTable do, with a short path
// for the common cluster whose eligible candidates all have one weight. There
// the contract's order is the order of z alone (src/core/tournament.h proves
// it for a leader clear of its runner-up), so a pick is one loop over the
// eligible candidates (hash, compare), with no weight groups, no logarithm
// and, when the owner has room, no room search. What matters is less the
// instructions saved than the code and data a pick touches: inside an RPC
// stack both are cold at every call (docs/bench-e2e.md). With exactly two
// weights, every decision keeps both weights' leaders in registers instead of
// searching each candidate's weight, then finishes as the general path does.
// Anything else (more weights, a near-tie between the two largest z, a full
// owner with no clear successor) takes the general path and gets the same
// answer.
#ifndef POISE_PREPARED_CANDIDATES_H_
#define POISE_PREPARED_CANDIDATES_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "poise/detail/pass.h"
#include "poise/hash.h"
#include "poise/identity_table.h"
#include "poise/rendezvous.h"

namespace poise {

class PreparedCandidates final {
 public:
  // `table` must hold the identities of `candidates`, in order; with a
  // missing or different table every decision fails with kTableMismatch.
  // Identities stay borrowed, as in Candidate.
  PreparedCandidates(std::vector<Candidate> candidates,
                     std::shared_ptr<const IdentityTable> table);

  const std::vector<Candidate>& candidates() const { return candidates_; }
  const IdentityTable& table() const { return *table_; }
  // Whether decisions can take the short path (every eligible candidate has
  // one weight); for tests and benchmarks.
  bool one_weight() const { return weight_ != 0; }
  // Whether decisions take the two-weight path (exactly two eligible
  // weights); for tests and benchmarks.
  bool two_weights() const { return second_weight_ != 0; }

  // WeightedRendezvous::Pick(key, candidates(), table()).
  Result<size_t> Pick(std::string_view key) const;

  // bounded.Decide(key, candidates(), table(), load, scratch): the same
  // answer, with `load` sampled exactly once per eligible candidate.
  template <typename LoadFn>
  Result<Decision> Decide(const BoundedLoadRendezvous& bounded,
                          std::string_view key, LoadFn&& load,
                          DecisionScratch& scratch) const {
    if (weight_ == 0) return DecideGeneral(bounded, key, load, scratch);
    detail::Leader lead;
    if (!LeadInto(key, scratch, lead)) {
      return PickError::kScratchCapacityExceeded;
    }
    return Settle(bounded, key, lead, detail::kNone, 0, load, scratch);
  }

  // What a router needs of a bounded decision.
  struct Routed {
    size_t affinity;
    size_t selection;
    bool spilled;
  };

  // The affinity, selection and spilled of Decide(bounded, key, load,
  // scratch), sampling less: an idle owner has room whatever the others'
  // loads (every bound is at least 1), so with one weight the owner's load
  // is sampled first and, when it is 0, nobody else's. Each eligible load is
  // sampled at most once. A sum of loads past 2^64 - 1 then goes unreported:
  // the answer did not depend on it.
  template <typename LoadFn>
  Result<Routed> Route(const BoundedLoadRendezvous& bounded,
                       std::string_view key, LoadFn&& load,
                       DecisionScratch& scratch) const {
    Result<Decision> d = PickError::kEmpty;
    if (weight_ == 0) {
      d = DecideGeneral(bounded, key, load, scratch);
    } else {
      detail::Leader lead;
      if (!LeadInto(key, scratch, lead)) {
        return PickError::kScratchCapacityExceeded;
      }
      size_t known = detail::kNone;
      uint64_t known_load = 0;
      if (detail::Decisive(lead)) {
        known = lead.index;
        known_load = static_cast<uint64_t>(load(known));
        if (known_load == 0) return Routed{known, known, false};
      }
      d = Settle(bounded, key, lead, known, known_load, load, scratch);
    }
    if (!d.ok()) return d.error();
    return Routed{d.value().affinity, d.value().selection, d.value().spilled};
  }

 private:
  // The one-weight leader (the first eligible index with the largest z, and
  // the largest z among the others), with every eligible z stored in the
  // scratch, sized for the list; false if it could not grow. Out of line:
  // the code of the common path stays a few contiguous cache lines.
  bool LeadInto(std::string_view key, DecisionScratch& scratch,
                detail::Leader& lead) const;

  // A one-weight decision after LeadInto(): samples
  // every eligible load (the one of index `known`, if any, is `known_load`,
  // sampled already). With one weight the key's order is the order of z
  // (tournament.h), so the selection is the owner if it has room, else the
  // largest z among those with room; either only when clear of its
  // runner-up, like the general path's own shortcut. Anything else hands
  // over to the general path.
  template <typename LoadFn>
  [[gnu::noinline]] Result<Decision> Settle(
      const BoundedLoadRendezvous& bounded, std::string_view key,
      const detail::Leader& lead, size_t known, uint64_t known_load,
      LoadFn& load, DecisionScratch& scratch) const {
    uint64_t* const loads = scratch.loads_.data();
    const uint64_t* const z = scratch.hashes_.data();
    // The survivors: the candidates whose z reached a threshold that about
    // kSurvivorQuota of them reach (z is uniform), listed branch-free in the
    // same loop. If the owner is full, the best candidate with room is among
    // them unless none of them has room (then all are searched).
    size_t* const survivors = scratch.survivors_.data();
    const uint64_t threshold =
        detail::SurvivorThreshold(eligible_.size(), detail::kSurvivorQuota);
    size_t listed = 0;
    uint64_t total_load = 0;
    bool overflow = false;
    const auto sample = [&](uint32_t i, uint64_t sampled) {
      loads[i] = sampled;
      overflow |= __builtin_add_overflow(total_load, sampled, &total_load);
      survivors[listed] = i;
      listed += z[i] >= threshold;
    };
    // The loop is split around `known` (found by binary search: eligible_
    // is ascending) rather than testing every index against it.
    const uint32_t* e = eligible_.data();
    const uint32_t* const end = e + eligible_.size();
    const uint32_t* const skip =
        known == detail::kNone
            ? end
            : std::lower_bound(e, end, static_cast<uint32_t>(known));
    for (; e != skip; ++e) sample(*e, static_cast<uint64_t>(load(size_t{*e})));
    if (e != end) sample(*e++, known_load);
    for (; e != end; ++e) sample(*e, static_cast<uint64_t>(load(size_t{*e})));
    if (overflow || total_load == UINT64_MAX) return PickError::kLoadOverflow;
    if (!detail::Decisive(lead)) return HandOver(bounded, key, scratch);
    // One weight, one bound. Capacity saturates at 2^64 - 1, above every
    // load here (each is at most L < 2^64 - 1), so load < capacity is the
    // exact room test.
    const uint64_t capacity = BoundedLoadRendezvous::Capacity(
        bounded.factor_percent(), total_load, weight_, total_weight_);
    const size_t owner = lead.index;
    size_t selection = owner;
    if (loads[owner] >= capacity) {
      detail::Leader room = detail::Leader::Empty();
      for (size_t s = 0; s < listed; ++s) {
        const size_t i = survivors[s];
        room.Offer(z[i], i, loads[i] < capacity);
      }
      if (threshold != 0 && room.index == detail::kNone) {
        for (const uint32_t i : eligible_) {
          room.Offer(z[i], i, loads[i] < capacity);
        }
      } else if (threshold != 0) {
        // Those not listed have z < threshold: the runner-up's bound.
        room.count = std::max<size_t>(room.count, 2);
        room.runner_up = std::max(room.runner_up, threshold - 1);
      }
      if (!detail::Decisive(room)) return HandOver(bounded, key, scratch);
      selection = room.index;
    }
    return Decision{owner, selection, selection != owner, loads[selection],
                    capacity};
  }

  // Two weights: the general pass's state with both leaders kept in
  // registers (no per-candidate weight search), then the general finish.
  Result<size_t> PickTwoWeights(std::string_view key) const;

  // The general pass for two weights, as RunPass builds it: each candidate
  // is offered to both leaders and taken by its own (a refused offer leaves
  // a Leader exactly as it was), so both stay in registers and there is no
  // branch on the weight. Bounded, it also keeps every z and samples each
  // eligible load once into `scratch` (sized by the caller).
  template <bool kBounded, typename LoadFn>
  detail::PassState TwoWeightPass(uint64_t key_state, LoadFn& load,
                                  DecisionScratch* scratch) const {
    detail::Leader first = detail::Leader::Empty();
    detail::Leader second = detail::Leader::Empty();
    uint64_t total_load = 0;
    bool overflow = false;
    uint64_t* const kept_z = kBounded ? scratch->hashes_.data() : nullptr;
    uint64_t* const kept_loads = kBounded ? scratch->loads_.data() : nullptr;
    // Bounded, the first level of the room search's survivors is listed
    // here, branch-free, rather than in a second pass over every z.
    size_t* const survivors = kBounded ? scratch->survivors_.data() : nullptr;
    const uint64_t threshold =
        detail::SurvivorThreshold(candidates_.size(), detail::kSurvivorQuota);
    size_t listed = 0;
    const IdentityTable::KeyRow row = table_->ForKey(key_state);
    const size_t m = eligible_.size();
    for (size_t e = 0; e < m; ++e) {
      const uint32_t i = eligible_[e];
      const uint64_t z = row.Mixed(i);
      if constexpr (kBounded) {
        kept_z[i] = z;
        const auto sampled = static_cast<uint64_t>(load(size_t{i}));
        kept_loads[i] = sampled;
        overflow |= __builtin_add_overflow(total_load, sampled, &total_load);
        survivors[listed] = i;
        listed += z >= threshold;
      }
      const bool is_second = has_second_[e] != 0;
      first.Offer(z, i, !is_second);
      second.Offer(z, i, is_second);
    }
    detail::PassState pass;
    pass.groups[0] =
        detail::WeightGroup{first_weight_, first, detail::Leader::Empty()};
    pass.groups[1] =
        detail::WeightGroup{second_weight_, second, detail::Leader::Empty()};
    pass.group_count = 2;
    if constexpr (kBounded) {
      pass.total_load = total_load;
      pass.load_overflow = overflow;
      pass.total_weight = uint64_t{first_weight_} * first.count +
                          uint64_t{second_weight_} * second.count;
      pass.survivors_listed = listed;
    }
    return pass;
  }

  // Mixed weights: the general path, or for two weights TwoWeightPass and
  // the general finish. Out of line, so that the one-weight path's code
  // stays a few contiguous cache lines.
  template <typename LoadFn>
  [[gnu::noinline]] Result<Decision> DecideGeneral(
      const BoundedLoadRendezvous& bounded, std::string_view key, LoadFn& load,
      DecisionScratch& scratch) const {
    if (second_weight_ == 0) {
      return bounded.Decide(key, candidates_, *table_, load, scratch);
    }
    if (!scratch.Fit(candidates_.size())) {
      return PickError::kScratchCapacityExceeded;
    }
    const KeyHash hash(key);
    detail::PassState pass = TwoWeightPass<true>(hash.state(), load, &scratch);
    return bounded.FinishDecision(hash, candidates_, table_.get(), scratch,
                                  pass);
  }
  // The general path, on the loads the short path sampled into `scratch`.
  // Out of line: with one weight it runs only for a near-tie.
  [[gnu::noinline, gnu::cold]] Result<Decision> HandOver(
      const BoundedLoadRendezvous& bounded, std::string_view key,
      DecisionScratch& scratch) const;

  std::vector<Candidate> candidates_;
  std::shared_ptr<const IdentityTable> table_;
  // The short paths' data, set only when the eligible candidates have one or
  // two weights, their sum fits in 32 bits and the table matches.
  std::vector<uint32_t> eligible_;  // ascending, as the contract visits them
  uint32_t weight_ = 0;             // the one weight; 0: not one weight
  uint32_t total_weight_ = 0;
  // Two weights: in order of first appearance, as the general pass finds
  // them, and which one each eligible candidate has (parallel to eligible_).
  uint32_t first_weight_ = 0;
  uint32_t second_weight_ = 0;  // 0: not the two-weight path
  std::vector<uint8_t> has_second_;
};

}  // namespace poise

#endif  // POISE_PREPARED_CANDIDATES_H_
