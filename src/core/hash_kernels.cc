// The vector kernels of candidate_hash.h, written once with Highway and
// compiled for every target of this build (x86-64: SSE4, AVX2, AVX-512 and
// the portable one; AArch64: NEON), with the best one the CPU runs chosen
// at the first call (hwy's dynamic dispatch). foreach_target.h
// includes this file again for each target; everything between the
// HWY_BEFORE_NAMESPACE / HWY_AFTER_NAMESPACE pair is compiled per target.
//
// All integer arithmetic, so every target gives the contract's z bit for bit
// (test/core/hash_kernel_test.cc runs each one the CPU can run).
//  - 64-bit lane products: native on AVX-512 (vpmullq) and the
//    portable targets (EMU128, or SCALAR where GCC < 12.3 breaks EMU128);
//    elsewhere three 32x32->64 products (MulEven) for a constant factor, two
//    for the FNV prime (2^40 + 0x1b3: its high half is a shift).
//  - The largest-z search compares in the signed domain (z ^ 2^63), where
//    every target has a compare: each lane keeps its largest z, that z's
//    first index and its runner-up, and the lanes are merged at the end.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <utility>

#include "candidate_hash.h"
#include "hash_and_group.h"
#include "identity_table_access.h"
#include "largest_z.h"
#include "poise/hash.h"
#include "poise/identity_table.h"
#include "poise/types.h"

// Not compiled: SSSE3 (SSE4 supersedes it on every x86-64 CPU that has
// it: each target costs a copy of the kernels), and the SVE targets: in
// Highway 1.0.3 an SVE vector is a sizeless type, which C++ allows neither
// in arrays nor as a class member, and these kernels keep their per-lane
// state (interleaved chains, each group's leaders) in both. AArch64 runs
// the NEON kernels. A build may override the list.
#ifndef HWY_DISABLED_TARGETS
#define HWY_DISABLED_TARGETS \
  (HWY_SSSE3 | HWY_SVE | HWY_SVE2 | HWY_SVE_256 | HWY_SVE2_128)
#endif

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/core/hash_kernels.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

static_assert(sizeof(size_t) == sizeof(uint64_t), "64-bit size_t");
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "identity chunks are read little-endian");

HWY_BEFORE_NAMESPACE();
namespace poise::internal::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using D = hn::ScalableTag<uint64_t>;
using DI = hn::ScalableTag<int64_t>;
using V = hn::Vec<D>;
using VI = hn::Vec<DI>;

// The most lanes a vector of this target holds.
constexpr size_t kMaxLanes = HWY_LANES(uint64_t);

// Targets without a 64-bit lane product.
#undef POISE_EMULATED_MUL64
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 || \
    HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_NEON
#define POISE_EMULATED_MUL64 1
#else
#define POISE_EMULATED_MUL64 0
#endif

// v * c (mod 2^64) in every lane.
template <uint64_t kC>
HWY_INLINE V MulConst(V v) {
  const D d;
#if POISE_EMULATED_MUL64
  // lo*c_lo + ((lo*c_hi + hi*c_lo) << 32): one 32x32->64 product, and the
  // two cross products' low halves from one 32-bit multiply of v by c with
  // its halves swapped ([lo*c_hi, hi*c_lo]), summed into the high half.
  const hn::RepartitionToNarrow<D> d32;
  const auto v32 = hn::BitCast(d32, v);
  const auto c_lo = hn::BitCast(d32, hn::Set(d, kC & 0xFFFFFFFFu));
  const auto swapped = hn::BitCast(d32, hn::Set(d, (kC << 32) | (kC >> 32)));
  const V low = hn::MulEven(v32, c_lo);
  const V cross = hn::BitCast(d, hn::Mul(v32, swapped));
  const V high = hn::And(hn::Add(cross, hn::ShiftLeft<32>(cross)),
                         hn::Set(d, uint64_t{0xFFFFFFFF00000000}));
  return hn::Add(low, high);
#else
  return hn::Mul(v, hn::Set(d, kC));
#endif
}

// v * kFnvPrime (mod 2^64), kFnvPrime = 2^40 + 0x1b3.
HWY_INLINE V MulFnvPrime(V v) {
#if POISE_EMULATED_MUL64
  static_assert(kFnvPrime == (uint64_t{1} << 40) + 0x1b3, "the FNV prime");
  const D d;
  const hn::RepartitionToNarrow<D> d32;
  const auto c = hn::BitCast(d32, hn::Set(d, uint64_t{0x1b3}));
  const V low = hn::MulEven(hn::BitCast(d32, v), c);
  const V high = hn::MulEven(hn::BitCast(d32, hn::ShiftRight<32>(v)), c);
  return hn::Add(hn::Add(low, hn::ShiftLeft<32>(high)), hn::ShiftLeft<40>(v));
#else
  return MulConst<kFnvPrime>(v);
#endif
}

