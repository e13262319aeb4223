// The backends a policy routes over: the resolver's addresses with identity
// and weight resolved, de-duplicated, each with its in-flight cell.
#ifndef POISE_SRC_ROUTER_BACKEND_SET_H_
#define POISE_SRC_ROUTER_BACKEND_SET_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "poise/identity_table.h"
#include "poise/in_flight.h"
#include "src/router/call_metrics.h"
#include "src/router/config.h"
#include "src/router/connectivity.h"
#include "src/router/fleet_load.h"
#include "src/router/load_scope.h"
#include "src/router/made_on_first_use.h"

namespace poise::router {

// Per-backend-identity state of one channel, shared by the backend set, every
// picker generation and every call still in flight to it (SharedCounter), so
// a call that outlives its backend's removal still releases into the right
// counter. One allocation per backend and channel, kept small: a process may
// hold 100 channels to 1,000 backends.
class BackendCell final {
 public:
  // Counts in a counter of its own, into `scope`'s total (a channel's own
  // scope, for an identity it has no counter of yet).
  explicit BackendCell(const std::shared_ptr<LoadScope>& scope)
      : own_(InFlightCounter::kNoLimit, scope->mutable_total()),
        in_flight(&own_),
        keep_(scope) {}
  // Counts in `shared` (a named scope's counter of the identity, or the one
  // it had before it left the list).
  explicit BackendCell(std::shared_ptr<InFlightCounter> shared)
      : in_flight(shared.get()), keep_(std::move(shared)) {}
  BackendCell(const BackendCell&) = delete;
  BackendCell& operator=(const BackendCell&) = delete;

 private:
  InFlightCounter own_;  // unused when counting in a shared counter

 public:
  // The identity's calls in flight in the channel's load scope: this
  // channel's alone (loadScope CHANNEL) or every channel's of the scope.
  InFlightCounter* const in_flight;
  // This channel's picks of the backend.
  std::atomic<uint64_t> picks{0};
  // This channel's other counts of the backend, made at the first of them:
  // a channel may list 1,000 backends that it never calls (288 bytes). The
  // spill and retry counts live here, not in the cell, to keep the cell in
  // its allocation chunk (the size check in backend_set.cc).
  struct Counts {
    std::atomic<uint64_t> spilled_in{0};  // picks past a full owner
    std::atomic<uint64_t> retried_in{0};  // picks of retries
    std::atomic<uint64_t> refused{0};     // calls refused at their bound
    CallMetrics calls;                    // calls ended (call trackers)
  };
  MadeOnFirstUse<Counts> counts;
  // The state the backend's subchannel last reported (the policy's work
  // serializer writes it; snapshots read it).
  std::atomic<Connectivity> connectivity{Connectivity::kIdle};
  // serverLoad: the backend's latest report of its calls in flight, and how
  // often this channel's picks ask for it (the herding rule).
  struct Fleet {
    ReportSlot report;
    AskRate asks;
    // Sums of L that counted this backend only up to its own bound.
    std::atomic<uint64_t> capped{0};
  };
  // Made by the first caller, on any thread (cells without serverLoad have
  // none: 56 bytes less per backend and channel).
  Fleet& fleet() { return fleet_.Get(); }
  // Null until someone needed it (no report then).
  const Fleet* fleet_if_made() const { return fleet_.IfMade(); }

 private:
  MadeOnFirstUse<Fleet> fleet_;
  // What `in_flight` counts into: the scope (own_'s total) or the shared
  // counter.
  std::shared_ptr<const void> keep_;
};

// `cell`'s in-flight counter, keeping the cell (and so what it counts into)
// alive: what a call's slot holds.
inline std::shared_ptr<InFlightCounter> SharedCounter(
    const std::shared_ptr<BackendCell>& cell) {
  return {cell, cell->in_flight};
}

// `s` as absl's string_view (a type of its own in the absl this builds
// with), for heterogeneous lookups in absl containers keyed by std::string.
inline absl::string_view AbslView(std::string_view s) {
  return {s.data(), s.size()};
}

// One address as the resolver gave it.
struct ResolverEntry {
  std::string address;  // the text gRPC prints for it (NormalizeAddress)
  std::optional<uint32_t> weight;       // the resolver's weight attribute
  std::optional<std::string> identity;  // the per-address identity attribute
  std::optional<std::string> zone = std::nullopt;  // the zone attribute
};

// ListedBackend::zone of a backend without a zone.
inline constexpr uint32_t kNoZone = UINT32_MAX;

// One backend as a BackendList lists it: its address, identity, weight and
// in-flight cell. Its strings are borrowed from the list that holds it (valid
// while the BackendList lives): the identity from the shared table's row, the
// address from the same row when it is the identity (the default), else from
// the list's own buffer.
struct ListedBackend {
  std::string_view address;
  std::string_view identity;  // the string hashed for it
  uint32_t weight;
  std::shared_ptr<BackendCell> cell;
  // Its zone (B5): an index into BackendList::zones, or kNoZone.
  uint32_t zone = kNoZone;
};

// One update's result, immutable: shared by the set, the pickers built from
// it and the statistics, so none copies identities.
struct BackendList {
  BackendList() = default;
  // Not copyable: the backends' strings point into this list's buffer.
  BackendList(const BackendList&) = delete;
  BackendList& operator=(const BackendList&) = delete;

  std::vector<ListedBackend> backends;  // resolver order
  // The backends' identities hashed ahead, in order; null when empty. From
  // the process-wide internal::IdentityStore: every list of the process
  // naming the same identities in the same order holds the same table, and
  // it owns the identity strings the backends borrow.
  std::shared_ptr<const IdentityTable> table;
  // Where the backends' calls in flight count (never null).
  std::shared_ptr<LoadScope> scope;
  // The addresses that are not their backend's identity, end to end.
  std::unique_ptr<char[]> address_bytes;
  // The backends' distinct zones, in order of first appearance.
  std::vector<std::string> zones;

