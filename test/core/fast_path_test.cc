// Proves the core's fast path (src/core/tournament.h, the interleaved hashing
// in rendezvous.cc) equal to the plain contract in reference.h, and checks the
// numeric facts the per-weight shortcut rests on.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "../../src/core/tournament.h"
#include "poise/hash.h"
#include "poise/rendezvous.h"
#include "reference.h"

namespace poise {
namespace {

constexpr uint64_t kTwo53 = uint64_t{1} << 53;

// LnUnit as a function of s = (z >> 11) + 1, 1 <= s <= 2^53.
double LnOfS(uint64_t s) { return LnUnit((s - 1) << 11); }

// |LnUnit - ln(s / 2^53)| with an 80-bit long double logarithm.
double ErrorAt(uint64_t s) {
  const long double exact = std::log(static_cast<long double>(s)) -
                            53 * std::log(static_cast<long double>(2));
  return static_cast<double>(
      std::fabs(static_cast<long double>(LnOfS(s)) - exact));
}

// The shortcut's lemma needs 2 * max error < 2^-30; the analysis in
// tournament.h bounds it by 3e-14. Measured here over every binade boundary
// neighbourhood and millions of random s.
TEST(FastPath, LnUnitErrorBoundBacksTheSeparationMargin) {
  double worst = 0;
  for (int e = 0; e <= 53; ++e) {
    const uint64_t edge = uint64_t{1} << e;
    for (uint64_t d = 0; d < 4096; ++d) {
      if (edge > d) worst = std::max(worst, ErrorAt(edge - d));
      if (edge + d <= kTwo53) worst = std::max(worst, ErrorAt(edge + d));
    }
  }
  std::mt19937_64 rng(5);
  for (int i = 0; i < 3000000; ++i) {
    const uint64_t s = (rng() >> (11 + rng() % 53)) + 1;
    worst = std::max(worst, ErrorAt(s));
  }
  EXPECT_LT(worst, 1e-13);
  EXPECT_LT(2 * worst, std::ldexp(1.0, -30) / 1000);  // a 1000x margin
}

// Monotonicity in s, checked on adjacent pairs: exhaustively within 20000 of
// every binade boundary and on millions of random pairs. The shortcut does
// not rely on it (it re-ranks near ties exactly), but it documents that the
// computed logarithm behaves.
TEST(FastPath, LnUnitIsNonDecreasingOnAdjacentS) {
  for (int e = 1; e <= 53; ++e) {
    const uint64_t edge = uint64_t{1} << e;
    for (uint64_t s = edge > 20000 ? edge - 20000 : 1;
         s < std::min(edge + 20000, kTwo53); ++s) {
      ASSERT_LE(LnOfS(s), LnOfS(s + 1)) << s;
    }
  }
  std::mt19937_64 rng(6);
  for (int i = 0; i < 2000000; ++i) {
    const uint64_t s = (rng() >> (11 + rng() % 53)) % (kTwo53 - 1) + 1;
    ASSERT_LE(LnOfS(s), LnOfS(s + 1)) << s;
  }
}

// The lemma itself at its edge: the closest separated s never outscores the
// leader at any weight.
TEST(FastPath, SeparatedHashesRankAfterTheLeader) {
  std::mt19937_64 rng(8);
  for (int i = 0; i < 1000000; ++i) {
    const uint64_t z_max = rng() >> (rng() % 53);
    const uint64_t s_max = (z_max >> 11) + 1;
    const uint64_t gap = (s_max >> 30) + 1 + rng() % 3;
    if (gap >= s_max) continue;
    const uint64_t z = ((s_max - gap - 1) << 11) | (rng() & 0x7ff);
    ASSERT_TRUE(internal::Separated(z_max, z));
    const uint32_t w = 1 + static_cast<uint32_t>(rng() % 1000);
    const Rank leader{Score(z_max, w), z_max, w, 1};
    const Rank other{Score(z, w), z, w, 0};
    ASSERT_TRUE(leader.Precedes(other)) << z_max << " " << z;
  }
}

// The tournament on synthetic hashes, to reach what real keys almost never
// produce: equal z, equal s with different z, s just inside and just outside
// the separation margin, more weights than the group table, ties in score.
struct SyntheticField {
  std::vector<uint64_t> z;
  std::vector<uint32_t> weights;
  std::vector<bool> ok;
  std::vector<uint64_t> loads;
  std::vector<uint64_t> caps;  // by weight, via capacity()

