// The backend set: resolution order of identities and weights,
// de-duplication, cells carried across updates by identity, table reuse and
// what each update tells the adapter.
#include "src/router/backend_set.h"

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "src/core/identity_store.h"
#include "test/router/router_test_util.h"

namespace poise::router {
namespace {

using test::AddressOf;
using test::Entries;
using test::Entry;
using test::ValidConfig;

// ---------------------------------------------------------------------------
// Resolution

TEST(BackendSet, IdentityIsTheEndpointsThenTheAttributeThenTheAddress) {
  Config config = ValidConfig();
  config.endpoints = {{"10.0.0.1:80", {}, "configured"}};
  BackendSet set;
  set.Update({Entry("10.0.0.1:80", {}, "attribute"),
              Entry("10.0.0.2:80", {}, "attribute-2"), Entry("10.0.0.3:80"),
              Entry("10.0.0.4:80", {}, "")},
             config);
  ASSERT_EQ(set.size(), 4u);
  EXPECT_EQ(set.backends()[0].identity, "configured");
  EXPECT_EQ(set.backends()[1].identity, "attribute-2");
  EXPECT_EQ(set.backends()[2].identity, "10.0.0.3:80");
  // An empty attribute names nothing: the address is hashed.
  EXPECT_EQ(set.backends()[3].identity, "10.0.0.4:80");
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(set.backends()[i].address, AddressOf(i)) << i;
  }
}

TEST(BackendSet, WeightIsTheEndpointsThenTheAttributeThenTheDefault) {
  Config config = ValidConfig();
  config.default_weight = 7;
  config.endpoints = {{"10.0.0.1:80", 3, {}}, {"10.0.0.2:80", {}, "two"}};
  BackendSet set;
  set.Update({Entry("10.0.0.1:80", 5), Entry("10.0.0.2:80", 5),
              Entry("10.0.0.3:80"), Entry("10.0.0.4:80", 0)},
             config);
  ASSERT_EQ(set.size(), 4u);
  EXPECT_EQ(set.backends()[0].weight, 3u);  // endpoints[] over the attribute
  EXPECT_EQ(set.backends()[1].weight, 5u);  // an entry without a weight
  EXPECT_EQ(set.backends()[2].weight, 7u);  // no attribute: the default
  EXPECT_EQ(set.backends()[3].weight, 7u);  // attribute 0: the default
  EXPECT_EQ(set.backends()[1].identity, "two");
}

// An endpoints[] entry without an address names its backend by identity:
// the resolver's identity attribute (a DNS name whose address changes), else
// the address text. An entry with the address comes first.
TEST(BackendSet, AnEntryWithoutAddressMatchesTheResolversIdentity) {
  Config config = ValidConfig();
  config.endpoints = {
      {std::nullopt, 3, "cache-0.cache.svc:50070"},
      {std::nullopt, 4, "10.0.0.3:80"},
      {std::nullopt, 9, "cache-9.cache.svc:50070"},  // not resolved: unused
      {"10.0.0.4:80", 5, {}},
      {std::nullopt, 6, "cache-4.cache.svc:50070"},  // the address entry wins
  };
  ASSERT_TRUE(NormalizeAndValidate(config).empty());
  BackendSet set;
  set.Update({Entry("10.0.0.1:80", {}, "cache-0.cache.svc:50070"),
              Entry("10.0.0.2:80", {}, "cache-1.cache.svc:50070"),
              Entry("10.0.0.3:80"),
              Entry("10.0.0.4:80", {}, "cache-4.cache.svc:50070")},
             config);
  ASSERT_EQ(set.size(), 4u);
  EXPECT_EQ(set.backends()[0].weight, 3u);
  EXPECT_EQ(set.backends()[1].weight, 1u);  // no entry: defaultWeight
  EXPECT_EQ(set.backends()[2].weight, 4u);
  EXPECT_EQ(set.backends()[3].weight, 5u);
  EXPECT_EQ(set.backends()[0].identity, "cache-0.cache.svc:50070");
  EXPECT_EQ(set.backends()[3].identity, "cache-4.cache.svc:50070");
  // The pod comes back on a new address: the weight follows its name.
  set.Update({Entry("10.0.0.7:80", {}, "cache-0.cache.svc:50070")}, config);
  ASSERT_EQ(set.size(), 1u);
  EXPECT_EQ(set.backends()[0].weight, 3u);
}

TEST(BackendSet, DuplicateIdentitiesKeepTheFirst) {
  Config config = ValidConfig();
  // 10.0.0.3:80 is configured to hash as 10.0.0.1:80 does by default.
  config.endpoints = {{"10.0.0.3:80", {}, "10.0.0.1:80"}};
  BackendSet set;
  const BackendSet::UpdateReport report = set.Update(
      {Entry("10.0.0.1:80", 2), Entry("10.0.0.2:80"), Entry("10.0.0.1:80", 9),
       Entry("10.0.0.3:80"), Entry("10.0.0.4:80", {}, "shared"),
       Entry("10.0.0.5:80", {}, "shared")},
      config);
  ASSERT_EQ(set.size(), 3u);
  EXPECT_EQ(set.backends()[0].address, "10.0.0.1:80");
  EXPECT_EQ(set.backends()[0].weight, 2u);  // the first entry's attribute
  EXPECT_EQ(set.backends()[1].address, "10.0.0.2:80");
  EXPECT_EQ(set.backends()[2].address, "10.0.0.4:80");
  EXPECT_EQ(set.backends()[2].identity, "shared");
  // A repeated address of the same identity is that identity repeated.
  EXPECT_EQ(report.duplicate_identities, 3u);
  EXPECT_EQ(report.shared_addresses, 0u);
  EXPECT_EQ(report.refused, 0u);
}

// B1: two DNS names of one pod (or a CNAME beside its target) resolve to one
// address; each name is a backend, hashed as itself, counted apart, and an
// entry repeating both the address and a name is left out.
TEST(BackendSet, IdentitiesSharingAnAddressAreABackendEach) {
  BackendSet set;
  const BackendSet::UpdateReport report = set.Update(
      {Entry("10.0.0.2:80", {}, "b0.t:80"), Entry("10.0.0.2:80", 3, "b1.t:80"),
       Entry("10.0.0.3:80", {}, "b2.t:80"), Entry("10.0.0.2:80"),
       Entry("10.0.0.2:80", 9, "b1.t:80")},
      ValidConfig());
  ASSERT_EQ(set.size(), 4u);
  const std::vector<std::string> identities = {"b0.t:80", "b1.t:80", "b2.t:80",
                                               "10.0.0.2:80"};
  const std::vector<std::string> addresses = {"10.0.0.2:80", "10.0.0.2:80",
                                              "10.0.0.3:80", "10.0.0.2:80"};
  for (size_t i = 0; i < identities.size(); ++i) {
    EXPECT_EQ(set.backends()[i].identity, identities[i]) << i;
    EXPECT_EQ(set.backends()[i].address, addresses[i]) << i;
  }
  EXPECT_EQ(set.backends()[1].weight, 3u);  // the first b1.t entry's
  EXPECT_EQ(report.shared_addresses, 2u);
  EXPECT_EQ(report.duplicate_identities, 1u);
  EXPECT_NE(set.backends()[0].cell, set.backends()[1].cell);
  EXPECT_NE(set.backends()[0].cell->in_flight,
            set.backends()[1].cell->in_flight);
  // A call to b0.t is not one of b1.t's, though both go to one address.
  InFlightGuard call =
      InFlightGuard::TryAcquire(SharedCounter(set.backends()[0].cell));
  ASSERT_TRUE(call.held());
  EXPECT_EQ(set.backends()[0].cell->in_flight->Load(), 1u);
  EXPECT_EQ(set.backends()[1].cell->in_flight->Load(), 0u);
}

// 20,000 identities, each repeated at its address and at another one, and
// every address under a second name too: a quadratic de-duplication would
// take minutes here.
TEST(BackendSet, LargeListsDeduplicateInLinearTime) {
  constexpr size_t kUnique = 20000;
  std::vector<ResolverEntry> entries;
  entries.reserve(4 * kUnique);
  const auto id = [](const char* prefix, size_t i) {
    return prefix + std::to_string(i);
  };
  for (size_t i = 0; i < kUnique; ++i) {
    entries.push_back(Entry(AddressOf(i), {}, id("id-", i)));
  }
  // Each address again under its identity, each identity at a new address,
  // and each address under a second name.
  for (size_t i = 0; i < kUnique; ++i) {
    entries.push_back(Entry(AddressOf(i), {}, id("id-", i)));
  }
  for (size_t i = 0; i < kUnique; ++i) {
    entries.push_back(Entry(AddressOf(kUnique + i), {}, id("id-", i)));
  }
  for (size_t i = 0; i < kUnique; ++i) {
    entries.push_back(Entry(AddressOf(i), {}, id("alias-", i)));
  }
  BackendSet set;
  const BackendSet::UpdateReport report = set.Update(entries, ValidConfig());
  ASSERT_EQ(set.size(), 2 * kUnique);
  for (size_t i = 0; i < kUnique; i += 997) {
    EXPECT_EQ(set.backends()[i].address, AddressOf(i));
    EXPECT_EQ(set.backends()[i].identity, id("id-", i));
    EXPECT_EQ(set.backends()[kUnique + i].address, AddressOf(i));
    EXPECT_EQ(set.backends()[kUnique + i].identity, id("alias-", i));
  }
  EXPECT_EQ(report.duplicate_identities, 2 * kUnique);
  EXPECT_EQ(report.shared_addresses, kUnique);
  ASSERT_NE(set.table(), nullptr);
  EXPECT_EQ(set.table()->size(), 2 * kUnique);
  // The same list again keeps the table, and every backend its subchannel.
  size_t kept = 0;
  EXPECT_FALSE(set.Update(entries, ValidConfig(),
                          [&](const BackendSet::Admission& a) {
                            // id-i at entry i, alias-i at 3 * kUnique + i.
                            kept += a.previous == (a.entry < kUnique
                                                       ? a.entry
                                                       : a.entry - 2 * kUnique);
                            return true;
                          })
                   .table_rebuilt);
  EXPECT_EQ(kept, 2 * kUnique);
}

// ---------------------------------------------------------------------------
// Cells

TEST(BackendSet, EveryBackendHasItsOwnCell) {
  BackendSet set;
  set.Update(Entries(3), ValidConfig());
  EXPECT_NE(set.backends()[0].cell, nullptr);
  EXPECT_NE(set.backends()[0].cell, set.backends()[1].cell);
  EXPECT_NE(set.backends()[1].cell, set.backends()[2].cell);
}

TEST(BackendSet, AnIdentityThatLeavesAndReturnsWhileInFlightKeepsItsCounter) {
  BackendSet set;
  set.Update(Entries(3), ValidConfig());
  const InFlightCounter* counter = set.backends()[1].cell->in_flight;
  InFlightGuard call =
      InFlightGuard::TryAcquire(SharedCounter(set.backends()[1].cell));
  ASSERT_TRUE(call.held());
  // Gone from the list, its counter held only by the call.
  set.Update({Entry(AddressOf(0)), Entry(AddressOf(2))}, ValidConfig());
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(set.load_scope()->findable_counters(), 1u);  // kept while in flight
  set.Update(Entries(3), ValidConfig());
  EXPECT_EQ(set.backends()[1].cell->in_flight, counter);
  EXPECT_EQ(set.backends()[1].cell->in_flight->Load(), 1u);
  EXPECT_EQ(set.load_scope()->total().Load(), 1u);
  call.Release();
  EXPECT_EQ(counter->Load(), 0u);
  EXPECT_EQ(set.load_scope()->total().Load(), 0u);
}

TEST(BackendSet, AListedIdentityKeepsItsCellAcrossUpdates) {
  BackendSet set;
  set.Update(Entries(3), ValidConfig());
  const std::shared_ptr<BackendCell> cell = set.backends()[2].cell;
  set.Update({Entry(AddressOf(2)), Entry(AddressOf(0))}, ValidConfig());
  EXPECT_EQ(set.backends()[0].cell, cell);
}

TEST(BackendSet, SetsInOneNamedScopeShareCountersAndTotal) {
  std::vector<BackendSet> sets(3);
  for (BackendSet& set : sets) {
    set.SetLoadScope(LoadScope::Named("backend-set-test-shared"));
    set.Update(Entries(2), ValidConfig());
  }
  InFlightGuard a =
      InFlightGuard::TryAcquire(SharedCounter(sets[0].backends()[1].cell));
  InFlightGuard b =
      InFlightGuard::TryAcquire(SharedCounter(sets[2].backends()[1].cell));
  InFlightGuard c =
      InFlightGuard::TryAcquire(SharedCounter(sets[1].backends()[0].cell));
  EXPECT_EQ(sets[1].backends()[1].cell->in_flight->Load(), 2u);
  EXPECT_EQ(sets[1].load_scope()->total().Load(), 3u);
  EXPECT_NE(sets[0].backends()[1].cell, sets[2].backends()[1].cell);  // stats
  // A set of its own scope counts apart.
  BackendSet alone;
  alone.Update(Entries(2), ValidConfig());
  EXPECT_EQ(alone.backends()[1].cell->in_flight->Load(), 0u);
  EXPECT_EQ(alone.load_scope()->total().Load(), 0u);
  a.Release();
  b.Release();
  c.Release();
  EXPECT_EQ(sets[0].load_scope()->total().Load(), 0u);
}

TEST(BackendSet, AnIdentityThatReturnsAfterItsCallsEndedStartsAfresh) {
  BackendSet set;
  set.Update(Entries(2), ValidConfig());
  std::weak_ptr<BackendCell> old = set.backends()[1].cell;
  set.backends()[1].cell->picks = 5;
  set.Update({Entry(AddressOf(0))}, ValidConfig());
  EXPECT_TRUE(old.expired());  // nobody held it
  set.Update(Entries(2), ValidConfig());
  EXPECT_EQ(set.backends()[1].cell->picks.load(), 0u);
}

TEST(BackendSet, CellsFollowTheIdentityNotTheAddress) {
  Config config = ValidConfig();
  config.endpoints = {{"10.0.0.1:80", {}, "db-primary"}};
  BackendSet set;
  set.Update({Entry("10.0.0.1:80"), Entry("10.0.0.2:80")}, config);
  const std::shared_ptr<BackendCell> primary = set.backends()[0].cell;
  // The primary moves to a new address under the same identity.
  config.endpoints = {{"10.0.0.9:80", {}, "db-primary"}};
  set.Update({Entry("10.0.0.9:80"), Entry("10.0.0.2:80")}, config);
  EXPECT_EQ(set.backends()[0].cell, primary);
  // Its old address, now hashed as itself, gets a cell of its own.
  set.Update({Entry("10.0.0.9:80"), Entry("10.0.0.1:80")}, config);
  EXPECT_EQ(set.backends()[0].cell, primary);
  EXPECT_NE(set.backends()[1].cell, primary);
}

// ---------------------------------------------------------------------------
// Table

TEST(BackendSet, TheTableIsKeptForTheSameIdentitiesInTheSameOrder) {
  BackendSet set;
  EXPECT_TRUE(set.Update(Entries(4), ValidConfig()).table_rebuilt);
  const std::shared_ptr<const IdentityTable> table = set.table();
  ASSERT_NE(table, nullptr);
  EXPECT_EQ(table->size(), 4u);
  // A re-resolution with other weights: same identities, same table.
  std::vector<ResolverEntry> reweighted = Entries(4);
  reweighted[2].weight = 9;
  EXPECT_FALSE(set.Update(reweighted, ValidConfig()).table_rebuilt);
  EXPECT_EQ(set.table(), table);
  EXPECT_EQ(set.backends()[2].weight, 9u);
  // Reordered: a new table (the table is by position).
  const std::vector<ResolverEntry> forward = Entries(4);
  const std::vector<ResolverEntry> reversed(forward.rbegin(), forward.rend());
  EXPECT_TRUE(set.Update(reversed, ValidConfig()).table_rebuilt);
  EXPECT_NE(set.table(), table);
  // Renamed in place: a new table too.
  Config renamed = ValidConfig();
  renamed.endpoints = {{AddressOf(3), {}, "three"}};
  EXPECT_TRUE(set.Update(reversed, renamed).table_rebuilt);
  // Empty: no table.
  set.Update({}, ValidConfig());
  EXPECT_EQ(set.table(), nullptr);
  EXPECT_TRUE(set.empty());
}

TEST(BackendSet, ListsHandedOutStayValidAfterAnUpdate) {
  BackendSet set;
  set.Update(Entries(3), ValidConfig());
  const std::shared_ptr<const BackendList> old = set.list();
  set.Update({Entry(AddressOf(5))}, ValidConfig());
  ASSERT_EQ(old->backends.size(), 3u);
  EXPECT_EQ(old->backends[2].address, AddressOf(2));
  EXPECT_EQ(old->table->size(), 3u);
  set.Clear();
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.table(), nullptr);
}

