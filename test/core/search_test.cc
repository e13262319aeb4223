// The owner and room searches (src/core/owner_search.h, room_search.h)
// against the contract (src/core/contract.h): on synthetic hashes that reach
// what real keys almost never produce (equal z, equal s, near-ties across
// weights, more weights than the group table), on real keys with the
// certification margin widened until the exact fallback runs, and whole
// decisions (Pick, Decide, with and without an IdentityTable) on random
// lists, once per hashing kernel.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "poise/hash.h"
#include "poise/identity_table.h"
#include "poise/rendezvous.h"
#include "src/core/contract.h"
#include "src/core/room_search.h"
#include "test_util.h"

namespace poise {
namespace {

using test_util::View;

constexpr uint64_t kTwo53 = uint64_t{1} << 53;

// The searches on synthetic hashes, to reach what real keys almost never
// produce: equal z, equal s with different z, s just inside and just outside
// the separation margin, more weights than the group table, ties in score.
struct SyntheticCandidates {
  std::vector<uint64_t> z;
  std::vector<uint32_t> weights;
  std::vector<bool> ok;
  std::vector<uint64_t> loads;
  std::vector<UInt128> caps;  // by weight, via bound()

  size_t size() const { return z.size(); }
  bool eligible(size_t i) const { return ok[i]; }
  uint32_t weight(size_t i) const { return weights[i]; }
  void Hash(size_t begin, size_t end, uint64_t* out) const {
    for (size_t i = begin; i < end; ++i) out[i - begin] = z[i];
  }
  uint64_t Z(size_t i) const { return z[i]; }
  uint64_t load(size_t i) const { return loads[i]; }
  // The Bound whose capacity is caps[w]: ceil(100 c / 100) = c (caps below
  // 2^64 here), or one that admits nothing for 0.
  Bound bound(uint32_t w) const {
    if (caps[w] == 0) return {};
    return {100, static_cast<uint64_t>(caps[w] - 1), 1, 1};
  }
};

// Both searches, bounded, on `f` with their room buffers; a small `quota` makes
// most candidates miss the survivor threshold (more full room scans).
internal::SearchResult RunBounded(const SyntheticCandidates& f,
                                  size_t quota = 8,
                                  double margin = internal::kScoreMargin) {
  std::vector<uint64_t> z(f.size());
  std::vector<uint64_t> loads(f.size());
  std::vector<size_t> survivors(f.size());
  const internal::RoomBuffers buffers{
      {z.data(), loads.data()}, survivors.data(), quota};
  return internal::ScanAndSearch<true>(f, &buffers, margin);
}

// The contract's order by brute force with the contract's logarithm.
bool RefPrecedes(const SyntheticCandidates& f, size_t a, size_t b) {
  const double sa = -contract::LnU(f.z[a]) / f.weights[a];
  const double sb = -contract::LnU(f.z[b]) / f.weights[b];
  if (sa != sb) return sa < sb;
  if (f.z[a] != f.z[b]) return f.z[a] > f.z[b];
  if (f.weights[a] != f.weights[b]) return f.weights[a] > f.weights[b];
  return a < b;
}

// The bounded and the unbounded search on `f` against brute force over
// RefPrecedes: the best candidate, the best with room, and the unbounded
// search's best. Returns the bounded search's result (callers count
// fallbacks).
internal::SearchResult ExpectSearchMatchesBruteForce(
    const SyntheticCandidates& f, int trial, size_t quota = 8) {
  const auto out = RunBounded(f, quota);
  size_t best = internal::kNone, best_room = internal::kNone;
  for (size_t i = 0; i < f.z.size(); ++i) {
    if (!f.ok[i]) continue;
    if (best == internal::kNone || RefPrecedes(f, i, best)) best = i;
    if (f.loads[i] < f.caps[f.weights[i]] &&
        (best_room == internal::kNone || RefPrecedes(f, i, best_room))) {
      best_room = i;
    }
  }
  EXPECT_EQ(out.found, best != internal::kNone) << trial;
  if (out.found) {
    EXPECT_EQ(out.affinity.index, best) << trial;
  }
  EXPECT_EQ(out.found_room, best_room != internal::kNone) << trial;
  if (out.found_room) {
    EXPECT_EQ(out.selection.index, best_room) << trial;
  }
  const auto unbounded = internal::ScanAndSearch<false>(f);
  EXPECT_EQ(unbounded.found, out.found) << trial;
  if (out.found) {
    EXPECT_EQ(unbounded.affinity.index, best) << trial;
  }
  return out;
}

TEST(Search, MatchesBruteForceOnNearTies) {
  std::mt19937_64 rng(13);
  size_t room_scans = 0;
  for (int trial = 0; trial < 200000; ++trial) {
    SyntheticCandidates f;
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
    // Quotas 1 and 4 put most lists past the survivor threshold.
    constexpr size_t kQuotas[] = {1, 4, 16};
    const auto out =
        ExpectSearchMatchesBruteForce(f, trial, kQuotas[trial % 3]);
    room_scans += out.room_scans;
    ASSERT_FALSE(::testing::Test::HasFailure()) << trial;
  }
  EXPECT_GT(room_scans, 1000u);
}

// Step 2 of the room search: a weight's only survivor with room leads its
// survivors, but a member just under the threshold may have the same s. The
// search must not call that largest z clear (it cannot see the members
// below the threshold), so the weight is re-ranked exactly.
TEST(Search, SurvivorLeaderNearTheThresholdIsReRanked) {
  constexpr size_t kN = 100;
  const uint64_t threshold = internal::SurvivorThreshold(kN, 8);
  ASSERT_GT(threshold, 0u);
  SyntheticCandidates f;
  f.caps = {0, 1};
  for (size_t i = 0; i < kN; ++i) {
    f.z.push_back(i);  // far below the threshold, and no room
    f.weights.push_back(1);
    f.ok.push_back(true);
    f.loads.push_back(1);
  }
  f.z[10] = UINT64_MAX;     // the owner, without room
  f.z[20] = threshold - 1;  // room, not a survivor, same s as [30]
  f.loads[20] = 0;
  f.z[30] = threshold;  // room, the only survivor with room
  f.loads[30] = 0;
  ASSERT_EQ((f.z[20] >> 11), (f.z[30] >> 11));
  const auto out = RunBounded(f);
  EXPECT_EQ(out.affinity.index, 10u);
  EXPECT_EQ(out.selection.index, 30u);
  EXPECT_EQ(out.room_scans, 0u);
  EXPECT_GT(out.exact_scores, 0u);  // the weight was re-ranked exactly
  f.loads[30] = 1;  // now no survivor has room: the weight is scanned
  const auto scanned = RunBounded(f);
  EXPECT_EQ(scanned.selection.index, 20u);
  EXPECT_EQ(scanned.room_scans, 1u);
}

// Step 3 may drop a weight none of whose survivors has room only when its
// unseen members provably rank behind a contender already found. Here a
// weight-2 member just under the threshold, with room, beats the weight-1
// survivor with room by less than the certification margin: the weight must
// be searched again, not dropped.
TEST(Search, UnresolvedWeightNearATieIsSearchedNotDropped) {
  constexpr size_t kN = 40;
  const uint64_t threshold = internal::SurvivorThreshold(kN, 8);
  ASSERT_GT(threshold, 0u);
  SyntheticCandidates f;
  f.caps = {0, 1, 1};
  for (size_t i = 0; i < kN; ++i) {
    f.z.push_back(i);  // far below the threshold, no room
    f.weights.push_back(1 + static_cast<uint32_t>(i % 2));
    f.ok.push_back(true);
    f.loads.push_back(1);
  }
  const size_t owner = 0, blocked = 1, a = 2, b = 3;
  f.z[owner] = UINT64_MAX;        // weight 1, no room: the decision spills
  f.z[blocked] = threshold + 5;   // weight 2's only survivor, no room
  f.z[b] = threshold - 1 - 4096;  // weight 2, room, not a survivor
  f.loads[b] = 0;
  // a (weight 1, room, a survivor) with -ln(u_a) just above -ln(u_b) / 2:
  // u_a ~ sqrt(u_b), nudged down until b provably wins by a hair.
  const uint64_t s_b = (f.z[b] >> 11) + 1;
  auto s_a = static_cast<uint64_t>(
      std::sqrt(static_cast<long double>(s_b) * 9007199254740992.0L));
  f.loads[a] = 0;
  for (;; --s_a) {
    f.z[a] = (s_a - 1) << 11;
    if (RefPrecedes(f, b, a)) break;
  }
  ASSERT_GE(f.z[a], threshold);
  const double gap = -contract::LnU(f.z[a]) - -contract::LnU(f.z[b]) / 2;
  ASSERT_LT(gap, 4 * internal::kScoreMargin);  // inside the margin
  const auto out = RunBounded(f);
  EXPECT_EQ(out.affinity.index, owner);
  EXPECT_EQ(out.selection.index, b);
  EXPECT_GE(out.room_scans, 1u);
}

// LargestZ::Offer stands a refused entry in as z = 0, which never leads; a
// taken z = 0 cannot lead either, so a group whose taken entries all have
// z = 0 keeps index kNone and must fall back to the exact re-rank. Lists
// full of z = 0 (and tiny z) with and without room, against brute force;
// the fallback must actually run.
TEST(Search, ZeroHashesFallBackToTheExactRerank) {
  internal::LargestZ l = internal::LargestZ::Empty();
  l.Offer(0, 3, true);
  l.Offer(5, 4, false);
  EXPECT_EQ(l.index, internal::kNone);
  EXPECT_EQ(l.count, 1u);
  EXPECT_FALSE(internal::ClearOfRunnerUp(l));
  std::mt19937_64 rng(29);
  size_t fallbacks = 0;
  for (int trial = 0; trial < 100000; ++trial) {
    SyntheticCandidates f;
    const size_t n = 1 + rng() % 12;
    f.caps = {0, 1, 1, 1};
    for (size_t i = 0; i < n; ++i) {
      const uint64_t pick = rng() % 4;
      f.z.push_back(pick < 2 ? 0 : pick == 2 ? rng() % 4096 : rng());
      f.weights.push_back(1 + static_cast<uint32_t>(rng() % 3));
      f.ok.push_back(rng() % 5 != 0);
      f.loads.push_back(rng() % 2);
    }
    fallbacks += ExpectSearchMatchesBruteForce(f, trial).exact_scores > 0;
    ASSERT_FALSE(::testing::Test::HasFailure()) << trial;
  }
  EXPECT_GT(fallbacks, 0u);
}

// s_b whose score at weight wb is as close as possible to s_a's at wa:
// U_b = U_a^(wb/wa). Returns the nearest few candidates' centre.
uint64_t Partner(uint64_t s_a, uint32_t wa, uint32_t wb) {
  const long double log2u = std::log2(static_cast<long double>(s_a)) - 53.0L;
  const long double s_b =
      std::exp2(53.0L + log2u * static_cast<long double>(wb) / wa);
  if (!(s_b >= 1)) return 1;
  return std::min<uint64_t>(kTwo53, static_cast<uint64_t>(std::llround(s_b)));
}

// Adversarial cross-weight near-ties for the default margin: pairs of
// leaders of different weights whose contract scores differ by a few ulps
// or not at all (then the z, weight and index rules decide). The
// approximation cannot order them, so the exact fallback runs; the result
// must equal the brute-force contract order.
TEST(Search, CrossWeightNearTiesFallBackToTheContract) {
  std::mt19937_64 rng(43);
  size_t near_ties = 0, exact_ties = 0;
  const uint32_t pairs[][2] = {{1, 2}, {2, 1},   {1, 3}, {2, 3},
                               {3, 7}, {1, 100}, {5, 4}, {1000, 999}};
  for (int trial = 0; trial < 60000; ++trial) {
    const auto& pw = pairs[static_cast<size_t>(trial) % 8];
    // lnU_a in about [-4, -1e-3]: where winners live and ulps are fine.
    const double u = -std::ldexp(1.0, -static_cast<int>(rng() % 12)) *
                     (0.25 + static_cast<double>(rng() % 1000) / 1000.0);
    const auto s_a = static_cast<uint64_t>(std::ldexp(std::exp(u), 53));
    const uint64_t centre = Partner(s_a, pw[0], pw[1]);
    SyntheticCandidates f;
    f.caps.assign(1001, 0);
    auto add = [&](uint64_t s, uint32_t w) {
      f.z.push_back(((s - 1) << 11) | (rng() & 0x7ff));
      f.weights.push_back(w);
      f.ok.push_back(true);
      f.loads.push_back(rng() % 2);
      f.caps[w] = 1 + rng() % 2;
    };
    add(s_a, pw[0]);
    for (uint64_t d = 0; d < 5; ++d) {
      const uint64_t s_b = std::max<uint64_t>(1, centre + d - 2);
      if (s_b > kTwo53) continue;
      add(s_b, pw[1]);
    }
    // Shuffle in a few random others (usually far behind).
    for (int k = 0; k < static_cast<int>(rng() % 4); ++k) {
      add((rng() >> 11) + 1, 1 + static_cast<uint32_t>(rng() % 3));
    }
    const size_t n = f.z.size();
    for (size_t i = 1; i < n; ++i) {  // random positions
      const size_t j = rng() % (i + 1);
      std::swap(f.z[i], f.z[j]);
      std::swap(f.weights[i], f.weights[j]);
      std::swap(f.loads[i], f.loads[j]);
    }
    for (size_t i = 0; i < n; ++i) {
      for (size_t j = i + 1; j < n; ++j) {
        exact_ties += f.weights[i] != f.weights[j] &&
                      -contract::LnU(f.z[i]) / f.weights[i] ==
                          -contract::LnU(f.z[j]) / f.weights[j];
      }
    }
    const auto out = RunBounded(f);
    near_ties += out.near_ties;
    size_t best = internal::kNone, best_room = internal::kNone;
    for (size_t i = 0; i < n; ++i) {
      if (best == internal::kNone || RefPrecedes(f, i, best)) best = i;
      if (f.loads[i] < f.caps[f.weights[i]] &&
          (best_room == internal::kNone || RefPrecedes(f, i, best_room))) {
        best_room = i;
      }
    }
    ASSERT_EQ(out.affinity.index, best) << trial;
    ASSERT_EQ(out.found_room, best_room != internal::kNone) << trial;
    if (out.found_room) {
      ASSERT_EQ(out.selection.index, best_room) << trial;
      ASSERT_EQ(out.selection_capacity, f.caps[f.weights[best_room]]);
    }
    ASSERT_EQ(internal::ScanAndSearch<false>(f).affinity.index, best) << trial;
  }
  EXPECT_GT(near_ties, 10000u);
  EXPECT_GT(exact_ties, 100u);
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

// Real keys and identities cannot be steered to a tie within the default
// margin (~1e-12: about one key in 1e11), so this searches a million keys by
// brute force for the closest cross-weight leader pairs (within 1e-6), then
// checks those keys through Pick and Decide against the oracle, and through
// the searches with the margin widened to 1e-6 (sound: any margin above
// the error bound is), which forces the exact fallback on real hashes.
TEST(Search, RealKeyNearTiesMatchTheContract) {
  std::vector<contract::LoadedCandidate> b;
  b.reserve(10);
  for (int i = 0; i < 10; ++i) {
    b.push_back({"10.0.0." + std::to_string(i + 1) + ":8080",
                 i % 3 == 0 ? 2u : 1u, static_cast<uint64_t>(i % 4), true});
  }
  const std::vector<Candidate> view = View(b);
  constexpr double kWide = 1e-6;
  std::vector<std::string> found;
  for (int k = 0; k < 1000000 && found.size() < 200; ++k) {
    const std::string key = "near-" + std::to_string(k);
    const KeyHash hash(key);
    double best[3] = {1e300, 1e300, 1e300};  // by weight
    for (const auto& c : view) {
      const double a = internal::ApproxScore(hash.Mixed(c.identity), c.weight);
      best[c.weight] = std::min(best[c.weight], a);
    }
    if (std::fabs(best[1] - best[2]) < kWide) found.push_back(key);
  }
  ASSERT_GE(found.size(), 3u);
  DecisionScratch scratch;
  size_t near_ties = 0;
  for (const std::string& key : found) {
    const auto order = contract::Order(key, b);
    ASSERT_EQ(WeightedRendezvous::Pick(key, view).value(), order.front().index);
    for (uint32_t factor : {100u, 105u, 150u}) {
      const auto expected = contract::Decide(key, b, factor);
      const auto got = BoundedLoadRendezvous::Create(factor)->Decide(
          key, view, [&](size_t i) { return b[i].load; }, scratch);
      ASSERT_TRUE(got.ok() && expected.ok());
      ASSERT_EQ(got.value().affinity, expected.value().affinity);
      ASSERT_EQ(got.value().selection, expected.value().selection);
      ASSERT_EQ(got.value().selected_capacity,
                expected.value().selected_capacity);

      SyntheticCandidates f;
      const KeyHash hash(key);
      uint64_t total = 0;
      for (const auto& x : b) total += x.load;
      f.caps.assign(3, 0);
      for (uint32_t w : {1u, 2u}) {
        f.caps[w] = BoundedLoadRendezvous::Capacity(factor, total, w, 14);
      }
      for (const auto& x : b) {
        f.z.push_back(hash.Mixed(x.identity));
        f.weights.push_back(x.weight);
        f.ok.push_back(true);
        f.loads.push_back(x.load);
      }
      const auto wide = RunBounded(f, 16, kWide);
      near_ties += wide.near_ties;
      ASSERT_EQ(wide.affinity.index, expected.value().affinity);
      ASSERT_EQ(wide.selection.index, expected.value().selection);
      ASSERT_EQ(wide.selection_capacity, expected.value().selected_capacity);
    }
  }
  EXPECT_GT(near_ties, 0u);
}

// The same oracle comparison on random lists, with the margin widened until
// the fallback runs on most comparisons (real hashes, all tie rules live).
TEST(Search, WideMarginSearchMatchesTheContract) {
  std::mt19937_64 rng(47);
  size_t near_ties = 0;
  for (int list = 0; list < 20000; ++list) {
    const size_t n = 1 + rng() % 16;
    std::vector<contract::LoadedCandidate> b;
    for (size_t i = 0; i < n; ++i) {
      b.push_back({Identity(rng, n + 2), 1 + static_cast<uint32_t>(rng() % 4),
                   rng() % 5, rng() % 8 != 0});
    }
    std::string key(rng() % 24, '\0');
    for (char& c : key) c = static_cast<char>(rng());
    const uint32_t factor = 100 + static_cast<uint32_t>(rng() % 100);
    const auto expected = contract::Decide(key, b, factor);
    uint64_t total = 0;
    uint64_t total_weight = 0;
    for (const auto& x : b) {
      if (!x.eligible) continue;
      total += x.load;
      total_weight += x.weight;
    }
    SyntheticCandidates f;
    const KeyHash hash(key);
    f.caps.assign(5, 0);
    for (uint32_t w = 1; w <= 4 && total_weight != 0; ++w) {
      f.caps[w] =
          BoundedLoadRendezvous::Capacity(factor, total, w, total_weight);
    }
    for (const auto& x : b) {
      f.z.push_back(hash.Mixed(x.identity));
      f.weights.push_back(x.weight);
      f.ok.push_back(x.eligible);
      f.loads.push_back(x.load);
    }
    const auto out = RunBounded(f, 16, 0.5);
    near_ties += out.near_ties;
    ASSERT_EQ(out.found, expected.ok());
    if (!out.found) continue;
    ASSERT_EQ(out.affinity.index, expected.value().affinity) << list;
    ASSERT_EQ(out.selection.index, expected.value().selection) << list;
    ASSERT_EQ(out.selection_capacity, expected.value().selected_capacity)
        << list;
  }
  EXPECT_GT(near_ties, 5000u);
}

// Real keys and identities: Pick and Decide, hashing the identities and
// through an IdentityTable, against contract::Order and contract::Decide.
// Each candidate list serves several keys.
void CheckRandomLists(uint64_t seed, int lists, size_t max_n, int keys_each) {
  std::mt19937_64 rng(seed);
  DecisionScratch scratch;
  for (int list = 0; list < lists; ++list) {
    const size_t n = 1 + rng() % max_n;
    const uint32_t distinct = 1 + static_cast<uint32_t>(rng() % 11);
    std::vector<contract::LoadedCandidate> b;
    for (size_t i = 0; i < n; ++i) {
      b.push_back({Identity(rng, n + n / 4 + 1),  // some duplicates
                   1 + static_cast<uint32_t>(rng() % distinct) * 3, rng() % 6,
                   rng() % 9 != 0});
    }
    const std::vector<Candidate> view = View(b);
    const IdentityTable table(view);
    for (int k = 0; k < keys_each; ++k) {
      std::string key(rng() % 40, '\0');
      for (char& c : key) c = static_cast<char>(rng());
      const auto order = contract::Order(key, b);
      const auto pick = WeightedRendezvous::Pick(key, view);
      const auto table_pick = WeightedRendezvous::Pick(key, view, table);
      ASSERT_EQ(pick.ok(), !order.empty());
      ASSERT_EQ(table_pick.ok(), !order.empty());
      if (!pick.ok()) continue;
      ASSERT_EQ(pick.value(), order.front().index) << list << "/" << k;
      ASSERT_EQ(table_pick.value(), order.front().index) << list << "/" << k;

      const uint32_t factor = 100 + static_cast<uint32_t>(rng() % 150);
      const auto expected = contract::Decide(key, b, factor);
      ASSERT_TRUE(expected.ok());
      const auto policy = *BoundedLoadRendezvous::Create(factor);
      const auto load = [&](size_t i) { return b[i].load; };
      for (const auto& got : {policy.Decide(key, view, load, scratch),
                              policy.Decide(key, view, table, load, scratch)}) {
        ASSERT_TRUE(got.ok());
        ASSERT_EQ(got.value().affinity, expected.value().affinity);
        ASSERT_EQ(got.value().selection, expected.value().selection);
        ASSERT_EQ(got.value().selected_capacity,
                  expected.value().selected_capacity);
        ASSERT_EQ(got.value().selected_load,
                  b[expected.value().selection].load);
        ASSERT_EQ(got.value().spilled,
                  expected.value().affinity != expected.value().selection);
      }
    }
  }
}

// The whole-decision comparisons run once per compiled target of the hashing
// kernels that the CPU can run.
class ByKernel : public test_util::KernelFixture {};
INSTANTIATE_TEST_SUITE_P(Search, ByKernel, test_util::Kernels(),
                         test_util::KernelName);

TEST_P(ByKernel, SmallListsMatchTheContract) {
  CheckRandomLists(21, 60000, 12, 16);
}
TEST_P(ByKernel, MediumListsMatchTheContract) {
  CheckRandomLists(22, 3000, 100, 8);
}
TEST_P(ByKernel, LargeListsMatchTheContract) {
  CheckRandomLists(23, 60, 1000, 4);
}

// Equal weights everywhere: the pick is plain argmax z.
TEST_P(ByKernel, EqualWeightsAreArgmaxZOnManyKeys) {
  std::vector<std::string> ids;
  std::vector<Candidate> c;
  ids.reserve(37);
  c.reserve(37);
  for (int i = 0; i < 37; ++i) ids.push_back("10.1.0." + std::to_string(i));
  for (const auto& id : ids) c.push_back({id, 5});
  for (int k = 0; k < 200000; ++k) {
    const std::string key = "key-" + std::to_string(k);
    size_t best = 0;
    for (size_t i = 1; i < ids.size(); ++i) {
      if (contract::HashOf(key, ids[i]) > contract::HashOf(key, ids[best])) {
        best = i;
      }
    }
    ASSERT_EQ(WeightedRendezvous::Pick(key, c).value(), best);
  }
}

}  // namespace
}  // namespace poise
