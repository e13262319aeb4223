// Hashing a run of candidates for one key: z = KeyHash::Mixed(identity) for
// every candidate, by a portable scalar kernel (four interleaved FNV-1a
// chains) or, where the CPU has AVX-512 F/DQ/BW/VL, by a vector kernel that
// hashes eight candidates per 512-bit register. Both are integer arithmetic
// only, so they agree bit for bit with KeyHash::Mixed (fast_path_test checks
// both against it). Private to src/core and its tests.
#ifndef POISE_SRC_CORE_CANDIDATE_HASH_H_
#define POISE_SRC_CORE_CANDIDATE_HASH_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "poise/hash.h"
#include "poise/rendezvous.h"

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
inline void HashCandidatesScalar(uint64_t key_state, const Candidate* c,
                                 size_t n, uint64_t* z) {
  // Ineligible candidates hash an empty identity (their z is never used);
  // empty views point at a real byte so the select loop may read [0].
  static constexpr char kPad[1] = {0};
  const std::string_view empty(kPad, size_t{0});
  // Lanes past `n` (a last, partial group of four) hash nothing and are
  // not stored: still faster than finishing with one serial chain each.
  auto id = [&](size_t i) {
    if (i >= n) return empty;
    const Candidate& x = c[i];
    return x.IsEligible() && !x.identity.empty() ? x.identity : empty;
  };
  for (size_t i = 0; i < n; i += 4) {
    const std::string_view a = id(i), b = id(i + 1), cc = id(i + 2),
                           d = id(i + 3);
    uint64_t ha = key_state, hb = ha, hc = ha, hd = ha;
    const size_t common =
        std::min(std::min(a.size(), b.size()), std::min(cc.size(), d.size()));
    const size_t longest =
        std::max(std::max(a.size(), b.size()), std::max(cc.size(), d.size()));
    size_t j = 0;
    for (; j < common; ++j) {
      ha = Fnv1aUpdateByte(ha, static_cast<uint8_t>(a[j]));
      hb = Fnv1aUpdateByte(hb, static_cast<uint8_t>(b[j]));
      hc = Fnv1aUpdateByte(hc, static_cast<uint8_t>(cc[j]));
      hd = Fnv1aUpdateByte(hd, static_cast<uint8_t>(d[j]));
    }
    // A lane whose identity has ended keeps its state.
    auto step = [](uint64_t h, std::string_view v, size_t at) {
      const uint64_t next =
          Fnv1aUpdateByte(h, static_cast<uint8_t>(v[at < v.size() ? at : 0]));
      return at < v.size() ? next : h;
    };
    for (; j < longest; ++j) {
      ha = step(ha, a, j);
      hb = step(hb, b, j);
      hc = step(hc, cc, j);
      hd = step(hd, d, j);
    }
    const uint64_t out[4] = {ha, hb, hc, hd};
    for (size_t lane = 0; lane < 4 && i + lane < n; ++lane) {
      z[i + lane] = Mix64(Fnv1aUpdateByte(out[lane], 0xFF));
    }
  }
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
// the scalar chains are throughput-bound (docs/bench-core.md).
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

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_CANDIDATE_HASH_H_
