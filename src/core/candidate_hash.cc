#include "candidate_hash.h"

#include <atomic>

namespace poise::internal {

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

}  // namespace poise::internal
