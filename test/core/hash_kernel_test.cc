// The hashing kernels (src/core/candidate_hash.h, hash_kernels.cc) on every
// Highway target compiled into them that this CPU runs (each forced in turn;
// the others are reported as skipped), against the contract
// (src/core/contract.h) or the scalar reference loops: z from identities
// and from IdentityTable rows, the one- and two-weight leaders field by
// field, the survivor listing, the table build, and that no kernel reads a
// byte beyond an identity.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "poise/hash.h"
#include "poise/identity_table.h"
#include "poise/rendezvous.h"
#include "src/core/candidate_hash.h"
#include "src/core/contract.h"
#include "src/core/hash_and_group.h"
#include "src/core/identity_table_access.h"
#include "src/core/largest_z.h"
#include "test/core/test_util.h"

namespace poise {
namespace {

// The hashing kernels against KeyHash::Mixed, candidate by candidate, on
// random keys and lists of 1..200 identities of 0..64 arbitrary bytes, with
// ineligible and zero-weight entries (whose z is unspecified and not
// compared). Length regimes: anything (mostly the vector kernel's masked
// loads), all >= 8 bytes (its gathers), short only, one shared length, and
// long with a rare empty one. Also checks that nothing is written past n and
// runs sub-ranges at every alignment.
using Kernel = void (*)(uint64_t, const Candidate*, size_t, uint64_t*);

void CheckKernelAgainstMixed(Kernel kernel, uint64_t seed, int lists) {
  std::mt19937_64 rng(seed);
  constexpr uint64_t kSentinel = 0x5eb1e5eb1e5eb1e5ULL;
  size_t compared = 0;
  std::vector<std::string> ids;
  std::vector<Candidate> c;
  std::vector<uint64_t> z;
  for (int list = 0; list < lists; ++list) {
    const size_t n = 1 + rng() % 200;
    const uint64_t regime = rng() % 5;
    const size_t shared = 8 + rng() % 13;
    ids.assign(n, std::string());
    for (std::string& id : ids) {
      size_t len = 0;
      switch (regime) {
        case 0:
          len = rng() % 65;
          break;
        case 1:
          len = 8 + rng() % 57;
          break;
        case 2:
          len = rng() % 9;
          break;
        case 3:
          len = shared;
          break;
        default:
          len = rng() % 50 == 0 ? 0 : 8 + rng() % 57;
          break;
      }
      id.resize(len);
      for (char& ch : id) ch = static_cast<char>(rng());
    }
    c.clear();
    for (const std::string& id : ids) {
      const bool eligible = rng() % 8 != 0;
      const auto weight =
          static_cast<uint32_t>(rng() % 16 == 0 ? 0 : 1 + rng() % 5);
      c.push_back({id, weight, eligible});
    }
    if (rng() % 4 == 0) c[rng() % n].identity = std::string_view();  // null
    std::string key(rng() % 41, '\0');
    for (char& ch : key) ch = static_cast<char>(rng());
    const KeyHash hash(key);
    const size_t begin = rng() % 4 == 0 ? rng() % n : 0;
    z.assign(n - begin + 1, kSentinel);
    kernel(hash.state(), c.data() + begin, n - begin, z.data());
    for (size_t i = begin; i < n; ++i) {
      if (!c[i].IsEligible()) continue;
      ASSERT_EQ(z[i - begin], hash.Mixed(c[i].identity))
          << "list " << list << " index " << i << " length "
          << c[i].identity.size();
      ++compared;
    }
    ASSERT_EQ(z[n - begin], kSentinel) << "wrote past n, list " << list;
  }
  EXPECT_GT(compared, size_t{1000000});
}

TEST(HashKernels, ScalarHashKernelEqualsMixed) {
  CheckKernelAgainstMixed(&internal::HashCandidatesScalar, 51, 25000);
}

class HashKernelsOnTarget : public test_util::KernelFixture {};
INSTANTIATE_TEST_SUITE_P(HashKernels, HashKernelsOnTarget, test_util::Kernels(),
                         test_util::KernelName);

TEST_P(HashKernelsOnTarget, VectorHashKernelEqualsMixed) {
  EXPECT_EQ(internal::ActiveHashTarget(), GetParam());
  CheckKernelAgainstMixed(&internal::HashCandidatesVector, 52, 15000);
  CheckKernelAgainstMixed(&internal::HashCandidatesInBlocks, 56, 25000);
}

// Identities that end exactly where a readable page does (the next page is
// inaccessible): a kernel that read past an identity's last byte would
// crash here. Every length 0..64 and every count 1..70 (all block shapes).
TEST_P(HashKernelsOnTarget, ReadNoByteBeyondAnIdentity) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  constexpr size_t kIds = 70;
  void* map = mmap(nullptr, page * 2 * kIds, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  char* base = static_cast<char*>(map);
  for (size_t k = 0; k < kIds; ++k) {
    ASSERT_EQ(mprotect(base + (2 * k + 1) * page, page, PROT_NONE), 0);
  }
  std::mt19937_64 rng(53);
  for (char* p = base; p < base + page * 2 * kIds; p += 2 * page) {
    for (size_t i = 0; i < page; ++i) p[i] = static_cast<char>(rng());
  }
  const KeyHash hash("edge-key");
  const Kernel kernels[] = {&internal::HashCandidatesScalar,
                            &internal::HashCandidatesVector,
                            &internal::HashCandidatesInBlocks};
  std::vector<Candidate> c(kIds);
  std::vector<uint64_t> z(kIds);
  for (size_t len = 0; len <= 64; ++len) {
    for (size_t n = 1; n <= kIds; ++n) {
      for (size_t k = 0; k < n; ++k) {
        // Identity k ends at its page's end; its length is `len` or, for
        // every third one, a different length (mixed blocks).
        const size_t l = k % 3 == 2 ? (len * 7 + k) % 65 : len;
        c[k] = {std::string_view(base + (2 * k + 1) * page - l, l), 1, true};
      }
      for (Kernel kernel : kernels) {
        kernel(hash.state(), c.data(), n, z.data());
        for (size_t k = 0; k < n; ++k) {
          ASSERT_EQ(z[k], hash.Mixed(c[k].identity)) << len << " " << n;
        }
      }
    }
  }
  munmap(map, page * 2 * kIds);
}

std::string RandomBytes(std::mt19937_64& rng, size_t size) {
  std::string out(size, '\0');
  for (char& ch : out) ch = static_cast<char>(rng());
  return out;
}

// A list of n identities: one length (addresses of one shape: the table's
// common power), or random bytes of several lengths; one in eight a copy of
// an earlier one (equal z: ties).
std::vector<std::string> RandomIdentities(std::mt19937_64& rng, size_t n,
                                          bool same_length) {
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
  return owned;
}

// 1..max_n random identities (RandomIdentities, one length half the time)
// and their table.
struct RandomList {
  std::vector<std::string> owned;
  std::vector<std::string_view> ids;
  IdentityTable table;

