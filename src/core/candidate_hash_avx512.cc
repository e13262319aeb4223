// The AVX-512 candidate-hashing kernel: eight FNV-1a chains per 512-bit
// register (vpmullq), G registers interleaved to hide the multiply latency.
// Only this file is compiled for AVX-512 (per function, by target attribute),
// and candidate_hash.cc calls it only when the CPU supports it.
//
// Per lane: h starts at the key state; for t = 0, 1, ... while t < length,
// h = (h ^ byte[t]) * prime; then h = (h ^ 0xFF) * prime and z = Mix64(h):
// exactly KeyHash::Mixed. Lanes of different lengths run in lockstep up to the
// longest identity in the block; a lane whose identity has ended is masked out
// of the multiply (its state stops changing), and its bytes past the end are
// never read (masked loads suppress them).
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "candidate_hash.h"
#include "poise/hash.h"

#if POISE_HAVE_AVX512_HASH
#include <immintrin.h>
// GCC 12's intrinsics start some results from _mm512_undefined_epi32(), a
// self-initialised variable that -Wmaybe-uninitialized
// or -Wuninitialized reports once inlined (a known false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#endif

namespace poise::internal {

#if POISE_HAVE_AVX512_HASH

#define POISE_AVX512 \
  __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))

namespace {

constexpr size_t kLanes = 8;
// What lanes with nothing to hash read (their z is never stored or used).
constexpr char kPad[64] = {};

// Bytes [off, off + 8) of p[0..len), zero past the end (never read), in the
// low 64 bits.
POISE_AVX512 inline __m128i LoadChunk(const char* p, size_t len, size_t off) {
  // Branch-free: identity lengths vary from lane to lane.
  const size_t start = std::min(off, len);
  const auto rem = static_cast<unsigned>(std::min<size_t>(len - start, 8));
  return _mm_maskz_loadu_epi8(static_cast<__mmask16>(0xFFu >> (8 - rem)),
                              p + start);
}

// The low 64 bits of q[0..8) as one vector (lane k = q[k]).
POISE_AVX512 inline __m512i Combine(const __m128i* q) {
  const __m128i q01 = _mm_unpacklo_epi64(q[0], q[1]);
  const __m128i q23 = _mm_unpacklo_epi64(q[2], q[3]);
  const __m128i q45 = _mm_unpacklo_epi64(q[4], q[5]);
  const __m128i q67 = _mm_unpacklo_epi64(q[6], q[7]);
  const __m256i lo =
      _mm256_inserti128_si256(_mm256_castsi128_si256(q01), q23, 1);
  const __m256i hi =
      _mm256_inserti128_si256(_mm256_castsi128_si256(q45), q67, 1);
  return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

POISE_AVX512 inline __m512i Mix64x8(__m512i z) {
  z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 30));
  z = _mm512_mullo_epi64(
      z, _mm512_set1_epi64(static_cast<int64_t>(0xbf58476d1ce4e5b9ULL)));
  z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 27));
  z = _mm512_mullo_epi64(
      z, _mm512_set1_epi64(static_cast<int64_t>(0x94d049bb133111ebULL)));
  return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

