// BoundedLoadRendezvous::Capacity and the room tests without division
// (src/core/room_search.h) against the contract's exact 128-bit formula.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>

#include "poise/rendezvous.h"
#include "src/core/contract.h"
#include "src/core/room_search.h"

namespace poise {
namespace {

// Capacity's 64-bit shortcut against the contract's 128-bit formula,
// around the edges where it hands over: L + 1 near 2^32, and W near
// 2^64 / 100 (where 100 W stops fitting in 64 bits) and past 2^32.
TEST(Capacity, CapacityShortcutEqualsWideFormula) {
  std::mt19937_64 rng(31);
  size_t past_64_bits = 0, fallbacks = 0;
  for (int i = 0; i < 1000000; ++i) {
    const auto f =
        static_cast<uint32_t>(100 + rng() % (i % 2 ? 200 : 1u << 31));
    const uint64_t load = i % 5 == 4 ? UINT64_MAX - 1 - rng() % 1000
                                     : (uint64_t{UINT32_MAX} - 2 + rng() % 5) *
                                           (i % 3 == 0 ? 1 : rng() % 3);
    uint64_t total_weight = 0;
    switch (i % 4) {
      case 0:
        total_weight = 1 + rng() % UINT32_MAX;
        break;
      case 1:
        total_weight = UINT64_MAX / 100 - 2 + rng() % 5;
        break;
      case 2:
        total_weight = 1 + (rng() >> (rng() % 64));
        break;
      default:
        total_weight = uint64_t{UINT32_MAX} + rng() % 1000;
        break;
    }
    const auto weight = static_cast<uint32_t>(
        1 + rng() % std::min<uint64_t>(total_weight, UINT32_MAX));
    const UInt128 expected = contract::Capacity(f, load, weight, total_weight);
    past_64_bits += expected > UINT64_MAX;
    ASSERT_TRUE(BoundedLoadRendezvous::Capacity(f, load, weight,
                                                total_weight) == expected);
    // The room test without the division, on loads around the bound (and
    // with 100 W past 2^64 - 1 in case 1, its fallback to the division).
    const internal::RoomTest room =
        internal::RoomTestFor(f, load, weight, total_weight);
    const uint64_t near = expected > UINT64_MAX
                              ? UINT64_MAX - rng() % 3
                              : static_cast<uint64_t>(expected) - 1;
    for (const uint64_t probe : {near, near + 1, near + 2, uint64_t{0}}) {
      ASSERT_EQ(room(probe), UInt128{probe} < expected) << i;
    }
    fallbacks += room.den == 1;
  }
  EXPECT_GT(past_64_bits, 1000u);
  EXPECT_GT(fallbacks, 50000u);
}

}  // namespace
}  // namespace poise