// ---------------------------------------------------------------------------
// Admission

TEST(BackendSet, AdmissionsNameTheEntryAndTheAddresssPreviousIndex) {
  BackendSet set;
  set.Update(Entries(3), ValidConfig());
  std::vector<BackendSet::Admission> seen;
  set.Update({Entry(AddressOf(2)), Entry(AddressOf(2)), Entry(AddressOf(7)),
              Entry(AddressOf(0))},
             ValidConfig(), [&](const BackendSet::Admission& a) {
               seen.push_back(a);
               return true;
             });
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].entry, 0u);
  EXPECT_EQ(seen[0].previous, 2u);
  EXPECT_EQ(seen[1].entry, 2u);               // entry 1 is a duplicate
  EXPECT_EQ(seen[1].previous, std::nullopt);  // a new address
  EXPECT_EQ(seen[2].entry, 3u);
  EXPECT_EQ(seen[2].previous, 0u);
}

// Backends sharing an address each keep their own subchannel: an identity
// takes over its own previous backend even when an entry before it renames
// another backend of that address, and a renamed one takes over a backend
// of its address that no entry names again.
TEST(BackendSet, EachIdentityOfASharedAddressKeepsItsOwnSubchannel) {
  const std::string x = AddressOf(0);
  BackendSet set;
  set.Update({Entry(x, {}, "b"), Entry(x, {}, "c"), Entry(x, {}, "a"),
              Entry(AddressOf(1))},
             ValidConfig());
  const auto admissions = [&](const std::vector<ResolverEntry>& entries) {
    std::vector<std::optional<size_t>> previous;
    set.Update(entries, ValidConfig(), [&](const BackendSet::Admission& a) {
      previous.push_back(a.previous);
      return true;
    });
    return previous;
  };
  // Reordered: each its own.
  EXPECT_EQ(admissions({Entry(x, {}, "a"), Entry(x, {}, "c"), Entry(x, {}, "b"),
                        Entry(AddressOf(1))}),
            (std::vector<std::optional<size_t>>{2, 1, 0, 3}));
  // "d" first, renaming "c" (now at index 1); "a" and "b" keep theirs.
  EXPECT_EQ(
      admissions({Entry(x, {}, "d"), Entry(x, {}, "b"), Entry(x, {}, "a")}),
      (std::vector<std::optional<size_t>>{1, 2, 0}));
  // A new identity at the address when every backend of it stays: none.
  EXPECT_EQ(admissions({Entry(x, {}, "e"), Entry(x, {}, "d"), Entry(x, {}, "b"),
                        Entry(x, {}, "a")}),
            (std::vector<std::optional<size_t>>{std::nullopt, 0, 1, 2}));
  // Every backend of the address leaves it ("a" moves): the new name there
  // takes over the first of them, "a" at its new address none.
  EXPECT_EQ(admissions({Entry(x, {}, "f"), Entry(AddressOf(5), {}, "a")}),
            (std::vector<std::optional<size_t>>{0, std::nullopt}));
}

