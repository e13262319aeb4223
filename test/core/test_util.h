// Small helpers shared by the core tests: the contract's backends as the
// core's candidates, contract backends from a list of weights, and a fixture
// that runs a test once per hashing kernel.
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

// A parameterised fixture that selects the hashing kernel of its parameter
// for the test (skipped where the CPU cannot run it) and restores the
// dispatched one after: kScalar is what CPUs without AVX-512 run, kAvx512
// what HashCandidates and the one-weight leader dispatch to where it can.
// Derive a suite from it and instantiate it with Kernels() and KernelName.
class KernelFixture : public ::testing::TestWithParam<internal::HashKernel> {
 protected:
  void SetUp() override {
    if (!internal::SelectHashKernel(GetParam())) {
      GTEST_SKIP() << "this CPU cannot run the AVX-512 kernel";
    }
  }
  void TearDown() override { internal::SelectHashKernel(dispatched_); }

 private:
  internal::HashKernel dispatched_ = internal::ActiveHashKernel();
};

inline auto Kernels() {
  return ::testing::Values(internal::HashKernel::kScalar,
                           internal::HashKernel::kAvx512);
}
inline std::string KernelName(
    const ::testing::TestParamInfo<internal::HashKernel>& param) {
  return param.param == internal::HashKernel::kScalar ? "Scalar" : "Avx512";
}

}  // namespace poise::test_util

#endif  // POISE_TEST_CORE_TEST_UTIL_H_