// Mix64 in every lane.
HWY_INLINE V Mix64V(V z) {
  z = hn::Xor(z, hn::ShiftRight<30>(z));
  z = MulConst<0xbf58476d1ce4e5b9ULL>(z);
  z = hn::Xor(z, hn::ShiftRight<27>(z));
  z = MulConst<0x94d049bb133111ebULL>(z);
  return hn::Xor(z, hn::ShiftRight<31>(z));
}

// ---------------------------------------------------------------------------
// Candidates hashed from their identities (no table).

// Bytes [off, off + 8) of p[0..len) in the low-to-high bytes of a word, zero
// past the end; no byte outside p[0..len) is read.
HWY_INLINE uint64_t Chunk(const char* p, size_t len, size_t off) {
  uint64_t w = 0;
  if (off >= len) return 0;
  if (len - off >= 8) {
    std::memcpy(&w, p + off, 8);
    return w;
  }
  if (len >= 8) {  // the identity's last 8 bytes, shifted down
    std::memcpy(&w, p + len - 8, 8);
    return w >> (8 * (off - (len - 8)));
  }
  for (size_t k = 0; off + k < len; ++k) {
    w |= uint64_t{static_cast<uint8_t>(p[off + k])} << (8 * k);
  }
  return w;
}

// z for c[0..count), count <= G vectors of lanes: every lane is one chain
// h = (h ^ byte) * prime over its identity, G vectors interleaved (each
// step's product is several cycles long). Lanes whose identity has ended
// keep their state; lanes past `count` or ineligible hash nothing and are
// not stored.
template <size_t G>
// A kernel, exempt from the size and complexity checks: one function so that
// the compiler keeps every lane's state in registers.
// NOLINTNEXTLINE(readability-function-cognitive-complexity,readability-function-size)
HWY_NOINLINE void HashBlock(uint64_t key_state, const Candidate* c,
                            size_t count, uint64_t* z) {
  const D d;
  const DI di;
  const size_t lanes = hn::Lanes(d);
  const char* ptr[G * kMaxLanes];
  HWY_ALIGN uint64_t len[G * kMaxLanes];
  HWY_ALIGN uint64_t chunk[G * kMaxLanes];
  size_t longest = 0, shortest = SIZE_MAX;
  for (size_t j = 0; j < G * lanes; ++j) {
    const bool use = j < count && c[j].IsEligible();
    ptr[j] = use ? c[j].identity.data() : nullptr;
    len[j] = use ? c[j].identity.size() : 0;
    longest = std::max<size_t>(longest, len[j]);
    shortest = use ? std::min<size_t>(shortest, len[j]) : shortest;
  }
  // Unused lanes end at once: only the used ones decide where every lane
  // still has a byte.
  if (shortest == SIZE_MAX) shortest = 0;
  V h[G];
  VI lens[G];
  for (size_t g = 0; g < G; ++g) {
    h[g] = hn::Set(d, key_state);
    lens[g] = hn::BitCast(di, hn::Load(d, len + g * lanes));
  }
  const V low_byte = hn::Set(d, uint64_t{0xFF});
  for (size_t off = 0; off < longest; off += 8) {
    V v[G];
    for (size_t g = 0; g < G; ++g) {
      for (size_t k = 0; k < lanes; ++k) {
        const size_t j = g * lanes + k;
        chunk[j] = ptr[j] != nullptr ? Chunk(ptr[j], len[j], off) : 0;
      }
      v[g] = hn::Load(d, chunk + g * lanes);
    }
    const size_t steps = std::min<size_t>(8, longest - off);
    for (size_t b = 0; b < steps; ++b) {
      const int shift = static_cast<int>(8 * b);
      if (off + b < shortest) {  // every used lane still has bytes
        for (size_t g = 0; g < G; ++g) {
          const V byte = hn::And(hn::ShiftRightSame(v[g], shift), low_byte);
          h[g] = MulFnvPrime(hn::Xor(h[g], byte));
        }
        continue;
      }
      const VI at = hn::Set(di, static_cast<int64_t>(off + b));
      for (size_t g = 0; g < G; ++g) {
        const auto live = hn::RebindMask(d, hn::Lt(at, lens[g]));
        const V byte = hn::And(hn::ShiftRightSame(v[g], shift), low_byte);
        h[g] = hn::IfThenElse(live, MulFnvPrime(hn::Xor(h[g], byte)), h[g]);
      }
    }
  }
  HWY_ALIGN uint64_t out[G * kMaxLanes];
  for (size_t g = 0; g < G; ++g) {
    hn::Store(Mix64V(MulFnvPrime(hn::Xor(h[g], low_byte))), d, out + g * lanes);
  }
  std::memcpy(z, out, count * sizeof(uint64_t));
}