TEST(BackendSet, ARefusedBackendIsSkippedAndItsDuplicateMayTakeItsPlace) {
  BackendSet set;
  size_t calls = 0;
  const BackendSet::UpdateReport report = set.Update(
      {Entry(AddressOf(0), 4), Entry(AddressOf(1)), Entry(AddressOf(0), 6)},
      ValidConfig(),
      [&](const BackendSet::Admission&) { return calls++ != 0; });
  EXPECT_EQ(report.refused, 1u);
  EXPECT_EQ(report.duplicate_identities, 0u);
  ASSERT_EQ(set.size(), 2u);
  EXPECT_EQ(set.backends()[0].address, AddressOf(1));
  EXPECT_EQ(set.backends()[1].address, AddressOf(0));
  EXPECT_EQ(set.backends()[1].weight, 6u);
}

// ---------------------------------------------------------------------------
// Shared across sets (channels): the process-wide identity store

internal::IdentityStoreCounts StoreCounts() {
  return internal::IdentityStore::Global().counts();
}

TEST(BackendSet, HundredSetsOfTheSameBackendsShareRowsAndOneTable) {
  const internal::IdentityStoreCounts start = StoreCounts();
  {
    std::vector<std::unique_ptr<BackendSet>> sets;
    for (int c = 0; c < 100; ++c) {
      sets.push_back(std::make_unique<BackendSet>());
      sets.back()->Update(Entries(1000), ValidConfig());
    }
    const internal::IdentityStoreCounts counts = StoreCounts();
    EXPECT_EQ(counts.rows - start.rows, 1000u);
    EXPECT_EQ(counts.tables - start.tables, 1u);
    EXPECT_EQ(counts.identities_hashed - start.identities_hashed, 1000u);
    for (const auto& set : sets) EXPECT_EQ(set->table(), sets[0]->table());
    // No set copies the strings: identity and address (the same text here)
    // are the shared row's.
    const IdentityTable& table = *sets[0]->table();
    for (const auto& set : sets) {
      for (size_t i = 0; i < 1000; i += 97) {
        const ListedBackend& b = set->backends()[i];
        EXPECT_EQ(b.identity.data(), table.identity(i).data());
        EXPECT_EQ(b.address.data(), table.identity(i).data());
        EXPECT_EQ(b.address, AddressOf(i));
      }
    }
  }
  // The last set gone: rows and table freed.
  EXPECT_EQ(StoreCounts().rows, start.rows);
  EXPECT_EQ(StoreCounts().tables, start.tables);
}