  // The index of `zone` in `zones`; kNoZone when no backend is in it.
  uint32_t ZoneIndex(std::string_view zone) const;
};

// The current backend list and the cells of the identities it has known.
//
// Resolution, per resolver entry, in resolver order (with their tests:
// docs/rules.md):
//   B1. a backend is an identity, not an address: entries of one address
//       under different identities (two DNS names of one pod, a CNAME beside
//       its target) are a backend each, with a subchannel each, so every
//       identity's keys go to its owner's address as they would over the
//       identities alone; an entry repeating an address and its identity
//       is a duplicate identity (B3);
//   B2. the backend's endpoints[] entry is the one with its address, else
//       the one without an address whose identity is the entry's identity
//       attribute (when not empty), else its address text; its identity:
//       the endpoints[] entry's identity, else the identity attribute (when
//       not empty), else the address text;
//   B3. an identity already listed is dropped (one backend per identity, the
//       first wins: two backends hashed as one would split one owner's keys
//       between them by list position);
//   B4. weight: the backend's endpoints[] entry's weight, else the
//       entry's weight attribute (when above 0), else defaultWeight;
//   B5. zone: the backend's endpoints[] entry's zone, else the entry's zone
//       attribute when it is a valid zone (C10), else the zone of the first
//       zoneByIdentitySuffix entry whose suffix ends the backend's identity,
//       else none.
// Each step is a hash-map lookup: an update is linear in the entries.
//
// A listed identity keeps its cell (its statistics) across updates; one that
// leaves and returns starts a new cell. The cell's in-flight counter comes
// from the set's LoadScope, which finds it by identity while anyone holds it:
// an identity that returns while its calls are in flight gets the same
// counter back. The IdentityTable is kept when an update lists the same
// identities in the same order (a re-resolution); otherwise it comes from
// the process-wide internal::IdentityStore, which hashes only identities no
// live table has and shares the table with every set naming the same
// sequence.
//
// Not thread-safe: the policy updates it from its work serializer (sets of
// different channels may update concurrently: the store is thread-safe).
// The lists it hands out are immutable and safe to share.
class BackendSet final {
 public:
  // What Update() asks its caller about each backend it is about to list.
  struct Admission {
    size_t entry;  // index into the resolver entries
    // The previous list's backend whose subchannel this one takes over: the
    // one of the same address and identity, else one of the same address
    // whose address and identity no entry repeats (an address renamed);
    // nullopt: none. No previous backend is named twice in one update.
    std::optional<size_t> previous;
  };
  // Returns whether the backend may be listed (false: the caller could not
  // connect it; the entry is skipped as if absent).
  using Admit = absl::FunctionRef<bool(const Admission&)>;

  // What an update did, for logs.
  struct UpdateReport {
    size_t shared_addresses = 0;      // backends listed at an address an
                                      // earlier backend has (B1)
    size_t duplicate_identities = 0;  // entries dropped by B3
    size_t refused = 0;               // entries admit() refused
    bool table_rebuilt = false;       // false: the previous table was kept
                                      // (true also when the store had it)
  };

  // Counts calls in flight in a scope of its own until SetLoadScope().
  BackendSet();

  // Counts the calls of the backends listed from the next Update() on in
  // `scope`. A different scope starts every backend's cell again (calls in
  // flight still release into their old counters).
  void SetLoadScope(std::shared_ptr<LoadScope> scope);
  const std::shared_ptr<LoadScope>& load_scope() const { return scope_; }

  // Replaces the list with `entries` resolved by `config` (validated).
  // `admit` is called once per backend to be listed, in list order, so a
  // caller that appends per admitted backend stays aligned with backends().
  UpdateReport Update(const std::vector<ResolverEntry>& entries,
                      const Config& config, Admit admit);
  // The same, admitting every backend.
  UpdateReport Update(const std::vector<ResolverEntry>& entries,
                      const Config& config);
  // Empties the list (the cells of calls in flight stay valid).
  void Clear();

  const std::shared_ptr<const BackendList>& list() const { return list_; }
  const std::vector<ListedBackend>& backends() const { return list_->backends; }
  const std::shared_ptr<const IdentityTable>& table() const {
    return list_->table;
  }
  size_t size() const { return list_->backends.size(); }
  bool empty() const { return list_->backends.empty(); }

 private:
  // B1-B4 over `entries`, in resolver order, into `next` (its strings
  // borrowed from `entries` and `config`), with the cells of identities
  // `previous` lists when `same_scope`. Returns the identities listed.
  absl::flat_hash_set<std::string_view> ListEntries(
      const std::vector<ResolverEntry>& entries, const Config& config,
      Admit admit, const BackendList& previous, bool same_scope,
      BackendList& next, UpdateReport& report);
  // The identities of `previous` not `listed` leave with their calls in
  // flight: the scope keeps their counters findable until those end.
  void KeepLeavingCountersFindable(
      const BackendList& previous,
      const absl::flat_hash_set<std::string_view>& listed);
  // A cell for `identity`, new to the list: counting in the scope's shared
  // counter of it if there is one, else in its own.
  std::shared_ptr<BackendCell> NewCell(std::string_view identity);
  // Points every backend's strings into `list` (its table's rows, its own
  // address buffer) instead of the update's arguments.
  static void BorrowFromList(BackendList& list);

  std::shared_ptr<const BackendList> list_;
  std::shared_ptr<LoadScope> scope_;
};

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_BACKEND_SET_H_
