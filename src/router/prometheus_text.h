// The policies' statistics as Prometheus text exposition format 0.0.4
// (grpc_lb::PrometheusText(); docs/metrics.md lists the metrics).
#ifndef POISE_SRC_ROUTER_PROMETHEUS_TEXT_H_
#define POISE_SRC_ROUTER_PROMETHEUS_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "src/router/stats_registry.h"

namespace poise::router {

// `snapshot` as exposition text. Series are keyed by the stats label
// (label "channel") and the backend identity (label "backend"), as
// EscapeLabelValue writes them: channels sharing a label are added together,
// the label's retired counters to its channel totals, and the folded totals
// of gone channels (MetricsSnapshot::gone) are the channel series
// channel="". Request keys never appear.
std::string PrometheusText(const MetricsSnapshot& snapshot);

// `value` as a label value is written: well-formed UTF-8 whatever its bytes
// (the format requires UTF-8), each byte that is not part of a well-formed
// sequence replaced by U+FFFD, and backslash, double quote and line feed
// escaped. Every other character, NUL included, is written as it is.
std::string EscapeLabelValue(std::string_view value);

// `ns` nanoseconds as a decimal number of seconds, exact: 500000 -> "0.0005",
// 2500000000 -> "2.5".
std::string SecondsText(uint64_t ns);

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_PROMETHEUS_TEXT_H_