TEST(BackendSet, AnUpdateChangingOneAddressHashesOneIdentity) {
  BackendSet a;
  BackendSet b;
  a.Update(Entries(1000), ValidConfig());
  b.Update(Entries(1000), ValidConfig());
  const internal::IdentityStoreCounts before = StoreCounts();
  std::vector<ResolverEntry> moved = Entries(1000);
  moved[500] = Entry("10.9.9.9:80");
  EXPECT_TRUE(a.Update(moved, ValidConfig()).table_rebuilt);
  internal::IdentityStoreCounts after = StoreCounts();
  EXPECT_EQ(after.identities_hashed - before.identities_hashed, 1u);
  EXPECT_EQ(after.tables_built - before.tables_built, 1u);
  // The second channel getting the same update builds and hashes nothing.
  b.Update(moved, ValidConfig());
  EXPECT_EQ(b.table(), a.table());
  after = StoreCounts();
  EXPECT_EQ(after.identities_hashed - before.identities_hashed, 1u);
  EXPECT_EQ(after.tables_built - before.tables_built, 1u);
  // The old table had no holder left: only the new one is alive.
  EXPECT_EQ(after.tables, before.tables);
  EXPECT_EQ(after.rows, before.rows);  // one row in, one out
}

TEST(BackendSet, AddressesOtherThanTheIdentityLiveInTheList) {
  Config config = ValidConfig();
  config.endpoints = {{AddressOf(1), {}, "one"}};
  BackendSet set;
  set.Update(Entries(3), config);
  const std::shared_ptr<const BackendList> list = set.list();
  EXPECT_EQ(list->backends[1].identity, "one");
  EXPECT_EQ(list->backends[1].identity.data(), list->table->identity(1).data());
  EXPECT_EQ(list->backends[1].address, AddressOf(1));
  EXPECT_EQ(list->backends[1].address.data(), list->address_bytes.get());
  set.Update({}, config);  // the list handed out keeps its strings
  EXPECT_EQ(list->backends[1].address, AddressOf(1));
  EXPECT_EQ(list->backends[2].identity, AddressOf(2));
}