void HashCandidatesInBlocks(uint64_t key_state, const Candidate* c, size_t n,
                            uint64_t* z) {
  constexpr size_t kG = 4;
  const size_t block = kG * hn::Lanes(D());
  size_t i = 0;
  for (; i + block <= n; i += block) {
    HashBlock<kG>(key_state, c + i, block, z + i);
  }
  const size_t rest = n - i;
  if (rest == 0) return;
  if (rest < kMinVectorRun) {
    HashCandidatesScalar(key_state, c + i, rest, z + i);
    return;
  }
  HashBlock<kG>(key_state, c + i, rest, z + i);
}

// The blocks pay only with a 64-bit lane product and several lanes: a
// chain's step is then one vector multiply for all of them. Elsewhere (AVX2,
// SSE4, NEON, the portable targets) the scalar chains are the faster: each
// emulated product costs several 32-bit ones on the chain's critical path
// (BM_Unbounded, hashing every identity per pick, on each target).
void HashCandidatesVector(uint64_t key_state, const Candidate* c, size_t n,
                          uint64_t* z) {
  constexpr bool kBlocksPay = !POISE_EMULATED_MUL64 &&
                              HWY_TARGET != HWY_EMU128 &&
                              HWY_TARGET != HWY_SCALAR;
  if (kBlocksPay) {
    HashCandidatesInBlocks(key_state, c, n, z);
  } else {
    HashCandidatesScalar(key_state, c, n, z);
  }
}

// ---------------------------------------------------------------------------
// Candidates hashed through an IdentityTable row:
// z = Mix64(key_state * power[i] + offset[i]).

// key_state * power for a run of lanes, the key's halves split once.
struct KeyFactor {
  V key;
  V key_hi;  // key >> 32 (emulated products)
};

HWY_INLINE KeyFactor FactorOf(uint64_t key_state) {
  const D d;
  return {hn::Set(d, key_state), hn::Set(d, key_state >> 32)};
}

HWY_INLINE V TimesKey(const KeyFactor& k, V power) {
#if POISE_EMULATED_MUL64
  const hn::RepartitionToNarrow<D> d32;
  const auto p32 = hn::BitCast(d32, power);
  const auto k32 = hn::BitCast(d32, k.key);
  const V low = hn::MulEven(p32, k32);
  const V cross =
      hn::Add(hn::MulEven(p32, hn::BitCast(d32, k.key_hi)),
              hn::MulEven(hn::BitCast(d32, hn::ShiftRight<32>(power)), k32));
  return hn::Add(low, hn::ShiftLeft<32>(cross));
#else
  return hn::Mul(power, k.key);
#endif
}

// Where a pass over a row reads: the row's arrays, or a padded copy of
// their last few entries (so that no load runs past the table).
struct RowView {
  const uint64_t* power;
  const uint64_t* offset;
  V product;    // key_state * common power, when there is one
  bool common;  // every power is the common one (powers unread)
};

HWY_INLINE V MixedAt(const KeyFactor& k, const RowView& r, size_t i) {
  const D d;
  const V scaled =
      r.common ? r.product : TimesKey(k, hn::LoadU(d, r.power + i));
  return Mix64V(hn::Add(scaled, hn::LoadU(d, r.offset + i)));
}

// Lanes [i, i + lanes) beyond n (< lanes of them) from padded copies.
struct Tail {
  HWY_ALIGN uint64_t power[kMaxLanes];
  HWY_ALIGN uint64_t offset[kMaxLanes];
  HWY_ALIGN uint64_t z[kMaxLanes];
};

HWY_INLINE RowView TailOf(const RowView& r, size_t i, size_t n, Tail& t) {
  const size_t lanes = hn::Lanes(D());
  for (size_t k = 0; k < lanes; ++k) {
    t.power[k] = i + k < n && !r.common ? r.power[i + k] : 0;
    t.offset[k] = i + k < n ? r.offset[i + k] : 0;
  }
  return RowView{t.power, t.offset, r.product, r.common};
}

HWY_INLINE RowView ViewOf(const IdentityTable::KeyRow& row) {
  const uint64_t common = IdentityTableAccess::CommonPower(row);
  return RowView{IdentityTableAccess::Powers(row),
                 IdentityTableAccess::Offsets(row),
                 hn::Set(D(), row.key_state() * common), common != 0};
}

