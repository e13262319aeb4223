// The rule for an ORCA utilization key that poise reports and reads (the
// client's serverLoad.metric, the server's LoadReportOptions::metric_name),
// in one place so that a server can never report a name no client accepts.
#ifndef POISE_SRC_CORE_METRIC_NAME_H_
#define POISE_SRC_CORE_METRIC_NAME_H_

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace poise::internal {

inline constexpr size_t kMaxMetricNameLength = 64;

// 1 to 64 printable ASCII characters, no spaces.
inline bool IsMetricName(std::string_view name) {
  return !name.empty() && name.size() <= kMaxMetricNameLength &&
         std::all_of(name.begin(), name.end(),
                     [](char c) { return c > ' ' && c <= '~'; });
}

// What IsMetricName requires, for error messages.
inline constexpr char kMetricNameRule[] =
    "must be 1 to 64 printable ASCII characters without spaces (an "
    "OrcaLoadReport.utilization key, like \"rif\")";

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_METRIC_NAME_H_
