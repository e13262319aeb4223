// The bounded-load rule, in one place (the contract's K7, and K9 with a
// given total). With L the calls in flight that the bounds count, W the
// eligible weights' sum and f the balance factor in percent, a backend of
// weight w has room while
//
//   load < ceil(f (L + 1) w / (100 W)).
//
// Every path of the core and the router's slot check ask a Bound; none
// writes the rule again. The idea is from Mirrokni, Thorup and Zadimoghaddam,
// "Consistent Hashing with Bounded Loads" (SODA 2018), here over weighted
// rendezvous hashing and live in-flight counts.
#ifndef POISE_BOUND_H_
#define POISE_BOUND_H_

#include <cstdint>

#include "poise/types.h"

namespace poise {

class Bound final {
 public:
  // A bound that admits nothing (a placeholder until one is computed).
  Bound() = default;

  // Requires total_load < 2^64 - 1 (L + 1 fits) and 0 < total_weight;
  // weight may be anything below 2^32. Exact for every such input:
  // f < 2^32, L + 1 < 2^64 and w < 2^32, so f (L + 1) w < 2^128.
  Bound(uint32_t factor_percent, uint64_t total_load, uint32_t weight,
        uint64_t total_weight) {
    const UInt128 numerator =
        UInt128{factor_percent} * (UInt128{total_load} + 1) * weight;
    if (total_weight <= UINT64_MAX / 100) {
      numerator_ = numerator;
      denominator_ = uint64_t{100} * total_weight;
    } else {
      // 100 W past 64 bits (tens of millions of heavy backends): load * 100 W
      // could pass 2^128, so keep the capacity itself (load < c is
      // load * 1 < c). Rare enough for the division.
      numerator_ = Ceil(numerator, UInt128{100} * total_weight);
      denominator_ = 1;
    }
  }

  // load < capacity, without the division: for an integer load,
  // load < ceil(a / b) <=> load * b < a, and load * b < 2^128.
  bool HasRoom(uint64_t load) const {
    return UInt128{load} * denominator_ < numerator_;
  }

  // ceil(f (L + 1) w / (100 W)), exact. 64-bit division where everything
  // fits (several times cheaper than the 128-bit library call).
  UInt128 Capacity() const {
    if ((numerator_ >> 64) == 0) {
      const auto n = static_cast<uint64_t>(numerator_);
      return n / denominator_ + (n % denominator_ != 0 ? 1 : 0);
    }
    return Ceil(numerator_, denominator_);
  }

 private:
  static UInt128 Ceil(UInt128 a, UInt128 b) {
    return a / b + (a % b != 0 ? 1 : 0);
  }

  UInt128 numerator_ = 0;
  uint64_t denominator_ = 1;
};

}  // namespace poise

#endif  // POISE_BOUND_H_
