// IdentityTable against KeyHash::Mixed: the table must reproduce the contract's
// mixed hash bit for bit for every key state and identity.
#include "poise/identity_table.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "poise/hash.h"
#include "poise/rendezvous.h"
#include "src/core/candidate_hash.h"
#include "src/core/hash_and_group.h"

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

// The table is built by a scalar or an AVX-512 walk (the hashing kernel's
// choice); both must give the same table.
TEST(IdentityTable, BothBuildKernelsAgree) {
  const internal::HashKernel dispatched = internal::ActiveHashKernel();
  if (!internal::SelectHashKernel(internal::HashKernel::kAvx512)) {
    GTEST_SKIP() << "this CPU cannot run the AVX-512 kernel";
  }
  std::mt19937_64 rng(47);
  std::vector<std::string> owned;
  owned.reserve(300);
  for (int i = 0; i < 300; ++i) owned.push_back(RandomBytes(rng, rng() % 70));
  const std::vector<std::string_view> ids(owned.begin(), owned.end());
  const IdentityTable vector_built(ids);
  internal::SelectHashKernel(internal::HashKernel::kScalar);
  const IdentityTable scalar_built(ids);
  internal::SelectHashKernel(dispatched);
  for (uint64_t low = 0; low < 256; ++low) {
    const uint64_t state = (rng() & ~uint64_t{0xff}) | low;
    for (size_t i = 0; i < ids.size(); ++i) {
      const uint64_t want =
          Mix64(Fnv1aUpdateByte(Fnv1aUpdate(state, ids[i]), 0xFF));
      ASSERT_EQ(vector_built.Mixed(state, i), want);
      ASSERT_EQ(scalar_built.Mixed(state, i), want);
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
  EXPECT_EQ(IdentityTable(same).ForKey(7).common_power(), p12);
  EXPECT_EQ(IdentityTable(mixed).ForKey(7).common_power(), 0u);
  EXPECT_EQ(IdentityTable().ForKey(7).common_power(), 0u);
  const IdentityTable table(same);
  for (size_t i = 0; i < same.size(); ++i) {
    EXPECT_EQ(table.ForKey(7).powers()[i], p12);
  }
}

// The AVX-512 one-weight leader against the scalar loop it replaces, field
// by field: a runner-up too low would let a near-tie pass as decisive, which
// whole-decision comparisons would almost never see. A million keys over
// 4000 lists of 1..70 identities of one length (the shared power) or of
// several, all eligible (no bits), some or none, with duplicates (equal z:
// the first index leads, the runner-up equals it); every z < n stored,
// nothing past n.
TEST(IdentityTable, VectorLeadEqualsTheScalarLoop) {
  if (!internal::Avx512HashSupported()) {
    GTEST_SKIP() << "this CPU cannot run the AVX-512 kernel";
  }
  std::mt19937_64 rng(53);
  size_t ties = 0, one_length = 0, leads = 0;
  constexpr uint64_t kUntouched = 0x5a5a5a5a5a5a5a5aULL;
  for (int list = 0; list < 4000; ++list) {
    const size_t n = 1 + rng() % 70;
    const bool same_length = rng() % 2 == 0;
    std::vector<std::string> owned;
    for (size_t i = 0; i < n; ++i) {
      if (i > 0 && rng() % 8 == 0) {
        owned.push_back(owned[rng() % i]);
      } else if (same_length) {
        owned.push_back("10.0." + std::to_string(100 + rng() % 900) + ".7");
      } else {
        owned.push_back(RandomBytes(rng, rng() % 24));
      }
    }
    const std::vector<std::string_view> ids(owned.begin(), owned.end());
    const IdentityTable table(ids);
    one_length += table.ForKey(0).common_power() != 0;
    const uint64_t mode = rng() % 3;  // 0: all eligible, 1: some, 2: none
    std::vector<uint8_t> bits((n + 7) / 8, 0);
    std::vector<size_t> eligible;
    for (size_t i = 0; i < n; ++i) {
      if (mode == 0 || (mode == 1 && rng() % 4 != 0)) {
        eligible.push_back(i);
        bits[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
      }
    }
    const uint8_t* const eligible_bits = mode == 0 ? nullptr : bits.data();
    for (int k = 0; k < 250; ++k) {
      const IdentityTable::KeyRow row =
          table.ForKey(KeyHash(RandomBytes(rng, rng() % 20)).state());
      internal::LargestZ want = internal::LargestZ::Empty();
      for (const size_t i : eligible) want.Offer(row.Mixed(i), i);
      std::vector<uint64_t> z(n + 8, kUntouched);
      for (uint64_t* out : {z.data(), static_cast<uint64_t*>(nullptr)}) {
        const internal::LargestZ got = internal::TableLargestZAvx512(
            row, n, eligible_bits, eligible.size(), out);
        ASSERT_EQ(got.index, want.index) << list << "/" << k;
        ASSERT_EQ(got.z, want.z) << list << "/" << k;
        ASSERT_EQ(got.runner_up, want.runner_up) << list << "/" << k;
        ASSERT_EQ(got.count, want.count) << list << "/" << k;
      }
      for (size_t i = 0; i < n; ++i) ASSERT_EQ(z[i], row.Mixed(i)) << i;
      for (size_t i = n; i < z.size(); ++i) ASSERT_EQ(z[i], kUntouched) << i;
      ties += want.index != internal::kNone && want.runner_up == want.z;
      leads += want.index != internal::kNone;
    }
  }
  EXPECT_GT(ties, 50000u);  // duplicates among the leaders
  EXPECT_GT(one_length, 1500u);
  EXPECT_LT(one_length, 2500u);
  EXPECT_GT(leads, 500000u);
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
