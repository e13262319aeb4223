// The contract of contract.h, step by step. Compiled with -ffp-contract=off
// like the rest of the core: a fused multiply-add would change the last bits
// of the logarithm. Nothing here is fast, and nothing is meant to be.
#include "contract.h"

#include <algorithm>

namespace poise::contract {

namespace {

uint64_t Fnv1a64(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;  // the offset basis
  for (const char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;  // the FNV prime
  }
  return h;
}

// Written out rather than Mix64 (poise/hash.h): the oracle shares no code
// with the implementation it checks.
uint64_t SplitMix64Finalizer(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

bool IsEligible(const LoadedCandidate& b) {
  return b.eligible && b.weight != 0;
}

}  // namespace

uint64_t HashOf(std::string_view key, std::string_view identity) {
  std::string framed;
  framed += '\x00';
  framed += key;
  framed += '\xff';
  framed += '\x01';
  framed += identity;
  framed += '\xff';
  return SplitMix64Finalizer(Fnv1a64(framed));
}

double LnU(uint64_t z) {
  const uint64_t s = (z >> 11) + 1;  // 1 <= s <= 2^53
  int e = 0;                         // floor(log2 s)
  while (e < 53 && (uint64_t{1} << (e + 1)) <= s) ++e;
  // Both are exact doubles and so is their quotient: m in [1, 2).
  const double m =
      static_cast<double>(s) / static_cast<double>(uint64_t{1} << e);
  const double t = (m - 1.0) / (m + 1.0);
  const double t_squared = t * t;
  double sum = 0.0;
  double power = t;  // t^(2k + 1)
  for (int k = 0; k < 13; ++k) {
    sum = sum + power / static_cast<double>(2 * k + 1);
    power = power * t_squared;
  }
  const double ln2 = 0.6931471805599453;  // std::f64::consts::LN_2
  return 2.0 * sum - static_cast<double>(53 - e) * ln2;
}

double ScoreOf(uint64_t z, uint32_t weight) {
  return -LnU(z) / static_cast<double>(weight);
}

bool Precedes(const Ranked& a, const Ranked& b) {
  if (a.score != b.score) return a.score < b.score;
  if (a.z != b.z) return a.z > b.z;
  if (a.weight != b.weight) return a.weight > b.weight;
  return a.index < b.index;
}

std::vector<Ranked> Order(std::string_view key,
                          const std::vector<LoadedCandidate>& backends) {
  std::vector<Ranked> order;
  for (size_t i = 0; i < backends.size(); ++i) {
    if (!IsEligible(backends[i])) continue;
    const uint64_t z = HashOf(key, backends[i].identity);
    order.push_back(
        Ranked{i, ScoreOf(z, backends[i].weight), z, backends[i].weight});
  }
  std::sort(order.begin(), order.end(), Precedes);
  return order;
}

Result<size_t> Pick(std::string_view key,
                    const std::vector<LoadedCandidate>& backends) {
  if (backends.empty()) return PickError::kEmpty;
  const std::vector<Ranked> order = Order(key, backends);
  if (order.empty()) return PickError::kNoEligibleCandidates;
  return order.front().index;
}

UInt128 Capacity(uint32_t factor_percent, uint64_t total_load, uint32_t weight,
                 uint64_t total_weight) {
  const UInt128 numerator =
      UInt128{factor_percent} * (UInt128{total_load} + 1) * weight;
  const UInt128 denominator = UInt128{100} * total_weight;
  if (denominator == 0) return 0;  // W = 0: no eligible backend, no room
  return (numerator + denominator - 1) / denominator;  // no wrap: see above
}

namespace {

// Point 7's selection for a load total L = total_load (Decide's sum, or
// K9's T): the first backend in `order` whose load is below its
// capacity, as the decision with `order`'s first as the affinity.
bool FirstWithRoom(const std::vector<Ranked>& order,
                   const std::vector<LoadedCandidate>& backends,
                   uint32_t factor_percent, uint64_t total_load,
                   uint64_t total_weight, Decision& out) {
  for (const Ranked& r : order) {
    const UInt128 capacity =
        Capacity(factor_percent, total_load, r.weight, total_weight);
    if (backends[r.index].load < capacity) {
      out = Decision{order.front().index, r.index, backends[r.index].load,
                     capacity};
      return true;
    }
  }
  return false;
}

}  // namespace

Result<Decision> Decide(std::string_view key,
                        const std::vector<LoadedCandidate>& backends,
                        uint32_t factor_percent) {
  if (backends.empty()) return PickError::kEmpty;
  const std::vector<Ranked> order = Order(key, backends);
  if (order.empty()) return PickError::kNoEligibleCandidates;
  uint64_t total_load = 0;
  uint64_t total_weight = 0;
  for (const LoadedCandidate& b :
       backends) {  // in list order, load before weight
    if (!IsEligible(b)) continue;
    if (__builtin_add_overflow(total_load, b.load, &total_load)) {
      return PickError::kLoadOverflow;
    }
    if (__builtin_add_overflow(total_weight, uint64_t{b.weight},
                               &total_weight)) {
      return PickError::kWeightOverflow;
    }
  }
  if (total_load == UINT64_MAX) return PickError::kLoadOverflow;  // L + 1
  Decision d{};
  if (FirstWithRoom(order, backends, factor_percent, total_load, total_weight,
                    d)) {
    return d;
  }
  // Unreachable for factor_percent >= 100: the capacities sum to at least
  // L + 1, so some backend's load is below its own.
  return PickError::kNoEligibleCandidates;
}

Result<DecisionWithTotal> DecideWithTotal(
    std::string_view key, const std::vector<LoadedCandidate>& backends,
    uint32_t factor_percent, uint64_t total_load) {
  if (backends.empty()) return PickError::kEmpty;
  const std::vector<Ranked> order = Order(key, backends);
  if (order.empty()) return PickError::kNoEligibleCandidates;
  uint64_t total_weight = 0;
  for (const LoadedCandidate& b : backends) {  // in list order
    if (IsEligible(b) && __builtin_add_overflow(
                             total_weight, uint64_t{b.weight}, &total_weight)) {
      return PickError::kWeightOverflow;
    }
  }
  if (total_load == UINT64_MAX) return PickError::kLoadOverflow;  // T + 1
  Decision d{};
  if (FirstWithRoom(order, backends, factor_percent, total_load, total_weight,
                    d)) {
    return DecisionWithTotal{d, false};
  }
  // Nobody has room: T is below L (the capacities sum to at least T + 1).
  const Result<Decision> sampled = Decide(key, backends, factor_percent);
  if (!sampled.ok()) return sampled.error();
  return DecisionWithTotal{sampled.value(), true};
}

}  // namespace poise::contract