// Bits [i, i + lanes) of the bit array bits[0..bytes) in the low bits of a
// word (bits past the array read as 0; bits past `lanes` are unspecified).
// i is a multiple of lanes, a power of two.
HWY_INLINE uint64_t BitsAt(const uint8_t* bits, size_t bytes, size_t i,
                           size_t lanes) {
  if (lanes <= 8) return uint64_t{bits[i / 8]} >> (i % 8);  // one byte
  uint64_t w = 0;
  const size_t first = i / 8;
  const size_t last = std::min(bytes, (i + lanes + 7) / 8);
  for (size_t b = first; b < last; ++b) {
    w |= uint64_t{bits[b]} << (8 * (b - first));
  }
  return w;
}

// Lane k all ones where bit k of `word` is set, else zero. Vectors of up
// to four lanes load it from a table (one load rather than a broadcast, an
// and and a compare); wider ones test the bits. A build with
// POISE_KERNELS_TEST_BITS tests the bits on every target, so that the
// AVX-512 kernels' way is tested on hosts without AVX-512 (CMakeLists.txt).
#undef POISE_KEEP_TABLE
#if defined(POISE_KERNELS_TEST_BITS)
#define POISE_KEEP_TABLE 0
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_SSE4 || \
    HWY_TARGET == HWY_SSSE3 || HWY_TARGET == HWY_NEON ||  \
    HWY_TARGET == HWY_EMU128 || HWY_TARGET == HWY_SCALAR
#define POISE_KEEP_TABLE 1
#else
#define POISE_KEEP_TABLE 0
#endif
#if POISE_KEEP_TABLE
constexpr size_t kTableLanes = HWY_LANES(uint64_t);
static_assert(kTableLanes <= 4, "a table of 2^lanes rows");
struct KeepTable {
  HWY_ALIGN uint64_t lanes[size_t{1} << kTableLanes][kTableLanes];
};
constexpr KeepTable MakeKeepTable() {
  KeepTable t{};
  for (size_t word = 0; word < (size_t{1} << kTableLanes); ++word) {
    for (size_t k = 0; k < kTableLanes; ++k) {
      t.lanes[word][k] = ((word >> k) & 1) != 0 ? ~uint64_t{0} : 0;
    }
  }
  return t;
}
constexpr KeepTable kKeepTable = MakeKeepTable();

struct KeepOfBits {
  V operator()(uint64_t word) const {
    const size_t row = word & ((size_t{1} << kTableLanes) - 1);
    return hn::Load(D(), kKeepTable.lanes[row]);
  }
};
#else
// The constructor is written out, as LaneLead's: GCC compiles an implicit
// one (running a default member initializer) without the target's
// attributes, and unoptimised it hands back a wrong vector.
struct KeepOfBits {
  HWY_INLINE KeepOfBits() {
    const D d;
    HWY_ALIGN uint64_t bit[kMaxLanes];
    for (size_t k = 0; k < hn::Lanes(d); ++k) bit[k] = uint64_t{1} << k;
    lane_bit = hn::Load(d, bit);
  }
  V lane_bit;
  V operator()(uint64_t word) const {
    const D d;
    return hn::VecFromMask(d, hn::TestBit(hn::Set(d, word), lane_bit));
  }
};
#endif

// Each lane's LargestZ over the z offered to it, in the signed domain
// (z ^ 2^63: unsigned 0, what a refused lane offers, is the least value).
// Starts empty (as LargestZ::Empty()). The constructor is written out so
// that it is compiled for the target (an implicit one is not, on GCC).
struct LaneLead {
  HWY_INLINE LaneLead()
      : m1(hn::Set(DI(), INT64_MIN)),
        m2(m1),
        i1(hn::Set(D(), uint64_t{kNone})) {}
  VI m1;  // the largest z
  VI m2;  // the largest of the others
  V i1;   // the first index holding m1 (kNone while m1 is 0)
};

HWY_INLINE VI Signed(V z) {
  const D d;
  return hn::BitCast(DI(), hn::Xor(z, hn::Set(d, uint64_t{1} << 63)));
}

// As LargestZ::Offer, lane by lane: a strictly larger z leads (so the
// first index of a lane's largest z stays), the old leader or the offered z
// raises the runner-up.
HWY_INLINE void Offer(LaneLead& l, VI s, V index) {
  const auto gt = hn::Gt(s, l.m1);
  l.m2 = hn::Max(l.m2, hn::IfThenElse(gt, l.m1, s));
  l.m1 = hn::IfThenElse(gt, s, l.m1);
  l.i1 = hn::IfThenElse(hn::RebindMask(D(), gt), index, l.i1);
}

