// Hashing a run of candidates for one key: z = KeyHash::Mixed(identity) for
// every candidate, by a portable scalar kernel (four interleaved FNV-1a
// chains) or, where the CPU has AVX-512 F/DQ/BW/VL, by a vector kernel that
// hashes eight candidates per 512-bit register. Both are integer arithmetic
// only, so they agree bit for bit with KeyHash::Mixed (fast_path_test checks
// both against it). Private to src/core and its tests.
#ifndef POISE_SRC_CORE_CANDIDATE_HASH_H_
#define POISE_SRC_CORE_CANDIDATE_HASH_H_

#include <cstddef>
#include <cstdint>

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
void HashCandidatesScalar(uint64_t key_state, const Candidate* c, size_t n,
                          uint64_t* z);

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

// z for c[0..n) with the active kernel.
void HashCandidates(uint64_t key_state, const Candidate* c, size_t n,
                    uint64_t* z);

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_CANDIDATE_HASH_H_
