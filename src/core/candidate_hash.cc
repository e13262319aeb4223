#include "candidate_hash.h"

#include <algorithm>
#include <atomic>
#include <string_view>

#include "poise/hash.h"

namespace poise::internal {

// Four independent FNV chains at a time: each chain is a sequence of
// dependent multiplies, so interleaving four hides the multiply latency. Over
// the bytes all four identities have, the chains run in lockstep; the few
// bytes past the shortest one are applied with selects rather than per-lane
// loops, whose varying trip counts mispredict. Same arithmetic as
// KeyHash::Mixed, byte for byte.
void HashCandidatesScalar(uint64_t key_state, const Candidate* c, size_t n,
                          uint64_t* z) {
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

bool Avx512HashSupported() {
#if POISE_HAVE_AVX512_HASH
  // libgcc / compiler-rt also check that the OS saves the ZMM state.
  static const bool supported =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
  return supported;
#else
  return false;
#endif
}

namespace {

std::atomic<HashKernel>& KernelSlot() {
  static std::atomic<HashKernel> slot{
      Avx512HashSupported() ? HashKernel::kAvx512 : HashKernel::kScalar};
  return slot;
}

}  // namespace

HashKernel ActiveHashKernel() {
  return KernelSlot().load(std::memory_order_relaxed);
}

bool SelectHashKernel(HashKernel kernel) {
  if (kernel == HashKernel::kAvx512 && !Avx512HashSupported()) return false;
  KernelSlot().store(kernel, std::memory_order_relaxed);
  return true;
}

void HashCandidates(uint64_t key_state, const Candidate* c, size_t n,
                    uint64_t* z) {
  if (ActiveHashKernel() == HashKernel::kAvx512) {
    HashCandidatesAvx512(key_state, c, n, z);
  } else {
    HashCandidatesScalar(key_state, c, n, z);
  }
}

}  // namespace poise::internal
