// A candidate list prepared once for many decisions (a picker's snapshot),
// answering the two questions a router asks of it: who owns a key (Pick),
// and where a bounded call goes given the calls in flight that its bounds
// count (RouteWithTotal). The answers are the contract's (src/core/contract.h:
// K6 and K9); which path computes them is chosen once, when the list is
// prepared (prepared_list.h). Private to the core and the router.
#ifndef POISE_SRC_CORE_PREPARED_CANDIDATES_H_
#define POISE_SRC_CORE_PREPARED_CANDIDATES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "poise/identity_table.h"
#include "poise/in_flight.h"
#include "poise/rendezvous.h"
#include "poise/types.h"
#include "prepared_list.h"

namespace poise {

class PreparedCandidates final {
 public:
  using Path = internal::ListPath;

  // `table` must hold the identities of `candidates`, in order; with a
  // missing or different table every decision fails with kTableMismatch.
  // Identities stay borrowed, as in Candidate.
  PreparedCandidates(std::vector<Candidate> candidates,
                     std::shared_ptr<const IdentityTable> table);

  const std::vector<Candidate>& candidates() const { return list_.candidates; }
  const IdentityTable& table() const { return *list_.table; }
  // Which code serves this list's decisions (the answers are the same).
  Path path() const { return list_.path; }

  // WeightedRendezvous::Pick(key, candidates(), table()).
  Result<size_t> Pick(std::string_view key) const;

  // The first `count` eligible candidates in the key's order (the
  // contract's K5, the owner first) into `out`; returns how many were
  // written. Fewer than `count` when fewer are eligible, or where the order
  // is not certified without the general search: then the prefix ends
  // before the first near-tie of z (score_bounds.h) after the owner, and is
  // empty on the general path (three or more weights) or when the owner
  // itself is in a near-tie. One hashing pass (what Pick costs) and a walk
  // of the key's order (key_order_walk.h), reading no load. What a cache of
  // key orders stores (src/router/key_cache.h).
  size_t OrderPrefix(std::string_view key, size_t count, uint32_t* out,
                     DecisionScratch& scratch) const;

  // What a router needs of a bounded decision.
  struct Routed {
    size_t affinity;
    size_t selection;
    bool spilled;
    // The given total was below the loads read (a counter caught between
    // its slot and the total), so no candidate had room under it; the
    // bounds then came from the sum of the loads read instead.
    bool stale_total;
  };

  // Reads candidate i's load for RouteWithTotal: any callable size_t ->
  // uint64_t, borrowed for the call (tests, tools, benchmarks).
  class LoadReader final {
   public:
    template <typename Fn>
    // NOLINTNEXTLINE(google-explicit-constructor): a lambda converts.
    LoadReader(const Fn& fn)
        : context_(&fn), read_([](const void* context, size_t i) {
            return static_cast<uint64_t>((*static_cast<const Fn*>(context))(i));
          }) {}
    uint64_t operator()(size_t i) const { return read_(context_, i); }

   private:
    const void* context_;
    uint64_t (*read_)(const void*, size_t);
  };

  // The bounded decision when the caller knows `total_load` (T), the calls
  // in flight every bound counts (a load scope's, kept in one counter),
  // rather than the sum of the candidates' loads (the contract's K9). The
  // selection is the first eligible candidate in the key's order whose
  // load is below its Bound for T:
  //  - the owner's load is read first; with room, the owner is the selection
  //    (one load read);
  //  - otherwise, on lists of 512 or more eligible candidates, the key's
  //    order is walked from the owner (key_order_walk.h), reading the loads
  //    of the candidates visited, each once, up to the first with room or
  //    n / 32 of them (a mostly saturated list); then, and at once on
  //    shorter lists, every other eligible load is read and the first with
  //    room comes from one pass over all of them
  //    (WalkVisitsBeforeReadingAll);
  //  - with T equal to the sum of the eligible loads this is exactly
  //    Decide()'s affinity, selection and spilled;
  //  - a stale T (no candidate has room: T below the loads' sum) answers as
  //    Decide() on the loads, having read every one, with `stale_total`;
  //  - where the short paths cannot order two candidates of one weight
  //    (their z within 2^-30 of each other, or duplicate identities), and
  //    on the general path, the general search answers by the same rule,
  //    having read every eligible load once.
  // Errors: those of Decide(), except that loads summing past 2^64 - 1 are
  // no error unless T is stale; T = 2^64 - 1 is kLoadOverflow.
  //
  // The router's form reads `counters[i]->Load()`; the other any reader.
  Result<Routed> RouteWithTotal(const BoundedLoadRendezvous& bounded,
                                std::string_view key, uint64_t total_load,
                                const InFlightCounter* const* counters,
                                DecisionScratch& scratch) const;

  // Which loads RouteWithTotal reads after a full owner. kCheapest: as
  // above (every load at once below 512 candidates, and on the general
  // path). kAlongOrder: only those of the candidates before the selection
  // in the key's order and the selection's, for a reader whose reads are
  // not free of effect (serverLoad: each read is an ask, fleet_load.h); on
  // the general path the contract's ranking is computed for it (exact
  // scores, O(n log n)). Either way the answer is the same. Should a walk
  // meet two z it cannot order (within 2^-30 of each other, fewer than one
  // pick in 2^20 at n = 1,000) it reads the rest too.
  enum class Reads : uint8_t { kCheapest, kAlongOrder };
  Result<Routed> RouteWithTotal(const BoundedLoadRendezvous& bounded,
                                std::string_view key, uint64_t total_load,
                                LoadReader load, DecisionScratch& scratch,
                                Reads reads = Reads::kCheapest) const;

  // How many candidates after a full owner RouteWithTotal's walk visits, at
  // most, before it reads every load (the same answers whatever the
  // number). Unset: WalkVisitsBeforeReadingAll (key_order_walk.h); 0: every
  // load is read as soon as the owner is full (the route before the walk,
  // which the benchmarks compare against). Set it before sharing the list.
  void set_walk_visits(size_t visits);

 private:
  internal::PreparedList list_;
  size_t walk_visits_ = static_cast<size_t>(-1);  // see set_walk_visits
};

// A retry's k-th choice when the caller knows `total_load`, the calls in
// flight every bound counts (serverLoad's L, capped per backend), rather
// than the sum of the loads (BoundedLoadRendezvous::DecideNth): among the
// eligible `candidates` whose load is below its Bound for the total, the
// (n mod m + 1)-th of those m in the key's order; with none (a stale total),
// DecideNth's selection on the same loads. Reads every eligible load once.
// Errors: kTableMismatch, then DecideNth's (an empty list, none eligible,
// weights past 2^64 - 1), then kLoadOverflow for a total of 2^64 - 1.
Result<size_t> NthWithRoomForTotal(const BoundedLoadRendezvous& bounded,
                                   std::string_view key,
                                   const std::vector<Candidate>& candidates,
                                   const IdentityTable& table,
                                   uint64_t total_load,
                                   PreparedCandidates::LoadReader load,
                                   size_t n, DecisionScratch& scratch);

}  // namespace poise

#endif  // POISE_SRC_CORE_PREPARED_CANDIDATES_H_
