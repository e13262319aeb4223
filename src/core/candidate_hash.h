// Hashing a run of candidates for one key: z = KeyHash::Mixed(identity) for
// every candidate, by a portable scalar kernel (four interleaved FNV-1a
// chains) or, where the CPU has AVX-512 F/DQ/BW/VL, by a vector kernel that
// hashes eight candidates per 512-bit register. Both are integer arithmetic
// only, so they agree bit for bit with KeyHash::Mixed (hash_kernel_test checks
// both against it). Private to src/core and its tests.
#ifndef POISE_SRC_CORE_CANDIDATE_HASH_H_
#define POISE_SRC_CORE_CANDIDATE_HASH_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "largest_z.h"
#include "poise/hash.h"
#include "poise/identity_table.h"
#include "poise/types.h"

// The vector kernel needs x86-64 and GCC or Clang (target attributes).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define POISE_HAVE_AVX512_HASH 1
#else
#define POISE_HAVE_AVX512_HASH 0
#endif

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

// The same with AVX-512; call only when Avx512HashSupported().
void HashCandidatesAvx512(uint64_t key_state, const Candidate* c, size_t n,
                          uint64_t* z);

// The CPU (and the compiler) can run HashCandidatesAvx512.
bool Avx512HashSupported();

enum class HashKernel : uint8_t { kScalar, kAvx512 };

// The kernel HashCandidates uses: chosen once, at first use, from the CPU's
// features (AVX-512 when supported).
HashKernel ActiveHashKernel();

// Forces a kernel (for tests and benchmarks). Returns false, changing
// nothing, when `kernel` is not supported on this CPU.
bool SelectHashKernel(HashKernel kernel);

// Below this many candidates the scalar kernel is faster: a vector block
// costs about one vpmullq latency per identity byte whatever its width, while
// the scalar chains are throughput-bound (docs/performance.md).
inline constexpr size_t kMinVectorRun = 16;

// z for c[0..n) with the active kernel (inline: short runs skip the dispatch).
inline void HashCandidates(uint64_t key_state, const Candidate* c, size_t n,
                           uint64_t* z) {
  if (n >= kMinVectorRun && ActiveHashKernel() == HashKernel::kAvx512) {
    HashCandidatesAvx512(key_state, c, n, z);
    return;
  }
  HashCandidatesScalar(key_state, c, n, z);
}

// The one-weight leader from an IdentityTable row, eight candidates per
// 512-bit register: the internal::LargestZ that offering row.Mixed(i) for every
// eligible i < n, in index order, builds (PreparedCandidates' scalar loop).
// Candidate i is eligible when bit i % 8 of eligible_bits[i / 8] is set
// (nullptr: all n are), and `count` of them are. When `z` is given, z[i] =
// row.Mixed(i) for every i < n, the ineligible too. Call only when
// Avx512HashSupported().
internal::LargestZ TableLargestZAvx512(const IdentityTable::KeyRow& row,
                                       size_t n, const uint8_t* eligible_bits,
                                       size_t count, uint64_t* z);

// Appends to `out` every i < n with z[i] - threshold < span (unsigned,
// wrapping: z in [threshold, threshold + span)), ascending, eight z per
// register; returns how many. Writes only those entries. Call only when
// Avx512HashSupported().
size_t ListZInRangeAvx512(const uint64_t* z, size_t n, uint64_t threshold,
                          uint64_t span, size_t* out);

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_CANDIDATE_HASH_H_