// z for c[0..count), 8 * (G - 1) < count <= 8 * G: G registers of eight
// lanes each, interleaved (a vpmullq's latency is several times its
// throughput).
// A kernel, exempt from the size and complexity checks: one function so
// that the compiler keeps every lane's state in registers.
template <size_t G>
// NOLINTNEXTLINE(readability-function-cognitive-complexity,readability-function-size)
POISE_AVX512 void Block(uint64_t key_state, const Candidate* c, size_t count,
                        uint64_t* z) {
  constexpr size_t kN = G * kLanes;
  const char* ptr[kN];
  alignas(64) uint64_t addr[kN];
  alignas(64) uint64_t len[kN];
  size_t longest = 0;
  size_t shortest = SIZE_MAX;  // over the lanes that are stored and used
  for (size_t j = 0; j < kN; ++j) {
    const bool use = j < count && c[j].IsEligible();
    ptr[j] = use ? c[j].identity.data() : nullptr;
    len[j] = use ? c[j].identity.size() : 0;
    longest = std::max<size_t>(longest, len[j]);
    shortest = use ? std::min<size_t>(shortest, len[j]) : shortest;
  }
  // With every used identity at least 8 bytes long, each lane's chunk at
  // `off` is one 8-byte load inside the identity: at min(off, len - 8),
  // shifted down when it overlaps the previous chunk (a gather). Otherwise
  // each lane's chunk is a masked load. Unused lanes (ineligible, or past
  // `count`) hash padding; their z is never read.
  const bool gather = shortest >= 8 && shortest != SIZE_MAX;
  if (!gather) shortest = 0;
  const size_t pad_len = gather ? std::min(shortest, sizeof(kPad)) : 0;
  for (size_t j = 0; j < kN; ++j) {
    if (ptr[j] != nullptr) continue;
    ptr[j] = kPad;
    len[j] = pad_len;
  }
  for (size_t j = 0; j < kN; ++j) addr[j] = reinterpret_cast<uintptr_t>(ptr[j]);
  const __m512i prime = _mm512_set1_epi64(static_cast<int64_t>(kFnvPrime));
  __m512i h[G];
  __m512i lens[G];
  for (size_t g = 0; g < G; ++g) {
    h[g] = _mm512_set1_epi64(static_cast<int64_t>(key_state));
    lens[g] = _mm512_load_si512(len + g * kLanes);
  }
  // vpshufb control taking byte 0 of each 64-bit lane to its low byte and
  // zeroing the rest (vpshufb indexes within 128-bit blocks: the odd lanes'
  // byte 0 is index 8); adding b to every byte takes byte b instead (the
  // zeroing bytes, 0x80 + b, keep their top bit).
  constexpr auto kEven = static_cast<int64_t>(0x8080808080808000ULL);
  constexpr auto kOdd = static_cast<int64_t>(0x8080808080808008ULL);
  const __m512i select0 =
      _mm512_set_epi64(kOdd, kEven, kOdd, kEven, kOdd, kEven, kOdd, kEven);
  for (size_t off = 0; off < longest; off += 8) {
    __m512i v[G];
    if (gather) {
      const __m512i at = _mm512_set1_epi64(static_cast<int64_t>(off));
      for (size_t g = 0; g < G; ++g) {
        const __m512i start = _mm512_min_epu64(
            at, _mm512_sub_epi64(lens[g], _mm512_set1_epi64(8)));
        const __m512i chunk = _mm512_i64gather_epi64(
            _mm512_add_epi64(_mm512_load_si512(addr + g * kLanes), start),
            nullptr, 1);
        v[g] = _mm512_srlv_epi64(
            chunk, _mm512_slli_epi64(_mm512_sub_epi64(at, start), 3));
      }
    } else {
      for (size_t g = 0; g < G; ++g) {
        __m128i q[kLanes];
        for (size_t k = 0; k < kLanes; ++k) {
          q[k] = LoadChunk(ptr[g * kLanes + k], len[g * kLanes + k], off);
        }
        v[g] = Combine(q);
      }
    }
    const size_t steps = std::min<size_t>(8, longest - off);
    for (size_t b = 0; b < steps; ++b) {
      const __m512i select =
          _mm512_add_epi8(select0, _mm512_set1_epi8(static_cast<char>(b)));
      if (off + b < shortest) {  // every lane still has bytes
        for (size_t g = 0; g < G; ++g) {
          h[g] = _mm512_mullo_epi64(
              _mm512_xor_si512(h[g], _mm512_shuffle_epi8(v[g], select)), prime);
        }
        continue;
      }
      // Lanes whose identity has ended keep their state.
      const __m512i at = _mm512_set1_epi64(static_cast<int64_t>(off + b));
      for (size_t g = 0; g < G; ++g) {
        const __mmask8 live = _mm512_cmpgt_epu64_mask(lens[g], at);
        const __m512i x =
            _mm512_xor_si512(h[g], _mm512_shuffle_epi8(v[g], select));
        h[g] = _mm512_mask_mullo_epi64(h[g], live, x, prime);
      }
    }
  }
  const __m512i ff = _mm512_set1_epi64(0xFF);
  for (size_t g = 0; g < G; ++g) {
    const __m512i out =
        Mix64x8(_mm512_mullo_epi64(_mm512_xor_si512(h[g], ff), prime));
    const size_t here = std::min(kLanes, count - std::min(count, g * kLanes));
    const auto store = static_cast<__mmask8>((1u << here) - 1u);
    _mm512_mask_storeu_epi64(z + g * kLanes, store, out);
  }
}

}  // namespace

