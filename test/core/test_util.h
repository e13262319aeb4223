// Small helpers shared by the core tests: the contract's backends as the
// core's candidates, contract backends from a list of weights, and a fixture
// that runs a test once per compiled target of the hashing kernels.
#ifndef POISE_TEST_CORE_TEST_UTIL_H_
#define POISE_TEST_CORE_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "poise/rendezvous.h"
#include "src/core/candidate_hash.h"
#include "src/core/contract.h"

namespace poise::test_util {

// The core's view of the contract's backends (identity, weight, eligible).
inline std::vector<Candidate> View(
    const std::vector<contract::LoadedCandidate>& backends) {
  std::vector<Candidate> out;
  out.reserve(backends.size());
  for (const auto& b : backends) {
    out.push_back({b.identity, b.weight, b.eligible});
  }
  return out;
}

// Eligible, unloaded backends named prefix + index, with these weights.
inline std::vector<contract::LoadedCandidate> Backends(
    std::initializer_list<uint32_t> weights, const std::string& prefix) {
  std::vector<contract::LoadedCandidate> out;
  for (uint32_t w : weights) {
    out.push_back({prefix + std::to_string(out.size()), w});
  }
  return out;
}

// A parameterised fixture that runs its test with the hashing kernels
// forced onto one Highway target (skipped where the CPU cannot run it) and
// puts them back on the best one after. Derive a suite from it and
// instantiate it with Kernels() and KernelName: every target compiled into
// the kernels (x86-64: AVX3 = AVX-512, AVX2, SSE4 and the portable one;
// AArch64: SVE and NEON).
class KernelFixture : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    if (!internal::ForceHashTarget(GetParam())) {
      GTEST_SKIP() << "this CPU cannot run the "
                   << internal::HashTargetName(GetParam()) << " kernels";
    }
  }
  void TearDown() override { internal::ForceHashTarget(0); }
};

inline auto Kernels() {
  return ::testing::ValuesIn(internal::CompiledHashTargets());
}
inline std::string KernelName(const ::testing::TestParamInfo<int64_t>& param) {
  return internal::HashTargetName(param.param);
}

}  // namespace poise::test_util

#endif  // POISE_TEST_CORE_TEST_UTIL_H_
