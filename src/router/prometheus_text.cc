#include "src/router/prometheus_text.h"

#include <array>
#include <cstddef>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "src/router/utf8_text.h"

namespace poise::router {
namespace {

constexpr size_t kStates = 5;  // Connectivity's values, 0 to 4

// Appends `parts` (strings, views, C strings) to `out`.
template <typename... Parts>
void Append(std::string& out, const Parts&... parts) {
  (out.append(parts), ...);
}

// Connectivity's index from its name; kStates for none.
size_t StateIndex(std::string_view name) {
  for (size_t i = 0; i < kStates; ++i) {
    if (name == ToString(static_cast<Connectivity>(i))) return i;
  }
  return kStates;
}

// One (label, identity)'s series: its channels' backends added together.
struct BackendSeries {
  // How many of the label's channels see the backend in each state.
  std::array<uint64_t, kStates> states{};
  grpc_lb::CallStats calls;
  uint64_t picks = 0;
  uint64_t admission_refusals = 0;
  std::string labels;  // channel="...",backend="...", escaped once
};

// One label's series.
struct ChannelSeries {
  std::array<uint64_t, kStates> states{};         // of its live channels
  grpc_lb::ChannelStats counters;                 // live and retired, added
  std::map<std::string, BackendSeries> backends;  // by escaped identity
  std::string labels;                             // channel="...", escaped
};

// By label value as written: labels (and a label's identities) that differ
// only in bytes EscapeLabelValue replaces are one series, not two series
// with the same labels.
std::map<std::string, ChannelSeries> ByLabel(const MetricsSnapshot& snapshot) {
  std::map<std::string, ChannelSeries> out;
  if (snapshot.any_gone) {
    AddChannelCounters(snapshot.gone, out[std::string()].counters);
  }
  for (const grpc_lb::ChannelStats& retired : snapshot.retired) {
    AddChannelCounters(retired, out[EscapeLabelValue(retired.label)].counters);
  }
  for (const grpc_lb::ChannelStats& channel : snapshot.live) {
    ChannelSeries& series = out[EscapeLabelValue(channel.label)];
    AddChannelCounters(channel, series.counters);
    if (const size_t s = StateIndex(channel.connectivity); s < kStates) {
      ++series.states[s];
    }
    for (const grpc_lb::BackendStats& backend : channel.backends) {
      BackendSeries& b = series.backends[EscapeLabelValue(backend.identity)];
      if (const size_t s = StateIndex(backend.connectivity); s < kStates) {
        ++b.states[s];
      }
      AddCallStats(backend.calls, b.calls);
      b.picks += backend.picks;
      b.admission_refusals += backend.admission_refusals;
    }
  }
  for (auto& [label, series] : out) {
    series.labels = "channel=\"" + label + "\"";
    for (auto& [identity, b] : series.backends) {
      b.labels = series.labels + ",backend=\"" + identity + "\"";
    }
  }
  return out;
}

// Writes families and their samples. A sample's labels are the series'
// labels (already written: `channel="...",backend="..."`) and at most one
// more.
class Writer {
 public:
  void Family(std::string_view name, std::string_view type,
              std::string_view help) {
    Append(text_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ", type,
           "\n");
  }

  void Sample(std::string_view name, std::string_view labels,
              std::string_view value) {
    Append(text_, name, "{", labels, "} ", value, "\n");
  }
  void Sample(std::string_view name, std::string_view labels,
              std::string_view extra_name, std::string_view extra_value,
              std::string_view value) {
    Append(text_, name, "{", labels, ",", extra_name, "=\"", extra_value,
           "\"} ", value, "\n");
  }

  // One series of a state gauge: a sample per state.
  void States(std::string_view name, std::string_view labels,
              const std::array<uint64_t, kStates>& states) {
    for (size_t i = 0; i < kStates; ++i) {
      Sample(name, labels, "state", ToString(static_cast<Connectivity>(i)),
             std::to_string(states[i]));
    }
  }

  // One series of calls by status: every code, or OK and the codes seen.
  void ByStatus(std::string_view name, std::string_view labels,
                const grpc_lb::CallStats& calls, bool every_code) {
    for (size_t code = 0; code < calls.by_status.size(); ++code) {
      if (!every_code && code != 0 && calls.by_status[code] == 0) continue;
      Sample(name, labels, "grpc_status",
             absl::StatusCodeToString(static_cast<absl::StatusCode>(code)),
             std::to_string(calls.by_status[code]));
    }
  }

  // One series of a duration histogram: cumulative buckets, +Inf, sum and
  // count (the +Inf bucket's, so the two agree by construction).
  void Durations(std::string_view name, std::string_view labels,
                 const grpc_lb::CallStats& calls) {
    const std::string bucket = std::string(name) + "_bucket";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < calls.duration_buckets.size(); ++i) {
      cumulative += calls.duration_buckets[i];
      const bool last = i == grpc_lb::kCallDurationBucketBoundsNs.size();
      Sample(
          bucket, labels, "le",
          last ? "+Inf" : SecondsText(grpc_lb::kCallDurationBucketBoundsNs[i]),
          std::to_string(cumulative));
    }
    Sample(std::string(name) + "_sum", labels,
           SecondsText(calls.duration_sum_ns));
    Sample(std::string(name) + "_count", labels, std::to_string(cumulative));
  }

  std::string Take() { return std::move(text_); }