  RandomList(std::mt19937_64& rng, size_t max_n)
      : owned(Draw(rng, max_n)), ids(owned.begin(), owned.end()), table(ids) {}

 private:
  static std::vector<std::string> Draw(std::mt19937_64& rng, size_t max_n) {
    const size_t n = 1 + rng() % max_n;  // drawn first (argument order)
    return RandomIdentities(rng, n, rng() % 2 == 0);
  }
};

void ExpectSameLead(const internal::LargestZ& got,
                    const internal::LargestZ& want, const std::string& where) {
  ASSERT_EQ(got.index, want.index) << where;
  ASSERT_EQ(got.z, want.z) << where;
  ASSERT_EQ(got.runner_up, want.runner_up) << where;
  ASSERT_EQ(got.count, want.count) << where;
}

// The one-weight leader and the leaders of 2..8 weight groups against
// LargestZ::Offer's scalar loop, field by field (a runner-up too low would
// let a near-tie pass as decisive, which whole-decision comparisons would
// almost never see), and every z against the contract: 3000 lists of 1..70
// identities of one length or of several, all eligible (no bits), some or
// none, with duplicates (equal z: the first index leads, the runner-up
// equals it); every z < n stored, nothing past n.
TEST_P(HashKernelsOnTarget, TableLeadersEqualTheScalarLoop) {
  std::mt19937_64 rng(53);
  size_t ties = 0, one_length = 0, leads = 0;
  constexpr uint64_t kUntouched = 0x5a5a5a5a5a5a5a5aULL;
  for (int list = 0; list < 3000; ++list) {
    const RandomList random(rng, 70);
    const std::vector<std::string_view>& ids = random.ids;
    const IdentityTable& table = random.table;
    const size_t n = ids.size();
    one_length +=
        internal::IdentityTableAccess::CommonPower(table.ForKey(0)) != 0;
    const uint64_t mode = rng() % 3;  // 0: all eligible, 1: some, 2: none
    const size_t bytes = (n + 7) / 8;
    const size_t groups = 2 + rng() % (internal::kMaxGroups - 1);
    std::vector<uint8_t> bits(bytes, 0), group_bits(groups * bytes, 0);
    std::vector<size_t> eligible;
    std::vector<size_t> group_of(n, groups);  // groups: in none
    for (size_t i = 0; i < n; ++i) {
      if (mode == 0 || (mode == 1 && rng() % 4 != 0)) {
        eligible.push_back(i);
        bits[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
        group_of[i] = rng() % groups;
        group_bits[group_of[i] * bytes + i / 8] |=
            static_cast<uint8_t>(1u << (i % 8));
      }
    }
    const uint8_t* const eligible_bits = mode == 0 ? nullptr : bits.data();
    for (int k = 0; k < 100; ++k) {
      const std::string key = RandomBytes(rng, rng() % 20);
      const IdentityTable::KeyRow row = table.ForKey(KeyHash(key).state());
      internal::LargestZ want = internal::LargestZ::Empty();
      std::vector<internal::LargestZ> want_group(groups,
                                                 internal::LargestZ::Empty());
      for (const size_t i : eligible) {
        want.Offer(row.Mixed(i), i);
        for (size_t g = 0; g < groups; ++g) {
          want_group[g].Offer(row.Mixed(i), i, group_of[i] == g);
        }
      }
      const std::string where =
          "list " + std::to_string(list) + " key " + std::to_string(k);
      std::vector<uint64_t> z(n + 8, kUntouched);
      for (uint64_t* out : {z.data(), static_cast<uint64_t*>(nullptr)}) {
        ExpectSameLead(internal::TableLargestZ(row, n, eligible_bits,
                                               eligible.size(), out),
                       want, where);
      }
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(z[i], contract::HashOf(key, ids[i])) << where << " " << i;
      }
      for (size_t i = n; i < z.size(); ++i) ASSERT_EQ(z[i], kUntouched) << i;
      internal::LargestZ got_group[internal::kMaxGroups];
      std::vector<uint64_t> z2(n + 8, kUntouched);
      internal::TableLargestZByGroup(row, n, group_bits.data(), groups,
                                     z2.data(), got_group);
      for (size_t g = 0; g < groups; ++g) {
        got_group[g].count = want_group[g].count;  // the caller's to set
        ExpectSameLead(got_group[g], want_group[g],
                       where + " group " + std::to_string(g));
      }
      ASSERT_EQ(z2, z) << where;
      ties += want.index != internal::kNone && want.runner_up == want.z;
      leads += want.index != internal::kNone;
    }
  }
  EXPECT_GT(ties, 20000u);  // duplicates among the leaders
  EXPECT_GT(one_length, 1100u);
  EXPECT_LT(one_length, 1900u);
  EXPECT_GT(leads, 150000u);
}

// z for every range [begin, end) of a row (every alignment and tail
// length) against the contract.
TEST_P(HashKernelsOnTarget, TableMixedRangeEqualsTheContract) {
  std::mt19937_64 rng(54);
  for (int list = 0; list < 200; ++list) {
    const RandomList random(rng, 80);
    const std::vector<std::string_view>& ids = random.ids;
    const size_t n = ids.size();
    const std::string key = RandomBytes(rng, rng() % 20);
    const IdentityTable::KeyRow row = random.table.ForKey(KeyHash(key).state());
    for (size_t begin = 0; begin < n; begin += 1 + rng() % 5) {
      const size_t end = begin + rng() % (n - begin + 1);
      std::vector<uint64_t> z(end - begin + 1, 0);
      internal::TableMixedRange(row, begin, end, z.data());
      for (size_t i = begin; i < end; ++i) {
        ASSERT_EQ(z[i - begin], contract::HashOf(key, ids[i])) << list;
      }
      ASSERT_EQ(z[end - begin], 0u) << "wrote past the range";
    }
  }
}

// The survivor listing against a plain loop: random z, thresholds and spans
// (wrapping ones included), every n up to 70; nothing written past what is
// listed.
TEST_P(HashKernelsOnTarget, ListZInRangeListsWhatTheLoopLists) {
  std::mt19937_64 rng(55);
  constexpr size_t kUnwritten = 0xdeadbeef;
  for (int round = 0; round < 20000; ++round) {
    const size_t n = rng() % 71;
    std::vector<uint64_t> z(n);
    for (uint64_t& x : z) x = rng() % 4 == 0 ? rng() % 16 : rng();
    const uint64_t threshold = rng() % 3 == 0 ? rng() % 8 : rng();
    const uint64_t span = rng() % 3 == 0 ? rng() % 8 : rng();
    std::vector<size_t> want;
    for (size_t i = 0; i < n; ++i) {
      if (z[i] - threshold < span) want.push_back(i);
    }
    std::vector<size_t> got(n + 1, kUnwritten);
    const size_t listed =
        internal::ListZInRange(z.data(), n, threshold, span, got.data());
    ASSERT_EQ(listed, want.size()) << round;
    for (size_t s = 0; s < listed; ++s) ASSERT_EQ(got[s], want[s]) << round;
    for (size_t s = listed; s < got.size(); ++s) {
      ASSERT_EQ(got[s], kUnwritten) << "wrote past the list, round " << round;
    }
  }
}

// Tables built on this target give the contract's z for every row (all 256
// low bytes of the key state) and identity length 0..69.
TEST_P(HashKernelsOnTarget, TableBuildEqualsTheContract) {
  std::mt19937_64 rng(47);
  std::vector<std::string> owned;
  for (size_t i = 0; i < 210; ++i) owned.push_back(RandomBytes(rng, i % 70));
  const std::vector<std::string_view> ids(owned.begin(), owned.end());
  const IdentityTable table(ids);
  for (uint64_t low = 0; low < 256; ++low) {
    const uint64_t state = (rng() & ~uint64_t{0xff}) | low;
    for (size_t i = 0; i < ids.size(); ++i) {
      ASSERT_EQ(table.Mixed(state, i),
                Mix64(Fnv1aUpdateByte(Fnv1aUpdate(state, ids[i]), 0xFF)))
          << low << " " << i;
    }
  }
}

// Forcing a target: every compiled target is named, the hook refuses what
// is not a single compiled target, and 0 goes back to the best one.
TEST(HashKernels, TargetHooks) {
  const std::vector<int64_t> targets = internal::CompiledHashTargets();
  ASSERT_FALSE(targets.empty());
  for (const int64_t t : targets) {
    EXPECT_STRNE(internal::HashTargetName(t), "Unknown") << t;
  }
  const int64_t best = internal::ActiveHashTarget();
  if (targets.size() > 1) {
    EXPECT_FALSE(internal::ForceHashTarget(targets[0] | targets[1]));
  }
  EXPECT_FALSE(internal::ForceHashTarget(int64_t{1} << 50));  // no target
  EXPECT_TRUE(internal::ForceHashTarget(0));
  EXPECT_EQ(internal::ActiveHashTarget(), best);
  // The portable target is the last compiled and runs everywhere.
  ASSERT_TRUE(internal::ForceHashTarget(targets.back()));
  EXPECT_EQ(internal::ActiveHashTarget(), targets.back());
  EXPECT_TRUE(internal::ForceHashTarget(0));
  EXPECT_EQ(internal::ActiveHashTarget(), best);
}

}  // namespace
}  // namespace poise
