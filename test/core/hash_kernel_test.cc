// The candidate-hashing kernels (src/core/candidate_hash*.cc) against
// KeyHash::Mixed, and that they read no byte beyond an identity.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "poise/hash.h"
#include "poise/rendezvous.h"
#include "src/core/candidate_hash.h"

namespace poise {
namespace {

// The hashing kernels against KeyHash::Mixed, candidate by candidate, on
// random keys and lists of 1..200 identities of 0..64 arbitrary bytes, with
// ineligible and zero-weight entries (whose z is unspecified and not
// compared). Length regimes: anything (mostly the vector kernel's masked
// loads), all >= 8 bytes (its gathers), short only, one shared length, and
// long with a rare empty one. Also checks that nothing is written past n and
// runs sub-ranges at every alignment.
using Kernel = void (*)(uint64_t, const Candidate*, size_t, uint64_t*);

void CheckKernelAgainstMixed(Kernel kernel, uint64_t seed, int lists) {
  std::mt19937_64 rng(seed);
  constexpr uint64_t kSentinel = 0x5eb1e5eb1e5eb1e5ULL;
  size_t compared = 0;
  std::vector<std::string> ids;
  std::vector<Candidate> c;
  std::vector<uint64_t> z;
  for (int list = 0; list < lists; ++list) {
    const size_t n = 1 + rng() % 200;
    const uint64_t regime = rng() % 5;
    const size_t shared = 8 + rng() % 13;
    ids.assign(n, std::string());
    for (std::string& id : ids) {
      size_t len = 0;
      switch (regime) {
        case 0:
          len = rng() % 65;
          break;
        case 1:
          len = 8 + rng() % 57;
          break;
        case 2:
          len = rng() % 9;
          break;
        case 3:
          len = shared;
          break;
        default:
          len = rng() % 50 == 0 ? 0 : 8 + rng() % 57;
          break;
      }
      id.resize(len);
      for (char& ch : id) ch = static_cast<char>(rng());
    }
    c.clear();
    for (const std::string& id : ids) {
      const bool eligible = rng() % 8 != 0;
      const auto weight =
          static_cast<uint32_t>(rng() % 16 == 0 ? 0 : 1 + rng() % 5);
      c.push_back({id, weight, eligible});
    }
    if (rng() % 4 == 0) c[rng() % n].identity = std::string_view();  // null
    std::string key(rng() % 41, '\0');
    for (char& ch : key) ch = static_cast<char>(rng());
    const KeyHash hash(key);
    const size_t begin = rng() % 4 == 0 ? rng() % n : 0;
    z.assign(n - begin + 1, kSentinel);
    kernel(hash.state(), c.data() + begin, n - begin, z.data());
    for (size_t i = begin; i < n; ++i) {
      if (!c[i].IsEligible()) continue;
      ASSERT_EQ(z[i - begin], hash.Mixed(c[i].identity))
          << "list " << list << " index " << i << " length "
          << c[i].identity.size();
      ++compared;
    }
    ASSERT_EQ(z[n - begin], kSentinel) << "wrote past n, list " << list;
  }
  EXPECT_GT(compared, size_t{1000000});
}

TEST(HashKernels, ScalarHashKernelEqualsMixed) {
  CheckKernelAgainstMixed(&internal::HashCandidatesScalar, 51, 25000);
}

TEST(HashKernels, Avx512HashKernelEqualsMixed) {
  if (!internal::Avx512HashSupported()) {
    GTEST_SKIP() << "this CPU cannot run the AVX-512 kernel";
  }
  CheckKernelAgainstMixed(&internal::HashCandidatesAvx512, 52, 40000);
}

// Identities that end exactly where a readable page does (the next page is
// inaccessible): a kernel that read past an identity's last byte would
// crash here. Every length 0..64 and every count 1..70 (all block shapes).
TEST(HashKernels, HashKernelsReadNoByteBeyondAnIdentity) {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  constexpr size_t kIds = 70;
  void* map = mmap(nullptr, page * 2 * kIds, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(map, MAP_FAILED);
  char* base = static_cast<char*>(map);
  for (size_t k = 0; k < kIds; ++k) {
    ASSERT_EQ(mprotect(base + (2 * k + 1) * page, page, PROT_NONE), 0);
  }
  std::mt19937_64 rng(53);
  for (char* p = base; p < base + page * 2 * kIds; p += 2 * page) {
    for (size_t i = 0; i < page; ++i) p[i] = static_cast<char>(rng());
  }
  const KeyHash hash("edge-key");
  std::vector<Kernel> kernels = {&internal::HashCandidatesScalar};
  if (internal::Avx512HashSupported()) {
    kernels.push_back(&internal::HashCandidatesAvx512);
  }
  std::vector<Candidate> c(kIds);
  std::vector<uint64_t> z(kIds);
  for (size_t len = 0; len <= 64; ++len) {
    for (size_t n = 1; n <= kIds; ++n) {
      for (size_t k = 0; k < n; ++k) {
        // Identity k ends at its page's end; its length is `len` or, for
        // every third one, a different length (mixed blocks).
        const size_t l = k % 3 == 2 ? (len * 7 + k) % 65 : len;
        c[k] = {std::string_view(base + (2 * k + 1) * page - l, l), 1, true};
      }
      for (Kernel kernel : kernels) {
        kernel(hash.state(), c.data(), n, z.data());
        for (size_t k = 0; k < n; ++k) {
          ASSERT_EQ(z[k], hash.Mixed(c[k].identity)) << len << " " << n;
        }
      }
    }
  }
  munmap(map, page * 2 * kIds);
}

}  // namespace
}  // namespace poise
