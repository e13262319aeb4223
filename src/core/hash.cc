// This file is compiled with -ffp-contract=off: a fused multiply-add would
// change the last bits of the logarithm and break agreement with poise-core.
#include "poise/hash.h"

namespace poise {

double LnUnit(uint64_t z) {
  constexpr double kLn2 = 0.6931471805599453;
  const uint64_t s = (z >> 11) + 1;       // 1 <= s <= 2^53
  const int e = 63 - __builtin_clzll(s);  // floor(log2 s); s is never zero
  // s / 2^e is exact: both are representable and the quotient has <= 53 bits.
  const double m =
      static_cast<double>(s) / static_cast<double>(uint64_t{1} << e);
  const double t = (m - 1.0) / (m + 1.0);
  const double t2 = t * t;
  double sum = 0.0;
  double term = t;
  for (int i = 0; i < 13; ++i) {
    sum += term / static_cast<double>(2 * i + 1);
    term *= t2;
  }
  return 2.0 * sum - static_cast<double>(53 - e) * kLn2;
}

double Score(uint64_t z, uint32_t weight) {
  return -LnUnit(z) / static_cast<double>(weight);
}

}  // namespace poise
