// The hashing kernels: z = KeyHash::Mixed(identity) for a run of candidates
// (from their identities, or through an IdentityTable row), the largest-z
// search of the short paths, the survivor levels of the bounded walk and the
// table build's per-identity offsets. A portable scalar kernel (four
// interleaved FNV-1a chains) is the reference and serves short runs; the
// vector kernels are one Highway source (hash_kernels.cc) dispatched at run
// time. All are integer arithmetic only, so they agree bit for bit with
// KeyHash::Mixed (hash_kernel_test checks every target the CPU runs against
// it). Private to src/core and its tests.
#ifndef POISE_SRC_CORE_CANDIDATE_HASH_H_
#define POISE_SRC_CORE_CANDIDATE_HASH_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "largest_z.h"
#include "poise/hash.h"
#include "poise/identity_table.h"
#include "poise/types.h"

namespace poise::internal {

// z[i] = KeyHash::Mixed(c[i].identity) for every eligible c[i], i < n, where
// `key_state` is KeyHash::state(). Ineligible slots get an unspecified value
// (they are never read) and their identity bytes are never read.
//
// Four independent FNV chains at a time: each chain is a sequence of
// dependent multiplies, so interleaving four hides the multiply latency. Over
// the bytes all four identities have, the chains run in lockstep; the few
// bytes past the shortest one are applied with selects rather than per-lane
// loops, whose varying trip counts mispredict. Same arithmetic as
// KeyHash::Mixed, byte for byte.
// One round of kL chains over c[i..i + kL) (lanes past n hash nothing and
// are not stored).
template <size_t kL>
inline void HashRound(uint64_t key_state, const Candidate* c, size_t n,
                      size_t i, uint64_t* z) {
  // Ineligible candidates hash an empty identity (their z is never used);
  // empty views point at a real byte so the select loop may read [0].
  static constexpr char kPad[1] = {0};
  std::string_view v[kL];
  uint64_t h[kL];
  size_t common = SIZE_MAX, longest = 0;
  for (size_t lane = 0; lane < kL; ++lane) {
    v[lane] = std::string_view(kPad, size_t{0});
    if (i + lane < n) {
      const Candidate& x = c[i + lane];
      if (x.IsEligible() && !x.identity.empty()) v[lane] = x.identity;
    }
    h[lane] = key_state;
    common = std::min(common, v[lane].size());
    longest = std::max(longest, v[lane].size());
  }
  size_t j = 0;
  for (; j < common; ++j) {
    for (size_t lane = 0; lane < kL; ++lane) {
      h[lane] = Fnv1aUpdateByte(h[lane], static_cast<uint8_t>(v[lane][j]));
    }
  }
  // A lane whose identity has ended keeps its state.
  for (; j < longest; ++j) {
    for (size_t lane = 0; lane < kL; ++lane) {
      const std::string_view x = v[lane];
      const uint64_t next = Fnv1aUpdateByte(
          h[lane], static_cast<uint8_t>(x[j < x.size() ? j : 0]));
      h[lane] = j < x.size() ? next : h[lane];
    }
  }
  for (size_t lane = 0; lane < kL && i + lane < n; ++lane) {
    z[i + lane] = Mix64(Fnv1aUpdateByte(h[lane], 0xFF));
  }
}

inline void HashCandidatesScalar(uint64_t key_state, const Candidate* c,
                                 size_t n, uint64_t* z) {
  size_t i = 0;
  // Rounds of five where that saves a round of four (n = 5, 9, 10, 13..15).
  const size_t fours = (n + 3) / 4;
  const size_t fives = (n + 4) / 5;
  if (n <= 15 && fives < fours) {
    for (; i < n; i += 5) HashRound<5>(key_state, c, n, i, z);
    return;
  }
  for (; i < n; i += 4) HashRound<4>(key_state, c, n, i, z);
}

// The vector kernels (src/core/hash_kernels.cc): one Highway source compiled
// for every target of the build (x86-64: SSE4, AVX2, AVX-512, EMU128;
// AArch64: NEON; the SVE targets are not compiled, hash_kernels.cc says why),
// the best one the CPU runs chosen at the first call.

// HashCandidatesScalar's z: by HashCandidatesInBlocks where the target has a
// 64-bit lane product (AVX-512), else by the scalar chains (the faster
// there).
void HashCandidatesVector(uint64_t key_state, const Candidate* c, size_t n,
                          uint64_t* z);
// The same, blocks of four vectors of FNV-1a chains on every target (tests
// check it wherever it is not the one HashCandidatesVector runs).
void HashCandidatesInBlocks(uint64_t key_state, const Candidate* c, size_t n,
                            uint64_t* z);

// Below this many candidates the scalar kernel is as fast: a vector block
// costs about one 64-bit product's latency per identity byte whatever its
// width, while the scalar chains are throughput-bound (docs/performance.md).
inline constexpr size_t kMinVectorRun = 16;

// z for c[0..n) (inline: short runs skip the dispatch).
inline void HashCandidates(uint64_t key_state, const Candidate* c, size_t n,
                           uint64_t* z) {
  if (n >= kMinVectorRun) {
    HashCandidatesVector(key_state, c, n, z);
    return;
  }
  HashCandidatesScalar(key_state, c, n, z);
}

// The scalar reference of the leaders' kernels below (and what the group
// kernel runs on rows shorter than two vectors where the target has no
// 64-bit lane product, as on AVX2: there the scalar loop is the faster): z[i] =
// row.Mixed(i) for every i < n when `z` is given, and out[g] for g < groups
// the LargestZ of the candidates in group g, offered in index order. One
// group: candidate i is in it when bit i % 8 of bits[i / 8] is set (bits
// nullptr: every i); several: group g's bits are at bits + g * ((n + 7) /
// 8).
inline void TableLeadsScalar(const IdentityTable::KeyRow& row, size_t n,
                             const uint8_t* bits, size_t groups, uint64_t* z,
                             LargestZ* out) {
  const size_t bytes = (n + 7) / 8;
  for (size_t g = 0; g < groups; ++g) out[g] = LargestZ::Empty();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t zi = row.Mixed(i);
    if (z != nullptr) z[i] = zi;
    for (size_t g = 0; g < groups; ++g) {
      const bool in =
          bits == nullptr || ((bits[g * bytes + i / 8] >> (i % 8)) & 1) != 0;
      out[g].Offer(zi, i, in);
    }
  }
}

