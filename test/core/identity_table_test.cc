// IdentityTable against KeyHash::Mixed: the table must reproduce the contract's
// mixed hash bit for bit for every key state and identity.
#include "poise/identity_table.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "poise/hash.h"
#include "poise/rendezvous.h"
#include "src/core/identity_table_access.h"

namespace poise {
namespace {

std::string RandomBytes(std::mt19937_64& rng, size_t size) {
  std::string out(size, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

// Random identities of every length regime (empty, short, long, every byte
// value) against random keys: every row (all 256 low bytes) is hit many
// times, and Mixed and MixedRange agree with the contract.
TEST(IdentityTable, EqualsKeyHashMixedOnRandomKeysAndIdentities) {
  std::mt19937_64 rng(41);
  size_t checked = 0;
  for (int list = 0; list < 400; ++list) {
    std::vector<std::string> owned;
    const size_t n = 1 + rng() % 40;
    for (size_t i = 0; i < n; ++i) {
      const size_t size = rng() % 4 == 0 ? rng() % 300 : rng() % 24;
      owned.push_back(RandomBytes(rng, size));
    }
    const std::vector<std::string_view> ids(owned.begin(), owned.end());
    const IdentityTable table(ids);
    ASSERT_EQ(table.size(), n);
    std::vector<uint64_t> z(n);
    for (int k = 0; k < 300; ++k) {
      const KeyHash key(RandomBytes(rng, rng() % 48));
      const size_t begin = rng() % n;
      const size_t end = begin + rng() % (n - begin + 1);
      table.MixedRange(key.state(), begin, end, z.data());
      for (size_t i = 0; i < n; ++i) {
        const uint64_t want = key.Mixed(ids[i]);
        ASSERT_EQ(table.Mixed(key.state(), i), want) << list << "/" << i;
        if (i >= begin && i < end) {
          ASSERT_EQ(z[i - begin], want);
        }
      }
      checked += n;
    }
  }
  EXPECT_GT(checked, 2000000u);
}

// Every low byte of the key state, for identities made of every byte value.
TEST(IdentityTable, EveryRowForEveryByteValue) {
  std::vector<std::string> owned;
  owned.reserve(257);
  for (int b = 0; b < 256; ++b) {
    owned.emplace_back(1 + b % 5, static_cast<char>(b));
  }
  owned.emplace_back();  // the empty identity hashes only its terminator
  const std::vector<std::string_view> ids(owned.begin(), owned.end());
  const IdentityTable table(ids);
  std::mt19937_64 rng(43);
  for (uint64_t low = 0; low < 256; ++low) {
    for (int k = 0; k < 8; ++k) {
      const uint64_t state = (rng() & ~uint64_t{0xff}) | low;
      for (size_t i = 0; i < ids.size(); ++i) {
        const uint64_t want =
            Mix64(Fnv1aUpdateByte(Fnv1aUpdate(state, ids[i]), 0xFF));
        ASSERT_EQ(table.Mixed(state, i), want) << low << "/" << i;
      }
    }
  }
}

// Identities of one length share p^m, which the table then reports (a pick
// may skip the powers); of several lengths, it reports none.
TEST(IdentityTable, CommonPowerOnlyForIdentitiesOfOneLength) {
  const std::vector<std::string_view> same = {"10.0.0.1:80", "10.0.0.2:80",
                                              "10.0.0.3:80"};
  const std::vector<std::string_view> mixed = {"10.0.0.1:80", "10.0.0.10:80"};
  uint64_t p12 = 1;  // 11 identity bytes and the terminator
  for (int k = 0; k < 12; ++k) p12 *= kFnvPrime;
  using internal::IdentityTableAccess;
  EXPECT_EQ(IdentityTableAccess::CommonPower(IdentityTable(same).ForKey(7)),
            p12);
  EXPECT_EQ(IdentityTableAccess::CommonPower(IdentityTable(mixed).ForKey(7)),
            0u);
  EXPECT_EQ(IdentityTableAccess::CommonPower(IdentityTable().ForKey(7)), 0u);
  const IdentityTable table(same);
  for (size_t i = 0; i < same.size(); ++i) {
    EXPECT_EQ(IdentityTableAccess::Powers(table.ForKey(7))[i], p12);
  }
}

TEST(IdentityTable, FromCandidatesKeepsOrderAndIgnoresEligibility) {
  const std::vector<Candidate> candidates = {
      {"a", 1, true}, {"b", 0, true}, {"c", 2, false}};
  const IdentityTable table(candidates);
  ASSERT_EQ(table.size(), 3u);
  const KeyHash key("user-42");
  EXPECT_EQ(table.Mixed(key.state(), 0), key.Mixed("a"));
  EXPECT_EQ(table.Mixed(key.state(), 1), key.Mixed("b"));
  EXPECT_EQ(table.Mixed(key.state(), 2), key.Mixed("c"));
  EXPECT_GE(table.memory_bytes(), size_t{3} * 257 * sizeof(uint64_t));
}

TEST(IdentityTable, SizeMismatchIsAnError) {
  const std::vector<Candidate> candidates = {{"a", 1}, {"b", 1}};
  const IdentityTable shorter(std::vector<std::string_view>{"a"});
  const auto pick = WeightedRendezvous::Pick("k", candidates, shorter);
  ASSERT_FALSE(pick.ok());
  EXPECT_EQ(pick.error(), PickError::kTableMismatch);
  DecisionScratch scratch;
  const auto decision = BoundedLoadRendezvous::Create(150)->Decide(
      "k", candidates, shorter, [](size_t) { return 0; }, scratch);
  ASSERT_FALSE(decision.ok());
  EXPECT_EQ(decision.error(), PickError::kTableMismatch);
  EXPECT_STREQ(ToString(PickError::kTableMismatch),
               "identity table built for a different candidate list");
}

TEST(IdentityTable, EmptyListsKeepTheirErrors) {
  const std::vector<Candidate> none;
  const IdentityTable table(none);
  EXPECT_EQ(WeightedRendezvous::Pick("k", none, table).error(),
            PickError::kEmpty);
  const std::vector<Candidate> ineligible = {{"a", 0}, {"b", 3, false}};
  const IdentityTable table2(ineligible);
  EXPECT_EQ(WeightedRendezvous::Pick("k", ineligible, table2).error(),
            PickError::kNoEligibleCandidates);
}

}  // namespace
}  // namespace poise
