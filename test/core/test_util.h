// Small helpers shared by the core tests: the reference backends as the
// core's candidates, and reference backends from a list of weights.
#ifndef POISE_TEST_CORE_TEST_UTIL_H_
#define POISE_TEST_CORE_TEST_UTIL_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "poise/rendezvous.h"
#include "reference.h"

namespace poise::test_util {

// The core's view of the reference backends (identity, weight, eligible).
inline std::vector<Candidate> View(
    const std::vector<reference::Backend>& backends) {
  std::vector<Candidate> out;
  out.reserve(backends.size());
  for (const auto& b : backends) {
    out.push_back({b.identity, b.weight, b.eligible});
  }
  return out;
}

// Eligible, unloaded backends named prefix + index, with these weights.
inline std::vector<reference::Backend> Backends(
    std::initializer_list<uint32_t> weights, const std::string& prefix) {
  std::vector<reference::Backend> out;
  for (uint32_t w : weights) {
    out.push_back({prefix + std::to_string(out.size()), w});
  }
  return out;
}

}  // namespace poise::test_util

#endif  // POISE_TEST_CORE_TEST_UTIL_H_