// The lanes' leads merged into one LargestZ (count left to the caller): the
// largest z, the lowest index holding it, and the largest z of everything
// else (another lane's equal z included: a tie). Reductions across the lanes
// rather than a loop over them: which lane leads is random, so a loop's
// comparisons mispredict.
HWY_INLINE LargestZ Merge(const LaneLead& l) {
  const D d;
  const DI di;
  const auto unsigned_of = [](int64_t s) {
    return static_cast<uint64_t>(s) ^ (uint64_t{1} << 63);
  };
  const VI top = hn::MaxOfLanes(di, l.m1);
  LargestZ lead = LargestZ::Empty();
  lead.z = unsigned_of(hn::GetLane(top));
  if (lead.z == 0) return LargestZ::Empty();  // no z > 0: nobody leads
  const auto at_top = hn::Eq(l.m1, top);
  const V top_indices =
      hn::IfThenElse(hn::RebindMask(d, at_top), l.i1, hn::Set(d, ~uint64_t{0}));
  lead.index = static_cast<size_t>(hn::GetLane(hn::MinOfLanes(d, top_indices)));
  if (hn::CountTrue(di, at_top) > 1) {  // the other lane's z is the runner-up
    lead.runner_up = lead.z;
    return lead;
  }
  const VI others = hn::IfThenElse(at_top, hn::Set(di, INT64_MIN), l.m1);
  lead.runner_up =
      unsigned_of(hn::GetLane(hn::MaxOfLanes(di, hn::Max(l.m2, others))));
  return lead;
}

// `kept`'s lanes as the low bits of a word (lane k: bit k).
HWY_INLINE uint64_t KeptBits(hn::Mask<D> kept) {
  const D d;
  uint8_t bytes[(kMaxLanes + 7) / 8] = {};
  hn::StoreMaskBits(d, kept, bytes);
  uint64_t bits = 0;
  for (size_t b = 0; b < (hn::Lanes(d) + 7) / 8; ++b) {
    bits |= uint64_t{bytes[b]} << (8 * b);
  }
  return bits;
}

// One pass over row.Mixed(i), i < n: z stored when asked, and offered to
// lead[g] for each group g < kGroups. One group (kGroups == 1): every
// candidate, or with kBits those whose bit in `bits` is set. Several: group
// g holds the candidates whose bit is set in its array, bits + g * bytes
// (bytes = (n + 7) / 8). With kCommon every power is the row's common one
// (unread). With kMarks (survivors.bits given) it marks z_i >= survivors'
// threshold for every i < n (one compare a vector, no branch on which
// lanes). Compiled for each combination, so that the loop carries no test
// of them.
template <size_t kGroups, bool kBits, bool kCommon, bool kMarks>
// NOLINTNEXTLINE(readability-function-cognitive-complexity)
HWY_NOINLINE void LeadPass(const IdentityTable::KeyRow& row, size_t n,
                           const uint8_t* bits, uint64_t* z, LaneLead* out,
                           const SurvivorBits& survivors) {
  // In registers, not through `out` (which the stores to z may alias).
  LaneLead lead[kGroups];
  for (size_t g = 0; g < kGroups; ++g) lead[g] = out[g];
  const D d;
  const DI di;
  const size_t lanes = hn::Lanes(d);
  const size_t bytes = (n + 7) / 8;
  const KeyFactor key = FactorOf(row.key_state());
  const RowView view = ViewOf(row);
  const KeepOfBits keep_of;
  const V step = hn::Set(d, uint64_t{lanes});
  const V flip = hn::Set(d, uint64_t{1} << 63);
  V index = hn::Iota(d, 0);
  // Offers lanes [i, i + lanes) with z = x, `valid` of them (a tail: fewer
  // than lanes). A refused lane offers z = 0 (x & 0), the least value.
  // (HWY_ATTR on each lambda: Highway's pragma does not reach lambdas.)
  const auto offer = [&](V x, size_t i, size_t valid) HWY_ATTR {
    if constexpr (kGroups == 1 && !kBits) {
      if (valid == lanes) {
        Offer(lead[0], Signed(x), index);
        index = hn::Add(index, step);
        return;
      }
    }
    const V in_range = hn::VecFromMask(d, hn::FirstN(d, valid));
    for (size_t g = 0; g < kGroups; ++g) {
      V keep = in_range;
      if (kGroups > 1 || kBits) {
        keep =
            hn::And(keep, keep_of(BitsAt(bits + g * bytes, bytes, i, lanes)));
      }
      Offer(lead[g], hn::BitCast(di, hn::Xor(hn::And(x, keep), flip)), index);
    }
    index = hn::Add(index, step);
  };
  const auto mixed = [&](const RowView& r, size_t i) HWY_ATTR {
    const V scaled =
        kCommon ? r.product : TimesKey(key, hn::LoadU(d, r.power + i));
    return Mix64V(hn::Add(scaled, hn::LoadU(d, r.offset + i)));
  };
  // Bit i of survivors.bits: z_i >= survivors.threshold (unsigned, as
  // signed past the flip), for the `valid` lanes of x from `at`.
  const VI survivor_low = hn::Set(
      di, static_cast<int64_t>(survivors.threshold ^ (uint64_t{1} << 63)));
  const auto survivors_of = [&](V x) HWY_ATTR {
    return KeptBits(hn::RebindMask(
        d, hn::Not(hn::Lt(hn::BitCast(di, hn::Xor(x, flip)), survivor_low))));
  };
  const auto mark_survivors = [&](V x, size_t at, size_t valid) HWY_ATTR {
    if constexpr (kMarks) {
      const uint64_t kept = survivors_of(x) & (~uint64_t{0} >> (64 - valid));
      const size_t shift = at % 64;
      survivors.bits[at / 64] |= kept << shift;
      if (shift + valid > 64) {
        survivors.bits[at / 64 + 1] |= kept >> (64 - shift);
      }
    }
  };
  if constexpr (kMarks) {
    std::fill(survivors.bits, survivors.bits + (n + 63) / 64, uint64_t{0});
  }
  // The full vectors' bits gather in a register, a word stored once it is
  // whole (lanes divide 64 on every fixed-width target; else through
  // memory, as the tails).
  const bool gather = kMarks && 64 % lanes == 0;
  uint64_t word = 0;
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const V x = mixed(view, i);
    if (z != nullptr) hn::StoreU(x, d, z + i);
    if constexpr (kMarks) {
      if (gather) {
        word |= survivors_of(x) << (i % 64);
        if ((i + lanes) % 64 == 0) {
          survivors.bits[i / 64] = word;
          word = 0;
        }
      } else {
        mark_survivors(x, i, lanes);
      }
    }
    offer(x, i, lanes);
  }
  if (gather && i % 64 != 0) survivors.bits[i / 64] |= word;
  const bool overlap_tail = kGroups == 1 && !kBits && n >= lanes;
  if (i != n && overlap_tail) {
    // The last full vector again, its lanes offered before refused: no
    // copy of the tail, and its loads stay within the row.
    const size_t last = n - lanes;
    const V x = mixed(view, last);
    if (z != nullptr) hn::StoreU(x, d, z + last);
    mark_survivors(x, last, lanes);  // lanes before i: their bits again
    const V offered = hn::VecFromMask(d, hn::FirstN(d, i - last));
    Offer(lead[0], hn::BitCast(di, hn::Xor(hn::AndNot(offered, x), flip)),
          hn::Add(hn::Iota(d, 0), hn::Set(d, uint64_t{last})));
  } else if (i != n) {
    Tail tail;
    const V x = mixed(TailOf(view, i, n, tail), 0);
    if (z != nullptr) {
      hn::Store(x, d, tail.z);
      std::memcpy(z + i, tail.z, (n - i) * sizeof(uint64_t));
    }
    mark_survivors(x, i, n - i);
    offer(x, i, n - i);
  }
  for (size_t g = 0; g < kGroups; ++g) out[g] = lead[g];
}

