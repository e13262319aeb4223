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
    // The selection's capacity under the bounds that chose it (saturated).
    uint64_t capacity = 0;
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
    // As a load view of the core's walk (key_order.h).
    uint64_t Load(size_t i) const { return (*this)(i); }
    static bool Admits(size_t /*i*/) { return true; }

   private:
    const void* context_;
    uint64_t (*read_)(const void*, size_t);
  };

  // The bounded decision when the caller knows `total_load` (T), the calls
  // in flight every bound counts (a load scope's, kept in one counter),
  // rather than the sum of the candidates' loads (the contract's K9): the
  // first eligible candidate in the key's order whose load is below its
  // Bound for T, by the one walk of src/core/key_order.h (the key hashed
  // once). It reads the loads of the candidates it visits, the owner first,
  // each once, and no other (under serverLoad each read is an ask,
  // fleet_load.h; and reading every load at once is no faster,
  // bench/core_bench.cc BM_PairedSaturated). With T equal to the sum of the
  // eligible loads this is exactly Decide()'s affinity, selection and
  // spilled; a stale T (no candidate has room: T below the loads' sum)
  // answers as Decide() on the loads, having read every one, with
  // `stale_total`. Errors: those of Decide(), except that loads summing
  // past 2^64 - 1 are no error unless T is stale; T = 2^64 - 1 is
  // kLoadOverflow.
  //
  // The router's form reads `counters[i]->Load()`; the other any reader.
  Result<Routed> RouteWithTotal(const BoundedLoadRendezvous& bounded,
                                std::string_view key, uint64_t total_load,
                                const InFlightCounter* const* counters,
                                DecisionScratch& scratch) const;
  Result<Routed> RouteWithTotal(const BoundedLoadRendezvous& bounded,
                                std::string_view key, uint64_t total_load,
                                LoadReader load,
                                DecisionScratch& scratch) const;

  // A retry's k-th choice when the caller knows `total_load`, the calls in
  // flight every bound counts (serverLoad's L, capped per backend), rather
  // than the sum of the loads (BoundedLoadRendezvous::DecideNth): among the
  // eligible candidates whose load is below its Bound for the total, the
  // (n mod m + 1)-th of those m in the key's order; with none (a stale
  // total), DecideNth's selection on the same loads. The same walk as
  // RouteWithTotal with another stop: it reads the loads of the candidates
  // it visits, every eligible one only for an n past m or a stale total.
  // Errors: RouteWithTotal's.
  Result<Routed> NthWithRoomForTotal(const BoundedLoadRendezvous& bounded,
                                     std::string_view key, uint64_t total_load,
                                     LoadReader load, size_t n,
                                     DecisionScratch& scratch) const;

  // The prepared list, for the walk of src/core/key_order.h (the router
  // runs it with its own load views).
  const internal::PreparedList& list() const { return list_; }

 private:
  internal::PreparedList list_;
};

}  // namespace poise

#endif  // POISE_SRC_CORE_PREPARED_CANDIDATES_H_