// Channels update from their own threads at once (also run under TSan).
TEST(BackendSet, ConcurrentUpdatesFromManyChannels) {
  const internal::IdentityStoreCounts start = StoreCounts();
  constexpr int kThreads = 4;
  constexpr int kSetsPerThread = 10;
  std::vector<std::vector<std::unique_ptr<BackendSet>>> sets(kThreads);
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto& mine = sets[static_cast<size_t>(t)];
      for (int c = 0; c < kSetsPerThread; ++c) {
        mine.push_back(std::make_unique<BackendSet>());
      }
      // Every set walks the same updates: 200 backends, then one moved.
      for (int round = 0; round < 20; ++round) {
        std::vector<ResolverEntry> entries = Entries(200);
        entries[static_cast<size_t>(round) % 200] = Entry("10.8.8.8:80");
        for (auto& set : mine) set->Update(entries, ValidConfig());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  const BackendSet& first = *sets[0][0];
  for (const auto& mine : sets) {
    for (const auto& set : mine) EXPECT_EQ(set->table(), first.table());
  }
  const internal::IdentityStoreCounts counts = StoreCounts();
  EXPECT_EQ(counts.tables - start.tables, 1u);
  EXPECT_EQ(counts.rows - start.rows, 200u);
  sets.clear();
  EXPECT_EQ(StoreCounts().rows, start.rows);
  EXPECT_EQ(StoreCounts().tables, start.tables);
}

}  // namespace
}  // namespace poise::router