// LeadPass for this row: with its common power, or reading the powers.
template <size_t kGroups, bool kBits>
void LeadPassOnRow(const IdentityTable::KeyRow& row, size_t n,
                   const uint8_t* bits, uint64_t* z, LaneLead* lead,
                   const SurvivorBits& survivors = {}) {
  const bool common = IdentityTableAccess::CommonPower(row) != 0;
  if constexpr (kGroups == 1) {  // the one pass that marks survivors
    if (survivors.bits != nullptr) {
      return common ? LeadPass<1, kBits, true, true>(row, n, bits, z, lead,
                                                     survivors)
                    : LeadPass<1, kBits, false, true>(row, n, bits, z, lead,
                                                      survivors);
    }
  }
  return common ? LeadPass<kGroups, kBits, true, false>(row, n, bits, z, lead,
                                                        survivors)
                : LeadPass<kGroups, kBits, false, false>(row, n, bits, z, lead,
                                                         survivors);
}

// The one-weight leader takes the vector pass at every n, on every target:
// its merge is a few reductions, cheaper than the scalar loop even for a
// row shorter than one vector (BM_PreparedPick/3 against the same with the
// scalar loop, AVX2 and AVX3).
LargestZ TableLargestZ(const IdentityTable::KeyRow& row, size_t n,
                       const uint8_t* eligible_bits, size_t count, uint64_t* z,
                       const SurvivorBits& survivors) {
  LaneLead lead;
  if (eligible_bits == nullptr) {
    LeadPassOnRow<1, false>(row, n, nullptr, z, &lead, survivors);
  } else {
    LeadPassOnRow<1, true>(row, n, eligible_bits, z, &lead, survivors);
  }
  LargestZ out = Merge(lead);
  out.count = count;
  return out;
}