 private:
  std::string text_;
};

// What a family's series hold.
enum class Kind : uint8_t { kState, kCalls, kDurations, kCount };

struct Family {
  const char* name;
  const char* type;
  const char* help;
  Kind kind;
  // kCount: which counter of a channel, or of a backend.
  uint64_t grpc_lb::ChannelStats::*count = nullptr;
  uint64_t BackendSeries::*backend_count = nullptr;
};

constexpr Family kBackendFamilies[] = {
    {"grpc_lb_poise_backend_state", "gauge",
     "The connectivity state the backend's subchannel last reported: 1 for "
     "that state, 0 for the others (channels sharing a label: how many of "
     "them see the backend in the state).",
     Kind::kState},
    {"grpc_lb_poise_attempts_total", "counter",
     "Calls routed to the backend that have ended, by gRPC status (OK and "
     "the codes seen).",
     Kind::kCalls},
    {"grpc_lb_poise_attempt_duration_seconds", "histogram",
     "Duration of the calls routed to the backend, from the pick to the "
     "status.",
     Kind::kDurations},
    {"grpc_lb_poise_picks_total", "counter", "Calls routed to the backend.",
     Kind::kCount, nullptr, &BackendSeries::picks},
    {"grpc_lb_poise_admission_refusals_total", "counter",
     "Calls the backend refused at the bound they carried "
     "(serverLoad.admission); not in the attempts.",
     Kind::kCount, nullptr, &BackendSeries::admission_refusals},
};

constexpr Family kChannelFamilies[] = {
    {"grpc_lb_poise_channel_state", "gauge",
     "The connectivity state the policy last reported for the channel: 1 for "
     "that state, 0 for the others (channels sharing a label: how many of "
     "them are in the state).",
     Kind::kState},
    {"grpc_lb_poise_channel_attempts_total", "counter",
     "Calls of the channel that have ended, to any backend, by gRPC status.",
     Kind::kCalls},
    {"grpc_lb_poise_channel_attempt_duration_seconds", "histogram",
     "Duration of the channel's calls, from the pick to the status.",
     Kind::kDurations},
    {"grpc_lb_poise_channel_picks_total", "counter", "Calls the policy routed.",
     Kind::kCount, &grpc_lb::ChannelStats::picks},
    {"grpc_lb_poise_channel_spills_total", "counter",
     "Calls routed past their key's full owner (bounded loads).", Kind::kCount,
     &grpc_lb::ChannelStats::spills},
    {"grpc_lb_poise_channel_failed_picks_total", "counter",
     "Calls the policy failed (maxInFlightPerBackend, missingKey FAIL): they "
     "reached no backend.",
     Kind::kCount, &grpc_lb::ChannelStats::failed_picks},
    {"grpc_lb_poise_channel_admission_refusals_total", "counter",
     "Calls refused by their backend at the bound they carried "
     "(serverLoad.admission); not in the attempts.",
     Kind::kCount, &grpc_lb::ChannelStats::admission_refusals},
    {"grpc_lb_poise_channel_zone_kept_total", "counter",
     "Calls routed to a backend of the channel's zone (localZone).",
     Kind::kCount, &grpc_lb::ChannelStats::zone_kept},
    {"grpc_lb_poise_channel_zone_out_total", "counter",
     "Calls routed out of the channel's zone: it had no READY backend, or "
     "none with room.",
     Kind::kCount, &grpc_lb::ChannelStats::zone_out},
};

// One series of `family`: a backend's (every_code false: OK and the codes
// seen) or a channel's (every code).
void WriteSeries(Writer& w, const Family& family, const std::string& labels,
                 const std::array<uint64_t, kStates>& states,
                 const grpc_lb::CallStats& calls, uint64_t count,
                 bool every_code) {
  switch (family.kind) {
    case Kind::kState:
      w.States(family.name, labels, states);
      break;
    case Kind::kCalls:
      w.ByStatus(family.name, labels, calls, every_code);
      break;
    case Kind::kDurations:
      w.Durations(family.name, labels, calls);
      break;
    case Kind::kCount:
      w.Sample(family.name, labels, std::to_string(count));
      break;
  }
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  ForEachUtf8Character(value, [&out](std::string_view character) {
    if (character == "\\") {
      out += "\\\\";
    } else if (character == "\"") {
      out += "\\\"";
    } else if (character == "\n") {
      out += "\\n";
    } else {
      out += character;
    }
  });
  return out;
}

std::string SecondsText(uint64_t ns) {
  constexpr uint64_t kNsPerSecond = 1'000'000'000;
  std::string out = std::to_string(ns / kNsPerSecond);
  uint64_t fraction = ns % kNsPerSecond;
  if (fraction == 0) return out;
  int digits = 9;
  while (fraction % 10 == 0) {
    fraction /= 10;
    --digits;
  }
  const std::string text = std::to_string(fraction);
  Append(out, ".", std::string(static_cast<size_t>(digits) - text.size(), '0'),
         text);
  return out;
}

std::string PrometheusText(const MetricsSnapshot& snapshot) {
  const std::map<std::string, ChannelSeries> channels = ByLabel(snapshot);
  Writer w;
  for (const Family& family : kBackendFamilies) {
    w.Family(family.name, family.type, family.help);
    for (const auto& [label, channel] : channels) {
      for (const auto& [identity, b] : channel.backends) {
        WriteSeries(
            w, family, b.labels, b.states, b.calls,
            family.backend_count != nullptr ? b.*family.backend_count : 0,
            /*every_code=*/false);
      }
    }
  }
  for (const Family& family : kChannelFamilies) {
    w.Family(family.name, family.type, family.help);
    for (const auto& [label, c] : channels) {
      WriteSeries(w, family, c.labels, c.states, c.counters.calls,
                  family.count != nullptr ? c.counters.*family.count : 0,
                  /*every_code=*/true);
    }
  }
  return w.Take();
}

}  // namespace poise::router