  size_t size() const { return z.size(); }
  bool eligible(size_t i) const { return ok[i]; }
  uint32_t weight(size_t i) const { return weights[i]; }
  void Hash(size_t begin, size_t end, uint64_t* out) const {
    for (size_t i = begin; i < end; ++i) out[i - begin] = z[i];
  }
  uint64_t Z(size_t i) const { return z[i]; }
  uint64_t load(size_t i) const { return loads[i]; }
  uint64_t capacity(uint32_t w) const { return caps[w]; }
};

// The contract's order by brute force with the oracle's logarithm.
bool RefPrecedes(const SyntheticField& f, size_t a, size_t b) {
  const double sa = -reference::LnU(f.z[a]) / f.weights[a];
  const double sb = -reference::LnU(f.z[b]) / f.weights[b];
  if (sa != sb) return sa < sb;
  if (f.z[a] != f.z[b]) return f.z[a] > f.z[b];
  if (f.weights[a] != f.weights[b]) return f.weights[a] > f.weights[b];
  return a < b;
}

TEST(FastPath, TournamentMatchesBruteForceOnNearTies) {
  std::mt19937_64 rng(13);
  for (int trial = 0; trial < 200000; ++trial) {
    SyntheticField f;
    const size_t n = 1 + rng() % (trial % 50 == 0 ? 300 : 24);
    const uint32_t distinct = 1 + static_cast<uint32_t>(rng() % 12);
    const uint64_t base = rng() >> (rng() % 60);
    f.caps.resize(13);
    for (auto& c : f.caps) c = rng() % 4;
    for (size_t i = 0; i < n; ++i) {
      uint64_t z = rng();
      switch (rng() % 6) {  // cluster around a shared base hash
        case 0:
          z = base;
          break;  // equal z
        case 1:
          z = base ^ (rng() & 0x7ff);
          break;  // equal s
        case 2:
          z = base - (rng() % 4096) * 2048;
          break;  // near s
        case 3:
          z = base - (((base >> 41) + rng() % 3) << 11);
          break;  // edge
        default:
          break;
      }
      f.z.push_back(z);
      f.weights.push_back(1 + static_cast<uint32_t>(rng() % distinct));
      f.ok.push_back(rng() % 7 != 0);
      f.loads.push_back(rng() % 4);
    }
    const auto out = internal::RunTournament<true>(f);
    size_t best = internal::kNone, best_room = internal::kNone;
    for (size_t i = 0; i < n; ++i) {
      if (!f.ok[i]) continue;
      if (best == internal::kNone || RefPrecedes(f, i, best)) best = i;
      if (f.loads[i] < f.caps[f.weights[i]] &&
          (best_room == internal::kNone || RefPrecedes(f, i, best_room))) {
        best_room = i;
      }
    }
    ASSERT_EQ(out.found, best != internal::kNone) << trial;
    if (out.found) {
      ASSERT_EQ(out.affinity.index, best) << trial;
    }
    ASSERT_EQ(out.found_room, best_room != internal::kNone) << trial;
    if (out.found_room) {
      ASSERT_EQ(out.selection.index, best_room) << trial;
    }
    const auto unbounded = internal::RunTournament<false>(f);
    ASSERT_EQ(unbounded.found, out.found);
    if (out.found) {
      ASSERT_EQ(unbounded.affinity.index, best) << trial;
    }
  }
}

std::vector<Candidate> View(const std::vector<reference::Backend>& backends) {
  std::vector<Candidate> out;
  for (const auto& b : backends)
    out.push_back({b.identity, b.weight, b.eligible});
  return out;
}

std::string Identity(std::mt19937_64& rng, size_t pool) {
  const size_t i = rng() % pool;
  if (i == 7) return "";  // empty identities hash too
  switch (i % 3) {
    case 0:
      return "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250) +
             ":8080";
    case 1:
      return "backend-" + std::to_string(i);
    default:
      return std::string(i % 23, static_cast<char>('a' + i % 26)) +
             std::to_string(i);
  }
}

// Real keys and identities: Pick and Decide against reference::Order and
// reference::Decide. Each candidate list serves several keys.
void CheckRandomLists(uint64_t seed, int lists, size_t max_n, int keys_each) {
  std::mt19937_64 rng(seed);
  DecisionScratch scratch;
  for (int list = 0; list < lists; ++list) {
    const size_t n = 1 + rng() % max_n;
    const uint32_t distinct = 1 + static_cast<uint32_t>(rng() % 11);
    std::vector<reference::Backend> b;
    for (size_t i = 0; i < n; ++i) {
      b.push_back({Identity(rng, n + n / 4 + 1),  // some duplicates
                   1 + static_cast<uint32_t>(rng() % distinct) * 3, rng() % 6,
                   rng() % 9 != 0});
    }
    const std::vector<Candidate> view = View(b);
    for (int k = 0; k < keys_each; ++k) {
      std::string key(rng() % 40, '\0');
      for (char& c : key) c = static_cast<char>(rng());
      const auto order = reference::Order(key, b);
      const auto pick = WeightedRendezvous::Pick(key, view);
      ASSERT_EQ(pick.ok(), !order.empty());
      if (!pick.ok()) continue;
      ASSERT_EQ(pick.value(), order.front().index) << list << "/" << k;

      const uint32_t factor = 100 + static_cast<uint32_t>(rng() % 150);
      const auto expected = reference::Decide(key, b, factor);
      const auto got = BoundedLoadRendezvous::Create(factor)->Decide(
          key, view, [&](size_t i) { return b[i].load; }, scratch);
      ASSERT_TRUE(got.ok() && expected.has_value());
      ASSERT_EQ(got.value().affinity, expected->affinity);
      ASSERT_EQ(got.value().selection, expected->selection);
      ASSERT_EQ(got.value().selected_capacity, expected->capacity);
      ASSERT_EQ(got.value().selected_load, b[expected->selection].load);
      ASSERT_EQ(got.value().spilled, expected->affinity != expected->selection);
    }
  }
}

TEST(FastPath, SmallListsMatchReference) {
  CheckRandomLists(21, 60000, 12, 16);
}
TEST(FastPath, MediumListsMatchReference) {
  CheckRandomLists(22, 3000, 100, 8);
}
TEST(FastPath, LargeListsMatchReference) { CheckRandomLists(23, 60, 1000, 4); }

// Capacity's 64-bit shortcut against the 128-bit formula, around the edge
// where it hands over.
TEST(FastPath, CapacityShortcutEqualsWideFormula) {
  std::mt19937_64 rng(31);
  for (int i = 0; i < 1000000; ++i) {
    const auto f =
        static_cast<uint32_t>(100 + rng() % (i % 2 ? 200 : 1u << 31));
    const uint64_t load =
        (uint64_t{UINT32_MAX} - 2 + rng() % 5) * (i % 3 == 0 ? 1 : rng() % 3);
    const auto total_weight = static_cast<uint32_t>(1 + rng() % UINT32_MAX);
    const auto weight = static_cast<uint32_t>(1 + rng() % total_weight);
    using u128 = unsigned __int128;
    const u128 num = u128{f} * (u128{load} + 1) * weight;
    const u128 den = u128{100} * total_weight;
    const u128 wide = (num + den - 1) / den;
    const uint64_t expected =
        wide > u128{UINT64_MAX} ? UINT64_MAX : static_cast<uint64_t>(wide);
    ASSERT_EQ(BoundedLoadRendezvous::Capacity(f, load, weight, total_weight),
              expected);
  }
}

// Equal weights everywhere: the pick is plain argmax z.
TEST(FastPath, EqualWeightsAreArgmaxZOnManyKeys) {
  std::vector<std::string> ids;
  std::vector<Candidate> c;
  for (int i = 0; i < 37; ++i) ids.push_back("10.1.0." + std::to_string(i));
  for (const auto& id : ids) c.push_back({id, 5});
  for (int k = 0; k < 200000; ++k) {
    const std::string key = "key-" + std::to_string(k);
    size_t best = 0;
    for (size_t i = 1; i < ids.size(); ++i) {
      if (reference::Z(key, ids[i]) > reference::Z(key, ids[best])) best = i;
    }
    ASSERT_EQ(WeightedRendezvous::Pick(key, c).value(), best);
  }
}

}  // namespace
}  // namespace poise
