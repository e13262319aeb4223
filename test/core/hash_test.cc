#include "poise/hash.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "src/core/contract.h"

namespace poise {
namespace {

uint64_t Bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof(b));
  return b;
}

// Vectors published with poise-core's contract (issue #2).
TEST(HashContract, PublishedFnvAndMixVectors) {
  EXPECT_EQ(Fnv1a("hello"), 0xa430d84680aabd0bULL);
  EXPECT_EQ(Mix64(0), 0u);
  EXPECT_EQ(Mix64(1), 0x5692161d100b05e5ULL);
  EXPECT_EQ(Mix64(0xffffffffffffffffULL), 0xb4d055fcf2cbbd7bULL);
  EXPECT_EQ(KeyHash("customer-42").Mixed("a"), 0xceb2b67a0843e132ULL);
}

TEST(HashContract, PublishedScoreVectors) {
  const KeyHash key("customer-42");
  EXPECT_EQ(Bits(Score(key.Mixed("a"), 1)), 0x3fcb61abcc5ad678ULL);
  EXPECT_EQ(Bits(Score(key.Mixed("b"), 3)), 0x3fa703fba2874575ULL);
  EXPECT_EQ(Bits(Score(key.Mixed("c"), 6)), 0x3fd131156e5a33f3ULL);
  EXPECT_EQ(Bits(LnUnit(0x8000000000000000ULL)), 0xbfe62e42fefa39edULL);
}

TEST(HashContract, LnUnitEndpoints) {
  // s = 2^53 (U = 1) gives exactly zero; s = 1 gives -53 ln 2 rounded.
  EXPECT_EQ(LnUnit(0xffffffffffffffffULL), 0.0);
  EXPECT_EQ(LnUnit(0), -53.0 * 0.6931471805599453);
}

TEST(HashContract, KeyStateReuseEqualsFullFraming) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::string key(rng() % 40, '\0');
    std::string id(rng() % 24, '\0');
    for (char& c : key) c = static_cast<char>(rng());
    for (char& c : id) c = static_cast<char>(rng());
    ASSERT_EQ(KeyHash(key).Mixed(id), contract::HashOf(key, id));
  }
}

TEST(HashContract, LnUnitMatchesReferenceBitForBit) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 1000000; ++i) {
    uint64_t z = rng();
    z >>= (rng() % 64);  // cover every binade of s
    ASSERT_EQ(Bits(LnUnit(z)), Bits(contract::LnU(z))) << std::hex << z;
  }
}

}  // namespace
}  // namespace poise