POISE_AVX512 void HashCandidatesAvx512(uint64_t key_state, const Candidate* c,
                                       size_t n, uint64_t* z) {
  constexpr size_t kBlock = 8 * kLanes;
  size_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    Block<8>(key_state, c + i, kBlock, z + i);
  }
  const size_t rest = n - i;
  c += i;
  z += i;
  if (rest < kMinVectorRun) {
    HashCandidatesScalar(key_state, c, rest, z);
    return;
  }
  switch ((rest + kLanes - 1) / kLanes) {
    case 2:
      return Block<2>(key_state, c, rest, z);
    case 3:
      return Block<3>(key_state, c, rest, z);
    case 4:
      return Block<4>(key_state, c, rest, z);
    case 5:
      return Block<5>(key_state, c, rest, z);
    case 6:
      return Block<6>(key_state, c, rest, z);
    case 7:
      return Block<7>(key_state, c, rest, z);
    default:
      return Block<8>(key_state, c, rest, z);
  }
}

// Each lane keeps the LargestZ of the candidates it sees (i = lane mod 8):
// m1 its largest z, at index i1 (the first, since a lane sees its indices
// in order and only a strictly larger z replaces the leader), and m2 the
// largest of its other z. Then the lanes' leaders are merged: the overall
// leader is the lowest index holding the largest m1, and its runner-up the
// largest z of everyone else, the other lanes' m1 included.
POISE_AVX512 internal::LargestZ TableLargestZAvx512(
    const IdentityTable::KeyRow& row, size_t n, const uint8_t* eligible_bits,
    size_t count, uint64_t* z) {
  const __m512i key = _mm512_set1_epi64(static_cast<int64_t>(row.key_state()));
  const uint64_t* const power = row.powers();
  const uint64_t* const offset = row.offsets();
  const __m512i none = _mm512_set1_epi64(-1);  // internal::kNone
  __m512i m1 = _mm512_setzero_si512();
  __m512i m2 = _mm512_setzero_si512();
  __m512i i1 = none;
  __m512i index = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i step = _mm512_set1_epi64(static_cast<int64_t>(kLanes));
  // Identities of one length: one product for all, and the powers unread.
  const uint64_t common = row.common_power();
  const __m512i product =
      _mm512_set1_epi64(static_cast<int64_t>(row.key_state() * common));
  for (size_t i = 0; i < n; i += kLanes) {
    const size_t left = n - i;
    const auto here = static_cast<__mmask8>(
        left >= kLanes ? 0xFFu : (1u << left) - 1u);  // past n: nothing read
    const auto take = static_cast<__mmask8>(
        eligible_bits != nullptr ? eligible_bits[i / kLanes] & here : here);
    const __m512i scaled =
        common != 0 ? product
                    : _mm512_mullo_epi64(
                          key, _mm512_maskz_loadu_epi64(here, power + i));
    const __m512i x = Mix64x8(
        _mm512_add_epi64(scaled, _mm512_maskz_loadu_epi64(here, offset + i)));
    if (z != nullptr) _mm512_mask_storeu_epi64(z + i, here, x);
    const __m512i offered = _mm512_maskz_mov_epi64(take, x);  // refused: 0
    const __mmask8 leads = _mm512_cmpgt_epu64_mask(offered, m1);
    m2 = _mm512_max_epu64(m2, _mm512_min_epu64(offered, m1));
    m1 = _mm512_max_epu64(m1, offered);
    i1 = _mm512_mask_mov_epi64(i1, leads, index);
    index = _mm512_add_epi64(index, step);
  }
  internal::LargestZ lead = internal::LargestZ::Empty();
  lead.count = count;
  const uint64_t top = _mm512_reduce_max_epu64(m1);
  if (top == 0) return lead;  // no z > 0 was offered: nobody leads
  const __mmask8 at_top =
      _mm512_cmpeq_epu64_mask(m1, _mm512_set1_epi64(static_cast<int64_t>(top)));
  const uint64_t first = _mm512_mask_reduce_min_epu64(at_top, i1);
  const __mmask8 chosen = _mm512_mask_cmpeq_epu64_mask(
      at_top, i1, _mm512_set1_epi64(static_cast<int64_t>(first)));
  lead.z = top;
  lead.index = static_cast<size_t>(first);
  lead.runner_up = std::max(
      _mm512_reduce_max_epu64(m2),
      _mm512_mask_reduce_max_epu64(static_cast<__mmask8>(~chosen), m1));
  return lead;
}

