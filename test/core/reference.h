// The contract written as plainly as possible: the oracle every optimised
// path of the core is checked against. Deliberately shares no code with
// src/core.
#ifndef POISE_TEST_CORE_REFERENCE_H_
#define POISE_TEST_CORE_REFERENCE_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace poise::reference {

inline uint64_t Fnv(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : bytes) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

inline uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

inline uint64_t Z(std::string_view key, std::string_view identity) {
  std::string framed;
  framed += '\x00';
  framed += key;
  framed += '\xff';
  framed += '\x01';
  framed += identity;
  framed += '\xff';
  return Mix(Fnv(framed));
}

inline double LnU(uint64_t z) {
  const uint64_t s = (z >> 11) + 1;
  int e = 0;
  while (e < 53 && (uint64_t{1} << (e + 1)) <= s) ++e;
  const double m =
      static_cast<double>(s) / static_cast<double>(uint64_t{1} << e);
  const double t = (m - 1.0) / (m + 1.0);
  const double tt = t * t;
  double sum = 0.0;
  double term = t;
  for (int i = 0; i <= 12; ++i) {
    sum = sum + term / static_cast<double>(2 * i + 1);
    term = term * tt;
  }
  return 2.0 * sum - static_cast<double>(53 - e) * 0.6931471805599453;
}

struct Backend {
  std::string identity;
  uint32_t weight;
  uint64_t load = 0;
  bool eligible = true;
};

struct Ranked {
  size_t index;
  double score;
  uint64_t z;
  uint32_t weight;
};

// Eligible backends, best first, by sorting the whole list.
inline std::vector<Ranked> Order(std::string_view key,
                                 const std::vector<Backend>& backends) {
  std::vector<Ranked> ranked;
  for (size_t i = 0; i < backends.size(); ++i) {
    if (!backends[i].eligible || backends[i].weight == 0) continue;
    const uint64_t z = Z(key, backends[i].identity);
    ranked.push_back({i, -LnU(z) / static_cast<double>(backends[i].weight), z,
                      backends[i].weight});
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const Ranked& a, const Ranked& b) {
                     if (a.score != b.score) return a.score < b.score;
                     if (a.z != b.z) return a.z > b.z;
                     return a.weight > b.weight;  // stable: earlier entry next
                   });
  return ranked;
}

struct Decision {
  size_t affinity;
  size_t selection;
  uint64_t capacity;
};

// Walks the order and returns the first backend whose load is below
// ceil(f (L+1) w / (100 W)), with the capacity compared as an exact fraction.
inline std::optional<Decision> Decide(std::string_view key,
                                      const std::vector<Backend>& backends,
                                      uint32_t factor) {
  const std::vector<Ranked> order = Order(key, backends);
  if (order.empty()) return std::nullopt;
  unsigned __int128 total_load = 0;
  unsigned __int128 total_weight = 0;
  for (const Ranked& r : order) {
    total_load += backends[r.index].load;
    total_weight += backends[r.index].weight;
  }
  if (total_weight == 0) return std::nullopt;  // Order() keeps weights > 0
  for (const Ranked& r : order) {
    const unsigned __int128 num = factor * (total_load + 1) * r.weight;
    const unsigned __int128 den = 100 * total_weight;
    const unsigned __int128 cap = (num + den - 1) / den;
    if (backends[r.index].load < cap) {
      return Decision{order.front().index, r.index, static_cast<uint64_t>(cap)};
    }
  }
  return std::nullopt;
}

}  // namespace poise::reference

#endif  // POISE_TEST_CORE_REFERENCE_H_
