// A candidate list prepared once for many decisions (a picker's snapshot).
//
// It answers exactly as WeightedRendezvous::Pick and
// BoundedLoadRendezvous::Decide with an IdentityTable do, by one of three
// paths chosen when it is built (path()). With one eligible weight the
// contract's order is the order of z alone (src/core/score_bounds.h proves it
// for a largest z clear of its runner-up), so a pick is one loop over the
// eligible candidates (hash, compare), with no weight groups, no logarithm
// and, when the owner has room, no room search; where the CPU has AVX-512
// the loop hashes and compares eight candidates per register, and reads no
// powers when the identities have one length. What matters is less the
// instructions saved than the code and data a pick touches: inside an RPC
// stack both are cold at every call (docs/performance.md). With exactly two
// weights, every decision keeps both weights' largest z in registers instead
// of searching each candidate's weight, compares the two by certified bounds
// of their scores, and finds a full owner's successor as the one-weight path
// does, per weight. Anything else (more weights, a near-tie between the two
// largest z of a weight, a full owner with no clear successor) takes the
// general path and gets the same answer.
#ifndef POISE_PREPARED_CANDIDATES_H_
#define POISE_PREPARED_CANDIDATES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "poise/identity_table.h"
#include "poise/internal/pass.h"
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

  // Which code serves this list's decisions (chosen once, by the
  // constructor; the answers are the same on every path).
  enum class Path : uint8_t {
    kOneWeight,   // every eligible candidate has one weight
    kTwoWeights,  // exactly two eligible weights
    kGeneral,     // more weights, none eligible, 2^32 or more candidates,
                  // weights summing past 2^64 / 100, or a table that does
                  // not match
  };
  Path path() const { return path_; }

  // WeightedRendezvous::Pick(key, candidates(), table()).
  Result<size_t> Pick(std::string_view key) const;

  // bounded.Decide(key, candidates(), table(), load, scratch): the same
  // answer, with `load` sampled exactly once per eligible candidate.
  template <typename LoadFn>
  Result<Decision> Decide(const BoundedLoadRendezvous& bounded,
                          std::string_view key, LoadFn&& load,
                          DecisionScratch& scratch) const;

  // What a router needs of a bounded decision.
  struct Routed {
    size_t affinity;
    size_t selection;
    bool spilled;
    // RouteWithTotal only (Route leaves it false): the given total was
    // stale, so the bounds came from the sum of the loads read instead.
    bool sampled;
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
                       DecisionScratch& scratch) const;

  // The router's bounded decision when it knows `total_load` (T), the load
  // every bound is computed from (its scope's calls in flight, kept in one
  // counter), rather than the sum of the candidates' loads. The selection is
  // the first eligible candidate in the key's order whose load is below
  // Capacity(factor, T, its weight, W), W the eligible weights' sum:
  //  - the owner's load is read first; below its bound, the owner is the
  //    selection (one load read);
  //  - otherwise the key's order is walked from the owner (one weight: by
  //    descending z; two weights: both weights' orders merged by score),
  //    reading the loads of the candidates visited, each once, up to the
  //    first with room. Nobody after it is read;
  //  - with T equal to the sum of the eligible loads this is exactly
  //    Decide()'s affinity, selection and spilled;
  //  - stale total: if no eligible candidate has room under T (possible
  //    only when T is below the sum of the loads, as the bounds sum to more
  //    than factor (T + 1) / 100 > T), every load has been read by then and
  //    the answer is Decide()'s on those loads (bounds from their sum), with
  //    `sampled` set. A pick never fails because the total was stale; it
  //    fails with kLoadOverflow then if those loads sum past 2^64 - 2.
  //  - where the walk cannot order two candidates of one weight (their z
  //    within 2^-30 of each other: about n 2^-30 of keys, or duplicate
  //    identities), and on Path::kGeneral (three or more weights), the
  //    general search answers by the same rule, having read every eligible
  //    load (once).
  // Errors: those of Decide(), except that loads summing past 2^64 - 1 are
  // no error unless the total is stale; T = 2^64 - 1 (T + 1 does not fit) is
  // kLoadOverflow. src/core/contract.h states the rule as
  // contract::DecideWithTotal.
  template <typename LoadFn>
  Result<Routed> RouteWithTotal(const BoundedLoadRendezvous& bounded,
                                std::string_view key, uint64_t total_load,
                                LoadFn&& load, DecisionScratch& scratch) const;

 private:
  // The paths' steps, described where they are defined:
  // src/core/prepared_candidates.cc, and for the templates (which inline
  // the caller's load function) poise/internal/prepared_paths.h.
  struct Sampled;
  enum class Keep { kNothing, kZ, kZAndLoads };
  static Result<Routed> RoutedFrom(const Result<Decision>& d,
                                   bool sampled = false);
  internal::LargestZ FindLargestZ(uint64_t key_state, uint64_t* z) const;
  bool FindLargestZIntoScratch(std::string_view key, DecisionScratch& scratch,
                               internal::LargestZ& largest) const;
  template <typename LoadFn>
  [[gnu::noinline]] Result<Decision> DecideOneWeight(
      const BoundedLoadRendezvous& bounded, std::string_view key,
      const internal::LargestZ& largest, size_t known, uint64_t known_load,
      LoadFn& load, DecisionScratch& scratch) const;
  template <typename LoadFn>
  Sampled SampleLoads(LoadFn& load, size_t known, uint64_t known_load,
                      DecisionScratch& scratch) const;
  template <typename LoadFn>
  [[gnu::noinline]] Result<Routed> RouteTwoWeights(
      const BoundedLoadRendezvous& bounded, std::string_view key, LoadFn& load,
      DecisionScratch& scratch) const;
  template <Keep kKeep, typename LoadFn>
  internal::PassState TwoWeightPass(uint64_t key_state, LoadFn& load,
                                    DecisionScratch* scratch) const;
  template <typename LoadFn>
  [[gnu::noinline]] Result<Decision> DecideTwoWeightsOrGeneral(
      const BoundedLoadRendezvous& bounded, std::string_view key, LoadFn& load,
      DecisionScratch& scratch) const;
  size_t OwnerOfTwoWeights(const internal::PassState& pass) const;
  Result<size_t> PickTwoWeights(std::string_view key) const;
  Result<Decision> DecideTwoWeights(const BoundedLoadRendezvous& bounded,
                                    const KeyHash& hash,
                                    internal::PassState& pass,
                                    DecisionScratch& scratch, size_t owner,
                                    size_t listed, bool with_capacity) const;
  [[gnu::noinline, gnu::cold]] Result<Decision> RedecideOnGeneralPath(
      const BoundedLoadRendezvous& bounded, std::string_view key,
      DecisionScratch& scratch) const;
  // RouteWithTotal's walk along the key's order (prepared_paths.h).
  struct Walk;
  struct WalkStep;
  Walk StartWalk(uint32_t factor_percent, uint64_t total_load, size_t owner,
                 DecisionScratch& scratch) const;
  void ListLevel(Walk& walk, DecisionScratch& scratch, uint64_t ceiling) const;
  WalkStep NextInKeyOrder(Walk& walk, DecisionScratch& scratch) const;
  void HeadsOfSorted(const Walk& walk, const DecisionScratch& scratch,
                     internal::LargestZ* best) const;
  size_t ListUnvisited(const Walk& walk, DecisionScratch& scratch) const;
  template <typename LoadFn>
  [[gnu::noinline]] Result<Routed> WalkToRoom(
      const BoundedLoadRendezvous& bounded, std::string_view key,
      uint64_t total_load, size_t owner, uint64_t owner_load, LoadFn& load,
      DecisionScratch& scratch) const;
  template <typename LoadFn>
  [[gnu::noinline]] Result<Routed> RouteWithTotalOnGeneralPath(
      const BoundedLoadRendezvous& bounded, std::string_view key,
      uint64_t total_load, LoadFn& load, DecisionScratch& scratch) const;
  static bool FirstIsBetter(const internal::LargestZ& a, uint32_t wa,
                            const internal::LargestZ& b, uint32_t wb);

  std::vector<Candidate> candidates_;
  std::shared_ptr<const IdentityTable> table_;
  Path path_ = Path::kGeneral;
  // The short paths' data, set only on kOneWeight and kTwoWeights (fewer
  // than 2^32 candidates and a weight sum of at most 2^64 / 100, so that
  // 100 W fits in 64 bits).
  std::vector<uint32_t> eligible_;  // ascending, as the contract visits them
  // One weight, some candidates ineligible: bit i % 8 of byte i / 8 is
  // candidate i's eligibility (for the vector kernel); empty otherwise.
  std::vector<uint8_t> eligible_bits_;
  uint32_t weight_ = 0;        // kOneWeight: the weight
  uint64_t total_weight_ = 0;  // the eligible weights' sum (short paths)
  // SurvivorThreshold(eligible_.size(), kSurvivorQuota), once per list:
  // a division saved on every busy owner's decision.
  uint64_t survivor_threshold_ = 0;
  // kTwoWeights: the weights in order of first appearance, as the general
  // pass finds them, and which one each eligible candidate has (by index; 0
  // for the ineligible).
  uint32_t first_weight_ = 0;
  uint32_t second_weight_ = 0;
  std::vector<uint8_t> has_second_;
};

}  // namespace poise

// The templates above, defined apart (not API).
#include "poise/internal/prepared_paths.h"  // IWYU pragma: export

#endif  // POISE_PREPARED_CANDIDATES_H_
