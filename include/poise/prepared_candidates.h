// A candidate list prepared once for many decisions (a picker's snapshot).
//
// It answers exactly as WeightedRendezvous::Pick and
// BoundedLoadRendezvous::Decide with an IdentityTable do, with a short path
// for the common cluster whose eligible candidates all have one weight. There
// the contract's order is the order of z alone (src/core/tournament.h proves
// it for a leader clear of its runner-up), so a pick is one loop over the
// eligible candidates (hash, compare), with no weight groups, no logarithm
// and, when the owner has room, no room search; where the CPU has AVX-512
// the loop hashes and compares eight candidates per register, and reads no
// powers when the identities have one length. What matters is less the
// instructions saved than the code and data a pick touches: inside an RPC
// stack both are cold at every call (docs/bench-e2e.md). With exactly two
// weights, every decision keeps both weights' leaders in registers instead of
// searching each candidate's weight, compares the two leaders by certified
// bounds of their scores, and settles a bounded decision as the one-weight
// path does, per weight. Anything else (more weights, a near-tie between the
// two largest z of a weight, a full owner with no clear successor) takes the
// general path and gets the same answer.
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
  // Which code serves this list's decisions (chosen once, here).
  enum class Path : uint8_t {
    kOneWeight,   // every eligible candidate has one weight
    kTwoWeights,  // exactly two eligible weights
    kGeneral,     // more weights, none eligible, 2^32 or more candidates, or
                  // a table that does not match
  };
  Path path() const { return path_; }

  // WeightedRendezvous::Pick(key, candidates(), table()).
  Result<size_t> Pick(std::string_view key) const;

  // bounded.Decide(key, candidates(), table(), load, scratch): the same
  // answer, with `load` sampled exactly once per eligible candidate.
  template <typename LoadFn>
  Result<Decision> Decide(const BoundedLoadRendezvous& bounded,
                          std::string_view key, LoadFn&& load,
                          DecisionScratch& scratch) const {
    if (path_ != Path::kOneWeight) {
      return DecideGeneral(bounded, key, load, scratch);
    }
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
  // loads (every bound is at least 1), so with one or two weights the
  // owner's load is sampled first and, when it is 0, nobody else's. Each
  // eligible load is sampled at most once. A sum of loads past 2^64 - 1 then
  // goes unreported: the answer did not depend on it.
  template <typename LoadFn>
  Result<Routed> Route(const BoundedLoadRendezvous& bounded,
                       std::string_view key, LoadFn&& load,
                       DecisionScratch& scratch) const {
    if (path_ == Path::kTwoWeights) {
      return RouteTwoWeights(bounded, key, load, scratch);
    }
    Result<Decision> d = PickError::kEmpty;
    if (path_ == Path::kGeneral) {
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
    return RoutedFrom(d);
  }

 private:
  // What Route reports of a decision.
  static Result<Routed> RoutedFrom(const Result<Decision>& d) {
    if (!d.ok()) return d.error();
    return Routed{d.value().affinity, d.value().selection, d.value().spilled};
  }

  // The one-weight leader of the eligible candidates for `key_state`;
  // stores every eligible z in `z` when given (the vector kernel stores the
  // ineligible ones too).
  detail::Leader Lead(uint64_t key_state, uint64_t* z) const;

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
    const Sampled sampled = SampleLoads(load, known, known_load, scratch);
    if (sampled.overflow || sampled.total_load == UINT64_MAX) {
      return PickError::kLoadOverflow;
    }
    if (!detail::Decisive(lead)) return HandOver(bounded, key, scratch);
    // One weight, one bound. Every load here is at most L < 2^64 - 1, so
    // with the bound clamped to 2^64 - 1, load < bound is the exact room
    // test in 64 bits.
    const UInt128 capacity = BoundedLoadRendezvous::Capacity(
        bounded.factor_percent(), sampled.total_load, weight_, total_weight_);
    const uint64_t bound =
        capacity > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(capacity);
    const uint64_t* const loads = scratch.loads_.data();
    const uint64_t* const z = scratch.hashes_.data();
    const uint64_t threshold = sampled.threshold;
    const size_t owner = lead.index;
    size_t selection = owner;
    if (loads[owner] >= bound) {
      detail::Leader room = detail::Leader::Empty();
      for (size_t s = 0; s < sampled.listed; ++s) {
        const size_t i = scratch.survivors_[s];
        room.Offer(z[i], i, loads[i] < bound);
      }
      if (threshold != 0 && room.index == detail::kNone) {
        for (const uint32_t i : eligible_) {
          room.Offer(z[i], i, loads[i] < bound);
        }
      } else if (threshold != 0) {
        detail::BoundUnlisted(room, threshold);
      }
      if (!detail::Decisive(room)) return HandOver(bounded, key, scratch);
      selection = room.index;
    }
    return Decision{owner, selection, selection != owner, loads[selection],
                    capacity};
  }

  // Every eligible load, sampled once into the scratch (the one of index
  // `known`, if any, is `known_load`, sampled already), and in the same
  // loop the survivors listed branch-free: the candidates whose z (in the
  // scratch) reached a threshold that about kSurvivorQuota of them reach,
  // z being uniform. A full owner's successor is usually among them.
  struct Sampled {
    uint64_t total_load = 0;
    bool overflow = false;  // the sum wrapped
    uint64_t threshold;     // 0 for short lists: everyone is listed
    size_t listed = 0;      // in scratch.survivors_, ascending
  };
  template <typename LoadFn>
  Sampled SampleLoads(LoadFn& load, size_t known, uint64_t known_load,
                      DecisionScratch& scratch) const {
    Sampled out;
    out.threshold = survivor_threshold_;
    uint64_t* const loads = scratch.loads_.data();
    const uint64_t* const z = scratch.hashes_.data();
    size_t* const survivors = scratch.survivors_.data();
    const auto sample = [&](uint32_t i, uint64_t sampled) {
      loads[i] = sampled;
      out.overflow |=
          __builtin_add_overflow(out.total_load, sampled, &out.total_load);
      survivors[out.listed] = i;
      out.listed += z[i] >= out.threshold;
    };
    // The loop is split around `known` rather than testing every index
    // against it; its position is its index when every candidate is
    // eligible, else a binary search finds it (eligible_ is ascending).
    const uint32_t* e = eligible_.data();
    const uint32_t* const end = e + eligible_.size();
    const uint32_t* skip = end;
    if (known != detail::kNone) {
      const bool every_candidate_eligible =
          eligible_.size() == candidates_.size();
      skip = every_candidate_eligible
                 ? e + known
                 : std::lower_bound(e, end, static_cast<uint32_t>(known));
    }
    for (; e != skip; ++e) sample(*e, static_cast<uint64_t>(load(size_t{*e})));
    if (e != end) sample(*e++, known_load);
    for (; e != end; ++e) sample(*e, static_cast<uint64_t>(load(size_t{*e})));
    return out;
  }

  // Route with two weights: the owner first, from a pass that keeps every z
  // but samples no load; an idle owner is the answer. Otherwise the others'
  // loads are sampled (with the survivors) and SettleTwoWeights decides.
  template <typename LoadFn>
  [[gnu::noinline]] Result<Routed> RouteTwoWeights(
      const BoundedLoadRendezvous& bounded, std::string_view key, LoadFn& load,
      DecisionScratch& scratch) const {
    if (!scratch.Fit(candidates_.size())) {
      return PickError::kScratchCapacityExceeded;
    }
    const KeyHash hash(key);
    const auto no_load = [](size_t) { return uint64_t{0}; };
    detail::PassState pass =
        TwoWeightPass<Keep::kZ>(hash.state(), no_load, &scratch);
    const size_t owner = BetterLeader(pass);
    uint64_t owner_load = 0;
    if (owner != detail::kNone) {
      owner_load = static_cast<uint64_t>(load(owner));
      if (owner_load == 0) return Routed{owner, owner, false};
    }
    const Sampled sampled = SampleLoads(load, owner, owner_load, scratch);
    pass.total_load = sampled.total_load;
    pass.load_overflow = sampled.overflow;
    return RoutedFrom(SettleTwoWeights(bounded, hash, pass, scratch, owner,
                                       sampled.listed,
                                       /*with_capacity=*/false));
  }

  // The better of the two weights' leaders after TwoWeightPass when both
  // are clear of their runners-up; kNone otherwise (the general finish
  // decides then).
  size_t BetterLeader(const detail::PassState& pass) const;

  // Two weights: the general pass's state with both leaders kept in
  // registers (no per-candidate weight search), then BetterLeader, or the
  // general finish when a leader is not clear of its runner-up.
  Result<size_t> PickTwoWeights(std::string_view key) const;

  // The general pass for two weights, as RunPass builds it: each candidate
  // is offered to both leaders and taken by its own (a refused offer leaves
  // a Leader exactly as it was), so both stay in registers and there is no
  // branch on the weight. It may also keep every z, and sample each eligible
  // load once, into `scratch` (sized by the caller).
  enum class Keep { kNothing, kZ, kZAndLoads };
  template <Keep kKeep, typename LoadFn>
  detail::PassState TwoWeightPass(uint64_t key_state, LoadFn& load,
                                  DecisionScratch* scratch) const {
    constexpr bool kBounded = kKeep == Keep::kZAndLoads;
    detail::Leader first = detail::Leader::Empty();
    detail::Leader second = detail::Leader::Empty();
    uint64_t total_load = 0;
    bool overflow = false;
    uint64_t* const kept_z =
        kKeep != Keep::kNothing ? scratch->hashes_.data() : nullptr;
    uint64_t* const kept_loads = kBounded ? scratch->loads_.data() : nullptr;
    const IdentityTable::KeyRow row = table_->ForKey(key_state);
    const size_t m = eligible_.size();
    for (size_t e = 0; e < m; ++e) {
      const uint32_t i = eligible_[e];
      const uint64_t z = row.Mixed(i);
      if constexpr (kKeep != Keep::kNothing) kept_z[i] = z;
      if constexpr (kBounded) {
        const auto sampled = static_cast<uint64_t>(load(size_t{i}));
        kept_loads[i] = sampled;
        overflow |= __builtin_add_overflow(total_load, sampled, &total_load);
      }
      const bool is_second = has_second_[i] != 0;
      first.Offer(z, i, !is_second);
      second.Offer(z, i, is_second);
    }
    detail::PassState pass;
    pass.groups[0] =
        detail::WeightGroup{first_weight_, first, detail::Leader::Empty()};
    pass.groups[1] =
        detail::WeightGroup{second_weight_, second, detail::Leader::Empty()};
    pass.group_count = 2;
    pass.total_load = total_load;
    pass.load_overflow = overflow;
    pass.total_weight = uint64_t{first_weight_} * first.count +
                        uint64_t{second_weight_} * second.count;
    return pass;
  }

  // Mixed weights: the general path, or for two weights TwoWeightPass and
  // SettleTwoWeights. Out of line, so that the one-weight path's code stays
  // a few contiguous cache lines.
  template <typename LoadFn>
  [[gnu::noinline]] Result<Decision> DecideGeneral(
      const BoundedLoadRendezvous& bounded, std::string_view key, LoadFn& load,
      DecisionScratch& scratch) const {
    if (path_ == Path::kGeneral) {
      return bounded.Decide(key, candidates_, *table_, load, scratch);
    }
    if (!scratch.Fit(candidates_.size())) {
      return PickError::kScratchCapacityExceeded;
    }
    const KeyHash hash(key);
    detail::PassState pass =
        TwoWeightPass<Keep::kZAndLoads>(hash.state(), load, &scratch);
    return SettleTwoWeights(bounded, hash, pass, scratch, BetterLeader(pass),
                            detail::kNone, /*with_capacity=*/true);
  }
  // The decision after a two-weight pass that kept every z and every load,
  // as Settle makes it for one weight: `owner` is BetterLeader(pass) (kNone:
  // the general finish decides); a full owner's successor is the better of
  // each weight's best member with room among the survivors (`listed` of
  // them in the scratch, as SampleLoads lists them; kNone: listed here). A
  // weight none of whose survivors has room drops out when its unlisted
  // members provably score worse. Anything else takes the general finish.
  // Without `with_capacity` the short paths leave selected_capacity 0.
  Result<Decision> SettleTwoWeights(const BoundedLoadRendezvous& bounded,
                                    const KeyHash& hash,
                                    detail::PassState& pass,
                                    DecisionScratch& scratch, size_t owner,
                                    size_t listed, bool with_capacity) const;
  // The general path, on the loads the short path sampled into `scratch`.
  // Out of line: with one weight it runs only for a near-tie.
  [[gnu::noinline, gnu::cold]] Result<Decision> HandOver(
      const BoundedLoadRendezvous& bounded, std::string_view key,
      DecisionScratch& scratch) const;

  std::vector<Candidate> candidates_;
  std::shared_ptr<const IdentityTable> table_;
  Path path_ = Path::kGeneral;
  // The short paths' data, set only when the eligible candidates have one or
  // two weights, there are fewer than 2^32 candidates (so the weights' sum
  // fits in 64 bits) and the table matches.
  std::vector<uint32_t> eligible_;  // ascending, as the contract visits them
  // One weight, some candidates ineligible: bit i % 8 of byte i / 8 is
  // candidate i's eligibility (for the vector kernel); empty otherwise.
  std::vector<uint8_t> eligible_bits_;
  uint32_t weight_ = 0;  // the one weight; 0: not one weight
  uint64_t total_weight_ = 0;
  // SurvivorThreshold(eligible_.size(), kSurvivorQuota), once per list:
  // a division saved on every busy owner's decision.
  uint64_t survivor_threshold_ = 0;
  // Two weights: in order of first appearance, as the general pass finds
  // them, and which one each eligible candidate has (by index; 0 for the
  // ineligible).
  uint32_t first_weight_ = 0;
  uint32_t second_weight_ = 0;  // 0: not the two-weight path
  std::vector<uint8_t> has_second_;
};

}  // namespace poise

#endif  // POISE_PREPARED_CANDIDATES_H_
