#include "poise/identity_table.h"

#include "poise/rendezvous.h"

namespace poise {

IdentityTable::IdentityTable(const std::vector<std::string_view>& identities)
    : size_(identities.size()),
      power_(identities.size()),
      offset_(identities.size() * 256) {
  // All 256 low bytes walk the identity in lockstep: independent chains, so
  // the compiler may vectorise them.
  uint64_t state[256];
  for (size_t i = 0; i < size_; ++i) {
    for (uint64_t l = 0; l < 256; ++l) state[l] = l;
    uint64_t power = 1;
    for (const char c : identities[i]) {
      const auto b = static_cast<uint8_t>(c);
      for (uint64_t& h : state) h = Fnv1aUpdateByte(h, b);
      power *= kFnvPrime;
    }
    for (uint64_t& h : state) h = Fnv1aUpdateByte(h, 0xFF);
    power *= kFnvPrime;
    power_[i] = power;
    for (uint64_t l = 0; l < 256; ++l) {
      offset_[l * size_ + i] = state[l] - l * power;
    }
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