// RouteWithTotal's survivor levels (prepared_candidates.cc): a compare per
// eight z, the kept indices packed in a register (a compressing store to
// memory is microcoded on some CPUs) and stored under a mask, so nothing
// past them is written.
POISE_AVX512 size_t ListZInRangeAvx512(const uint64_t* z, size_t n,
                                       uint64_t threshold, uint64_t span,
                                       size_t* out) {
  const __m512i low = _mm512_set1_epi64(static_cast<int64_t>(threshold));
  const __m512i width = _mm512_set1_epi64(static_cast<int64_t>(span));
  const __m512i step = _mm512_set1_epi64(static_cast<int64_t>(kLanes));
  __m512i index = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  size_t listed = 0;
  for (size_t i = 0; i < n; i += kLanes) {
    const size_t left = n - i;
    const auto valid = static_cast<__mmask8>(
        left >= kLanes ? 0xFFu : (1u << static_cast<unsigned>(left)) - 1);
    const __m512i v = _mm512_maskz_loadu_epi64(valid, z + i);
    const __mmask8 kept =
        _mm512_mask_cmplt_epu64_mask(valid, _mm512_sub_epi64(v, low), width);
    const __m512i packed = _mm512_maskz_compress_epi64(kept, index);
    const auto count = static_cast<unsigned>(__builtin_popcount(kept));
    _mm512_mask_storeu_epi64(out + listed,
                             static_cast<__mmask8>((1u << count) - 1), packed);
    listed += count;
    index = _mm512_add_epi64(index, step);
  }
  return listed;
}

#else  // !POISE_HAVE_AVX512_HASH

internal::LargestZ TableLargestZAvx512(const IdentityTable::KeyRow& row,
                                       size_t n, const uint8_t* eligible_bits,
                                       size_t count, uint64_t* z) {
  internal::LargestZ lead = internal::LargestZ::Empty();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t x = row.Mixed(i);
    if (z != nullptr) z[i] = x;
    const bool take = eligible_bits == nullptr ||
                      ((eligible_bits[i / 8] >> (i % 8)) & 1) != 0;
    lead.Offer(x, i, take);
  }
  lead.count = count;
  return lead;
}

void HashCandidatesAvx512(uint64_t key_state, const Candidate* c, size_t n,
                          uint64_t* z) {
  HashCandidatesScalar(key_state, c, n, z);
}

size_t ListZInRangeAvx512(const uint64_t* z, size_t n, uint64_t threshold,
                          uint64_t span, size_t* out) {
  size_t listed = 0;
  for (size_t i = 0; i < n; ++i) {
    if (z[i] - threshold < span) out[listed++] = i;
  }
  return listed;
}

#endif

}  // namespace poise::internal
