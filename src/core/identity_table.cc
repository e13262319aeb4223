#include "poise/identity_table.h"

#include <algorithm>

#include "candidate_hash.h"
#include "poise/rendezvous.h"

namespace poise {

namespace {

// Walks all 256 low-byte states over `identity` ‖ 0xFF in lockstep:
// independent chains, which the compiler vectorises.
inline void Walk(uint64_t* state, std::string_view identity) {
  for (uint64_t l = 0; l < 256; ++l) state[l] = l;
  for (const char c : identity) {
    const auto b = static_cast<uint8_t>(c);
    for (size_t l = 0; l < 256; ++l) state[l] = Fnv1aUpdateByte(state[l], b);
  }
  for (size_t l = 0; l < 256; ++l) state[l] = Fnv1aUpdateByte(state[l], 0xFF);
}

void WalkScalar(uint64_t* state, std::string_view identity) {
  Walk(state, identity);
}

#if POISE_HAVE_AVX512_HASH
// The same loop with 64-bit vector multiplies (vpmullq): about 5x faster.
__attribute__((target("avx512f,avx512dq"))) void WalkAvx512(
    uint64_t* state, std::string_view identity) {
  Walk(state, identity);
}
#endif

}  // namespace

IdentityTable::IdentityTable(const std::vector<std::string_view>& identities)
    : size_(identities.size()),
      power_(identities.size()),
      offset_(identities.size() * 256) {
  void (*walk)(uint64_t*, std::string_view) = WalkScalar;
#if POISE_HAVE_AVX512_HASH
  // The hashing kernel's choice (tests force either one).
  if (internal::ActiveHashKernel() == internal::HashKernel::kAvx512) {
    walk = WalkAvx512;
  }
#endif
  uint64_t state[256];
  for (size_t i = 0; i < size_; ++i) {
    walk(state, identities[i]);
    uint64_t power = kFnvPrime;  // the terminator's step
    for (size_t k = 0; k < identities[i].size(); ++k) power *= kFnvPrime;
    power_[i] = power;
    for (uint64_t l = 0; l < 256; ++l) {
      offset_[l * size_ + i] = state[l] - l * power;
    }
  }
  // Identities of one length (addresses often are) share p^m: a pick may
  // then skip reading the powers.
  if (size_ != 0 && std::all_of(power_.begin(), power_.end(),
                                [&](uint64_t p) { return p == power_[0]; })) {
    common_power_ = power_[0];
  }
}

namespace {

std::vector<std::string_view> IdentitiesOf(
    const std::vector<Candidate>& candidates) {
  std::vector<std::string_view> identities;
  identities.reserve(candidates.size());
  for (const Candidate& c : candidates) identities.push_back(c.identity);
  return identities;
}

}  // namespace

IdentityTable::IdentityTable(const std::vector<Candidate>& candidates)
    : IdentityTable(IdentitiesOf(candidates)) {}

}  // namespace poise
