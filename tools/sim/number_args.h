// The number options of poise-sim's --fleet and --zones modes: all of
// `text` as a decimal (strtoull, strtod) within [min, max].
#ifndef POISE_TOOLS_SIM_NUMBER_ARGS_H_
#define POISE_TOOLS_SIM_NUMBER_ARGS_H_

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace poise_sim {

inline bool ParseUint(std::string_view text, uint64_t min, uint64_t max,
                      uint64_t* out) {
  const std::string s(text);
  char* end = nullptr;
  const uint64_t v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

inline bool ParseDouble(std::string_view text, double min, double max,
                        double* out) {
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !(v >= min && v <= max)) return false;
  *out = v;
  return true;
}

}  // namespace poise_sim

#endif  // POISE_TOOLS_SIM_NUMBER_ARGS_H_
