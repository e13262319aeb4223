// The routing contract, written to be read in one sitting.
//
// This is the plain statement of what every fast path of the core computes,
// and the oracle the tests, fuzzers and benchmarks check them against. It is
// slow on purpose (it sorts, allocates and takes every logarithm) and shares
// no code with the fast paths: not the hashing kernels, not the score
// brackets, not even poise::LnUnit. It is the same contract as the Rust crate
// poise-core (copyleftdev/poise-rs, crates/poise-core), bit for bit (the
// legend of every rule name, K here and the router's, is docs/rules.md):
//
// K1. Hashing. For a request key and a backend identity,
//       h = FNV-1a-64 over 0x00 ‖ key ‖ 0xFF ‖ 0x01 ‖ identity ‖ 0xFF
//       z = SplitMix64's finaliser of h (no gamma added)
//     The framing is how Rust's Hash writes a tagged pair of strings.
// K2. The uniform draw. s = (z >> 11) + 1, an integer in [1, 2^53], so
//     U = s / 2^53 lies in (0, 1] and is exact as a double.
// K3. ln U, by a fixed recipe of basic IEEE operations (no libm, no fused
//     multiply-add): s = m 2^e with m in [1, 2); t = (m - 1) / (m + 1);
//     ln m = 2 (t + t^3/3 + ... + t^25/25), thirteen terms summed in order;
//     ln U = ln m - (53 - e) ln 2.
// K4. The score of a backend of weight w: -ln U / w. Smaller is better.
// K5. The order: smaller score; on equal scores the larger z; then the
//     larger weight (a duplicate identity draws the same z); then the earlier
//     position in the list.
// K6. Pick: the first eligible backend in that order. Backends that are
//     ineligible or have weight 0 take no part.
// K7. Decide: with L the sum of the eligible loads, W the sum of the eligible
//     weights and f the balance factor in percent, backend i may take the
//     request while load_i < capacity_i = ceil(f (L + 1) w_i / (100 W)).
//     The selection is the first backend in the order with load below its
//     capacity; the affinity is the first overall. The capacity is exact:
//     f < 2^32, L + 1 <= 2^64 - 1 and w < 2^32, so f (L + 1) w < 2^128.
// K8. Errors, checked in this order (poise-core's): no backends (kEmpty);
//     none eligible (kNoEligibleCandidates); then, for each eligible backend
//     in list order, its load added to L (kLoadOverflow past 2^64 - 1) and
//     its weight added to W (kWeightOverflow past 2^64 - 1); then L + 1
//     (kLoadOverflow when L = 2^64 - 1). poise-core also reports
//     kLoadOverflow when f (L + 1) w overflows 128 bits, which K7 shows
//     cannot happen. Pick reports only the first two.
// K9. Decide with a given total T (PreparedCandidates::RouteWithTotal; not
//     poise-core's): the bounds come from T instead of L, capacity_i =
//     ceil(f (T + 1) w_i / (100 W)); the selection is the first backend in
//     the order with load below its capacity. Errors: kEmpty, then
//     kNoEligibleCandidates, then the weights as in K8 (without the
//     loads), then kLoadOverflow when T = 2^64 - 1. If no backend has room
//     (T stale, below L), the answer is K7's, errors included, and
//     says so (`stale_total`).
#ifndef POISE_SRC_CORE_CONTRACT_H_
#define POISE_SRC_CORE_CONTRACT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "poise/types.h"

namespace poise::contract {

// K1. The mixed hash z of (key, identity).
uint64_t HashOf(std::string_view key, std::string_view identity);

// K2 and K3. ln U for the mixed hash z; in [-53 ln 2, 0].
double LnU(uint64_t z);

// K4. The score -ln U / weight (weight > 0).
double ScoreOf(uint64_t z, uint32_t weight);

// One backend as the contract sees it: a candidate with its load.
struct LoadedCandidate {
  std::string identity;
  uint32_t weight = 1;
  uint64_t load = 0;  // its in-flight count (Decide only)
  bool eligible = true;
};

// A backend's place in a key's order.
struct Ranked {
  size_t index;  // position in the backend list
  double score;
  uint64_t z;
  uint32_t weight;
};

// K5. Whether a comes before b in the order.
bool Precedes(const Ranked& a, const Ranked& b);

// Every eligible backend, first in the order first (empty: none eligible).
std::vector<Ranked> Order(std::string_view key,
                          const std::vector<LoadedCandidate>& backends);

// K6. The index of the key's owner.
Result<size_t> Pick(std::string_view key,
                    const std::vector<LoadedCandidate>& backends);

// K7. ceil(f (L + 1) w / (100 W)), exact (L < 2^64 - 1, 0 < w, 0 < W).
UInt128 Capacity(uint32_t factor_percent, uint64_t total_load, uint32_t weight,
                 uint64_t total_weight);

struct Decision {
  size_t affinity;
  size_t selection;
  uint64_t selected_load;
  UInt128 selected_capacity;
};

// K7 and K8. The bounded-load decision for `factor_percent` (>= 100).
Result<Decision> Decide(std::string_view key,
                        const std::vector<LoadedCandidate>& backends,
                        uint32_t factor_percent);

struct DecisionWithTotal {
  Decision decision;
  bool stale_total;  // no backend had room under T: K7's decision
};

// K9. The bounded-load decision with every bound from `total_load`.
Result<DecisionWithTotal> DecideWithTotal(
    std::string_view key, const std::vector<LoadedCandidate>& backends,
    uint32_t factor_percent, uint64_t total_load);

}  // namespace poise::contract

#endif  // POISE_SRC_CORE_CONTRACT_H_