// The leads of kGroups groups, merged, counts 0.
template <size_t kGroups>
void GroupLeads(const IdentityTable::KeyRow& row, size_t n,
                const uint8_t* group_bits, uint64_t* z, LargestZ* out) {
  LaneLead lead[kGroups];
  LeadPassOnRow<kGroups, true>(row, n, group_bits, z, lead);
  for (size_t g = 0; g < kGroups; ++g) out[g] = Merge(lead[g]);
}

// GroupLeads<2> .. GroupLeads<kMaxGroups>, by group count - 2.
using GroupLeadsFn = void (*)(const IdentityTable::KeyRow&, size_t,
                              const uint8_t*, uint64_t*, LargestZ*);
template <size_t... kMore>
constexpr std::array<GroupLeadsFn, sizeof...(kMore)> GroupLeadsTable(
    std::index_sequence<kMore...> /*unused*/) {
  return {&GroupLeads<kMore + 2>...};
}

// Group leaders of rows shorter than two vectors come from the scalar loop
// where the target has no 64-bit lane product: there a few scalar multiplies
// cost less than one pass that keeps and merges a lead per group
// (BM_PreparedPickTwoWeights/3 on AVX2 against the vector pass).
HWY_INLINE bool ScalarGroupsAreFaster(size_t n) {
  return POISE_EMULATED_MUL64 && n < 2 * hn::Lanes(D());
}

void TableLargestZByGroup(const IdentityTable::KeyRow& row, size_t n,
                          const uint8_t* group_bits, size_t groups, uint64_t* z,
                          LargestZ* out) {
  if (ScalarGroupsAreFaster(n)) {
    TableLeadsScalar(row, n, group_bits, groups, z, out);
    for (size_t g = 0; g < groups; ++g) out[g].count = 0;
    return;
  }
  static constexpr std::array<GroupLeadsFn, kMaxGroups - 1> kByCount =
      GroupLeadsTable(std::make_index_sequence<kMaxGroups - 1>());
  kByCount[std::clamp<size_t>(groups, 2, kMaxGroups) - 2](row, n, group_bits, z,
                                                          out);
}

void TableMixedRange(const IdentityTable::KeyRow& row, size_t begin, size_t end,
                     uint64_t* z) {
  const D d;
  const size_t lanes = hn::Lanes(d);
  const KeyFactor key = FactorOf(row.key_state());
  const RowView view = ViewOf(row);
  size_t i = begin;
  for (; i + lanes <= end; i += lanes) {
    hn::StoreU(MixedAt(key, view, i), d, z + (i - begin));
  }
  if (i == end) return;
  Tail tail;
  hn::Store(MixedAt(key, TailOf(view, i, end, tail), 0), d, tail.z);
  std::memcpy(z + (i - begin), tail.z, (end - i) * sizeof(uint64_t));
}

// ---------------------------------------------------------------------------
// The survivor levels of RouteWithTotal's walk.

// The indices of the z in [threshold, threshold + span) (unsigned,
// wrapping). Few are kept (a survivor level is a small share of the list)
// and which ones is random: the compares of up to 64 candidates gather
// their bits into one word, and only its set bits are looped over, so that
// a pass mispredicts about once per 64 candidates rather than at every
// vector that keeps one (and no compressing store: microcoded on AMD).
size_t ListZInRange(const uint64_t* z, size_t n, uint64_t threshold,
                    uint64_t span, size_t* out) {
  const D d;
  const size_t lanes = hn::Lanes(d);
  const V low = hn::Set(d, threshold);
  const VI width = Signed(hn::Set(d, span));
  const auto in_range = [&](V v) HWY_ATTR {
    return hn::RebindMask(d, hn::Lt(Signed(hn::Sub(v, low)), width));
  };
  size_t listed = 0;
  size_t i = 0;
  uint64_t word = 0;
  size_t word_base = 0;
  for (; i + lanes <= n; i += lanes) {
    if (i - word_base + lanes > 64) {
      listed = AppendSetBits(word, word_base, out, listed);
      word = 0;
      word_base = i;
    }
    word |= KeptBits(in_range(hn::LoadU(d, z + i))) << (i - word_base);
  }
  listed = AppendSetBits(word, word_base, out, listed);
  if (i == n) return listed;
  HWY_ALIGN uint64_t rest[kMaxLanes] = {};
  std::memcpy(rest, z + i, (n - i) * sizeof(uint64_t));
  return AppendSetBits(
      KeptBits(hn::And(in_range(hn::Load(d, rest)), hn::FirstN(d, n - i))), i,
      out, listed);
}

// ---------------------------------------------------------------------------
// The table build: one identity's 256 offsets D(l) = FNV(l) - l * p^m,
// FNV(l) the walk from state l over identity ‖ 0xFF (identity_table.h).