// Appends to out[listed..] base + k for every bit k set in `bits`; returns
// the new count.
inline size_t AppendSetBits(uint64_t bits, size_t base, size_t* out,
                            size_t listed) {
  for (; bits != 0; bits &= bits - 1) {
    out[listed++] = base + static_cast<size_t>(__builtin_ctzll(bits));
  }
  return listed;
}

// Where a hashing pass marks the candidates whose z reaches a threshold
// (bits null: nowhere).
struct SurvivorBits {
  uint64_t threshold = 0;
  uint64_t* bits = nullptr;
};

// The one-weight leader from an IdentityTable row: the internal::LargestZ
// that offering row.Mixed(i) for every eligible i < n, in index order,
// builds. Candidate i is eligible when bit i % 8 of eligible_bits[i / 8] is
// set (nullptr: all n are), and `count` of them are. When `z` is given,
// z[i] = row.Mixed(i) for every i < n, the ineligible too, and nothing past
// n is written.
// And where `survivors.bits` is given ((n + 63) / 64 words): bit i set for
// every i < n whose z >= survivors.threshold, the ineligible too (the first
// survivor level of a walk, key_order_walk.h, from the same pass).
LargestZ TableLargestZ(const IdentityTable::KeyRow& row, size_t n,
                       const uint8_t* eligible_bits, size_t count, uint64_t* z,
                       const SurvivorBits& survivors = {});

// The same for 2..kMaxGroups groups (weights): out[g] the LargestZ of the
// candidates whose bit is set in group g's array, bit i % 8 of byte
// group_bits[g * bytes + i / 8], bytes = (n + 7) / 8; counts left 0 (the
// caller knows them). An ineligible candidate is in no group.
void TableLargestZByGroup(const IdentityTable::KeyRow& row, size_t n,
                          const uint8_t* group_bits, size_t groups, uint64_t* z,
                          LargestZ* out);

// z[k] = row.Mixed(begin + k) for k < end - begin.
void TableMixedRange(const IdentityTable::KeyRow& row, size_t begin, size_t end,
                     uint64_t* z);

// Appends to `out` every i < n with z[i] - threshold < span (unsigned,
// wrapping: z in [threshold, threshold + span)), ascending; returns how
// many. Writes only those entries.
size_t ListZInRange(const uint64_t* z, size_t n, uint64_t threshold,
                    uint64_t span, size_t* out);

// offset[l] = D(l) for l < 256 (identity_table.h): the FNV-1a walk from
// state l over `identity` and the terminator 0xFF, less l * power, where
// power = p^(|identity| + 1).
void HashIdentityOffsets(std::string_view identity, uint64_t power,
                         uint64_t* offset);

// Test and benchmark hooks, in hwy's target bits (HWY_AVX2, ...; names by
// HashTargetName):
// every target compiled into the kernels, best first;
std::vector<int64_t> CompiledHashTargets();
// the one the kernels run now;
int64_t ActiveHashTarget();
// runs the kernels on `target` from now on (0: the best the CPU has again).
// Not thread-safe: call it with no pick running. Returns false, and leaves
// the kernels on the best target, when `target` was not compiled or the CPU
// cannot run it.
bool ForceHashTarget(int64_t target);
const char* HashTargetName(int64_t target);

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_CANDIDATE_HASH_H_
