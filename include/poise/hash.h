// The Poise hash contract, shared bit for bit with the Rust library poise-core.
//
// For a request key and a backend identity:
//   h = FNV-1a-64 over 0x00 ‖ key ‖ 0xFF ‖ 0x01 ‖ identity ‖ 0xFF
//   z = Mix64(h)               (SplitMix64 finaliser, no gamma add)
//   s = (z >> 11) + 1          (1 <= s <= 2^53, exact as a double)
//   ln U = LnUnit(z)           (13-term series, basic IEEE operations only)
//   score = -ln U / weight     (the smallest score wins)
// The framing is how Rust's `Hash` writes a tagged pair of `str` values, so a
// Rust router and these clients agree on every key's owner.
#ifndef POISE_HASH_H_
#define POISE_HASH_H_

#include <cstdint>
#include <string_view>

namespace poise {

inline constexpr uint64_t kFnvOffsetBasis = 0xcbf29ce484222325ULL;
inline constexpr uint64_t kFnvPrime = 0x100000001b3ULL;

// Continues an FNV-1a-64 state over `bytes`.
constexpr uint64_t Fnv1aUpdate(uint64_t state, std::string_view bytes) {
  for (char c : bytes) {
    state ^= static_cast<uint8_t>(c);
    state *= kFnvPrime;
  }
  return state;
}

constexpr uint64_t Fnv1aUpdateByte(uint64_t state, uint8_t byte) {
  return (state ^ byte) * kFnvPrime;
}

// FNV-1a-64 of `bytes` from the standard offset basis.
constexpr uint64_t Fnv1a(std::string_view bytes) {
  return Fnv1aUpdate(kFnvOffsetBasis, bytes);
}

// SplitMix64's avalanche finaliser (a bijection on 64-bit values).
constexpr uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The FNV state after 0x00 ‖ key ‖ 0xFF ‖ 0x01: computed once per request and
// reused for every candidate.
class KeyHash final {
 public:
  explicit constexpr KeyHash(std::string_view key)
      : state_(Fnv1aUpdateByte(
            Fnv1aUpdateByte(
                Fnv1aUpdate(Fnv1aUpdateByte(kFnvOffsetBasis, 0x00), key), 0xFF),
            0x01)) {}

  constexpr uint64_t state() const { return state_; }

  // z for one candidate identity: Mix64(FNV over ... ‖ identity ‖ 0xFF).
  constexpr uint64_t Mixed(std::string_view identity) const {
    return Mix64(Fnv1aUpdateByte(Fnv1aUpdate(state_, identity), 0xFF));
  }

 private:
  uint64_t state_;
};

// ln U for the mixed hash z, computed exactly as the contract specifies
// (no libm, no FMA). Always in [-53 ln 2, 0].
double LnUnit(uint64_t z);

// The race score -ln U / weight. `weight` must be positive.
double Score(uint64_t z, uint32_t weight);

}  // namespace poise

#endif  // POISE_HASH_H_
