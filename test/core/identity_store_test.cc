// The process-wide identity store (src/core/identity_store.h): tables
// built from shared rows equal fresh IdentityTables and the contract bit for
// bit; rows and tables are shared, reused and freed as counted by the store
// (counts, not time).
#include "src/core/identity_store.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "poise/hash.h"
#include "poise/identity_table.h"
#include "src/core/identity_table_access.h"

namespace poise::internal {
namespace {

std::vector<std::string> Identities(size_t n, const std::string& prefix) {
  std::vector<std::string> ids;
  ids.reserve(n);
  for (size_t i = 0; i < n; ++i) ids.push_back(prefix + std::to_string(i));
  return ids;
}

std::vector<std::string_view> Views(const std::vector<std::string>& ids) {
  return {ids.begin(), ids.end()};
}

// Every identity of `shared` hashes as a fresh table and the contract do,
// for keys with every low byte.
void ExpectSameHashes(const IdentityTable& shared,
                      const std::vector<std::string_view>& ids,
                      std::mt19937_64& rng) {
  ASSERT_EQ(shared.size(), ids.size());
  const IdentityTable fresh(ids);
  for (uint64_t low = 0; low < 256; ++low) {
    const uint64_t state = (rng() & ~uint64_t{0xff}) | low;
    for (size_t i = 0; i < ids.size(); ++i) {
      const uint64_t want =
          Mix64(Fnv1aUpdateByte(Fnv1aUpdate(state, ids[i]), 0xFF));
      ASSERT_EQ(shared.Mixed(state, i), want) << low << "/" << i;
      ASSERT_EQ(fresh.Mixed(state, i), want) << low << "/" << i;
    }
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(shared.identity(i), ids[i]);
    EXPECT_EQ(fresh.identity(i), ids[i]);
  }
}

TEST(IdentityStore, TablesFromSharedRowsHashAsFreshTablesAndTheContract) {
  std::mt19937_64 rng(47);
  IdentityStore store;
  // Lengths 1..41 cover whole blocks of 8 and every tail; random bytes of
  // every length regime, the empty identity included.
  for (size_t n = 1; n <= 41; ++n) {
    std::vector<std::string> owned;
    for (size_t i = 0; i < n; ++i) {
      std::string id(rng() % 4 == 0 ? rng() % 200 : rng() % 20, '\0');
      for (char& c : id) c = static_cast<char>(rng());
      owned.push_back(id + std::to_string(i));  // distinct
    }
    owned[rng() % n].clear();
    const std::vector<std::string_view> ids = Views(owned);
    const std::shared_ptr<const IdentityTable> table = store.Share(ids);
    ExpectSameHashes(*table, ids, rng);
    EXPECT_EQ(IdentityTableAccess::CommonPower(table->ForKey(0)),
              IdentityTableAccess::CommonPower(IdentityTable(ids).ForKey(0)));
  }
}

TEST(IdentityStore, HundredListsOfTheSameIdentitiesShareOneTable) {
  IdentityStore store;
  const std::vector<std::string> owned = Identities(1000, "10.1.0.");
  const std::vector<std::string_view> ids = Views(owned);
  std::vector<std::shared_ptr<const IdentityTable>> tables;
  tables.reserve(100);
  for (int c = 0; c < 100; ++c) tables.push_back(store.Share(ids));
  const IdentityStoreCounts counts = store.counts();
  EXPECT_EQ(counts.rows, 1000u);
  EXPECT_EQ(counts.tables, 1u);
  EXPECT_EQ(counts.identities_hashed, 1000u);
  EXPECT_EQ(counts.tables_built, 1u);
  EXPECT_EQ(counts.tables_shared, 99u);
  for (const auto& t : tables) EXPECT_EQ(t.get(), tables[0].get());
  // The table's identities are its rows' copies, not the caller's.
  EXPECT_NE(tables[0]->identity(5).data(), owned[5].data());
  EXPECT_EQ(tables[0]->identity(5), owned[5]);
}

TEST(IdentityStore, AnUpdateChangingOneIdentityHashesOnlyThatOne) {
  IdentityStore store;
  std::vector<std::string> owned = Identities(1000, "10.2.0.");
  const std::shared_ptr<const IdentityTable> before = store.Share(Views(owned));
  owned[417] = "10.2.9.9";
  const std::shared_ptr<const IdentityTable> after = store.Share(Views(owned));
  const IdentityStoreCounts counts = store.counts();
  EXPECT_EQ(counts.identities_hashed, 1001u);
  EXPECT_EQ(counts.tables_built, 2u);
  EXPECT_EQ(counts.rows, 1001u);
  EXPECT_EQ(counts.tables, 2u);
  // One table's offsets and powers written per build, nothing else.
  EXPECT_EQ(counts.table_bytes_written,
            before->memory_bytes() + after->memory_bytes());
  std::mt19937_64 rng(53);
  ExpectSameHashes(*after, Views(owned), rng);
}

TEST(IdentityStore, RowsAndTablesAreFreedWithTheirLastHolder) {
  IdentityStore store;
  const std::vector<std::string> a = Identities(20, "a");
  std::vector<std::string> b = a;
  b[3] = "b3";
  std::shared_ptr<const IdentityTable> ta = store.Share(Views(a));
  std::shared_ptr<const IdentityTable> tb = store.Share(Views(b));
  EXPECT_EQ(store.counts().rows, 21u);
  ta.reset();  // "a3" was only a's
  EXPECT_EQ(store.counts().rows, 20u);
  EXPECT_EQ(store.counts().tables, 1u);
  // A copy of a table keeps its rows, and its identity views, alive.
  const IdentityTable copy = *tb;
  tb.reset();
  EXPECT_EQ(store.counts().rows, 20u);
  EXPECT_EQ(copy.identity(3), "b3");
  std::mt19937_64 rng(59);
  ExpectSameHashes(copy, Views(b), rng);
  // The same sequence again: its old table is gone (only a copy holds the
  // rows), so a new table, but no identity hashed again.
  const uint64_t hashed = store.counts().identities_hashed;
  tb = store.Share(Views(b));
  EXPECT_EQ(store.counts().identities_hashed, hashed);
  tb.reset();
}

TEST(IdentityStore, EmptyAndRepeatedIdentities) {
  IdentityStore store;
  EXPECT_EQ(store.Share({})->size(), 0u);
  EXPECT_EQ(store.counts().tables, 0u);
  {
    const std::vector<std::string_view> ids = {"x", "y", "x"};
    const auto table = store.Share(ids);
    EXPECT_EQ(store.counts().rows, 2u);
    std::mt19937_64 rng(61);
    ExpectSameHashes(*table, ids, rng);
  }
  EXPECT_EQ(store.counts().rows, 0u);
  EXPECT_EQ(store.counts().tables, 0u);
}

// Threads sharing, replacing and dropping tables over overlapping lists at
// once (also run under TSan: tools/test.sh POISE_TEST_TSAN=1): every table
// hashes right, and everything is freed at the end.
TEST(IdentityStore, ConcurrentSharesAndReleases) {
  IdentityStore store;
  const std::vector<std::string> pool = Identities(64, "pool-");
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  std::vector<int> failures(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(100 + t));
      std::shared_ptr<const IdentityTable> held;
      for (int round = 0; round < 300; ++round) {
        // A window of the pool, most of it shared with other threads.
        const auto begin = static_cast<ptrdiff_t>(rng() % 8);
        const auto n = static_cast<size_t>(40 + rng() % 16);
        std::vector<std::string_view> ids(
            pool.begin() + begin,
            pool.begin() + begin + static_cast<ptrdiff_t>(n));
        held = store.Share(ids);
        const uint64_t state = rng();
        for (size_t i = 0; i < n; i += 7) {
          const uint64_t want =
              Mix64(Fnv1aUpdateByte(Fnv1aUpdate(state, ids[i]), 0xFF));
          if (held->Mixed(state, i) != want || held->identity(i) != ids[i]) {
            ++failures[static_cast<size_t>(t)];
          }
        }
        if (rng() % 3 == 0) held.reset();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (size_t t = 0; t < failures.size(); ++t) EXPECT_EQ(failures[t], 0) << t;
  EXPECT_EQ(store.counts().rows, 0u);
  EXPECT_EQ(store.counts().tables, 0u);
}

}  // namespace
}  // namespace poise::internal