// NOLINTNEXTLINE(readability-function-cognitive-complexity)
void HashIdentityOffsets(const char* identity, size_t size, uint64_t power,
                         uint64_t* offset) {
  const D d;
  const size_t lanes = hn::Lanes(d);
  constexpr size_t kG = 8;  // vectors walked together (256 = kG * lanes * k)
  const V step = hn::Set(d, uint64_t{lanes});
  const V power_step = hn::Set(d, power * lanes);
  const V ff = hn::Set(d, uint64_t{0xFF});
  HWY_ALIGN uint64_t first_lp[kMaxLanes];  // l * power for l < lanes
  for (size_t k = 0; k < lanes; ++k) first_lp[k] = power * k;
  V l0 = hn::Iota(d, 0);
  V lp0 = hn::Load(d, first_lp);
  for (size_t base = 0; base < 256; base += kG * lanes) {
    V h[kG];
    V lp[kG];
    for (size_t g = 0; g < kG; ++g) {
      h[g] = l0;
      lp[g] = lp0;
      l0 = hn::Add(l0, step);
      lp0 = hn::Add(lp0, power_step);
    }
    for (const char ch : std::string_view(identity, size)) {
      const V b = hn::Set(d, uint64_t{static_cast<uint8_t>(ch)});
      for (V& state : h) state = MulFnvPrime(hn::Xor(state, b));
    }
    for (size_t g = 0; g < kG; ++g) {
      const V fnv = MulFnvPrime(hn::Xor(h[g], ff));
      hn::StoreU(hn::Sub(fnv, lp[g]), d, offset + base + g * lanes);
    }
  }
}

// The target these kernels were compiled for.
int64_t KernelTarget() { return HWY_TARGET; }

}  // namespace poise::internal::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace poise::internal {

HWY_EXPORT(HashCandidatesVector);
HWY_EXPORT(HashCandidatesInBlocks);
HWY_EXPORT(TableLargestZ);
HWY_EXPORT(TableLargestZByGroup);
HWY_EXPORT(TableMixedRange);
HWY_EXPORT(ListZInRange);
HWY_EXPORT(HashIdentityOffsets);
HWY_EXPORT(KernelTarget);

void HashCandidatesVector(uint64_t key_state, const Candidate* c, size_t n,
                          uint64_t* z) {
  HWY_DYNAMIC_DISPATCH(HashCandidatesVector)(key_state, c, n, z);
}

void HashCandidatesInBlocks(uint64_t key_state, const Candidate* c, size_t n,
                            uint64_t* z) {
  HWY_DYNAMIC_DISPATCH(HashCandidatesInBlocks)(key_state, c, n, z);
}

LargestZ TableLargestZ(const IdentityTable::KeyRow& row, size_t n,
                       const uint8_t* eligible_bits, size_t count, uint64_t* z,
                       const SurvivorBits& survivors) {
  return HWY_DYNAMIC_DISPATCH(TableLargestZ)(row, n, eligible_bits, count, z,
                                             survivors);
}

void TableLargestZByGroup(const IdentityTable::KeyRow& row, size_t n,
                          const uint8_t* group_bits, size_t groups, uint64_t* z,
                          LargestZ* out) {
  HWY_DYNAMIC_DISPATCH(TableLargestZByGroup)
  (row, n, group_bits, groups, z, out);
}

void TableMixedRange(const IdentityTable::KeyRow& row, size_t begin, size_t end,
                     uint64_t* z) {
  HWY_DYNAMIC_DISPATCH(TableMixedRange)(row, begin, end, z);
}

size_t ListZInRange(const uint64_t* z, size_t n, uint64_t threshold,
                    uint64_t span, size_t* out) {
  return HWY_DYNAMIC_DISPATCH(ListZInRange)(z, n, threshold, span, out);
}

void HashIdentityOffsets(std::string_view identity, uint64_t power,
                         uint64_t* offset) {
  HWY_DYNAMIC_DISPATCH(HashIdentityOffsets)
  (identity.data(), identity.size(), power, offset);
}

int64_t ActiveHashTarget() { return HWY_DYNAMIC_DISPATCH(KernelTarget)(); }

std::vector<int64_t> CompiledHashTargets() {
  std::vector<int64_t> targets;
  for (int64_t left = HWY_TARGETS; left != 0; left &= left - 1) {
    targets.push_back(left & -left);  // best (lowest bit) first
  }
  return targets;
}

bool ForceHashTarget(int64_t target) {
  hwy::SetSupportedTargetsForTest(0);
  if (target == 0) return true;
  const bool one_target = (target & (target - 1)) == 0;
  if (!one_target || (target & HWY_TARGETS) == 0 ||
      (hwy::SupportedTargets() & target) == 0) {
    return false;
  }
  hwy::SetSupportedTargetsForTest(target);
  return true;
}

const char* HashTargetName(int64_t target) { return hwy::TargetName(target); }

}  // namespace poise::internal
#endif  // HWY_ONCE
