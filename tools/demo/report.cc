#include "report.h"

#include <cinttypes>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "workload.h"

namespace poise_demo {
namespace {

// a / b, 0 when b is 0.
double Ratio(uint64_t a, uint64_t b) {
  return b == 0 ? 0 : static_cast<double>(a) / static_cast<double>(b);
}

// ---------------------------------------------------------------------------
// Text.

std::string Failures(const std::map<int, uint64_t>& failures,
                     const std::map<int, std::string>& messages) {
  std::vector<std::string> parts;
  for (const auto& [code, n] : failures) {
    auto m = messages.find(code);
    parts.push_back(absl::StrCat(n, " with status ", code, ": \"",
                                 m == messages.end() ? "" : m->second, "\""));
  }
  return parts.empty() ? ""
                       : absl::StrCat(" (", absl::StrJoin(parts, ", "), ")");
}

void PrintTable(const PolicyReport& r) {
  std::printf("  %-7s  %-16s  %6s  %7s  %6s  %8s  %14s  %8s  %5s  %9s  %10s\n",
              "backend", "address", "weight", "calls", "share", "(weight)",
              "peak in-flight", "(server)", "keys", "only here", "spilled in");
  for (const BackendRow& row : r.rows) {
    std::printf(
        "  %-7s  %-16s  %6s  %7s  %5.1f%%  (%5.1f%%)  %14s  %8s  %5s  %9s  "
        "%10s\n",
        row.id.c_str(), row.address.c_str(), absl::StrCat(row.weight).c_str(),
        absl::StrCat(row.calls).c_str(), row.share * 100,
        row.weight_share * 100,
        r.have_stats ? absl::StrCat(row.peak_in_flight).c_str() : "-",
        absl::StrCat(row.server_peak_in_flight).c_str(),
        absl::StrCat(row.distinct_keys).c_str(),
        absl::StrCat(row.keys_only_here).c_str(),
        r.have_stats ? absl::StrCat(row.spilled_in).c_str() : "-");
  }
}

// Affinity, where the hot key went, and the spill rate.
void PrintKeys(const PolicyReport& r) {
  std::printf(
      "  affinity: %" PRIu64 " of %" PRIu64
      " keys stayed on one backend (%.1f%%); of the %" PRIu64
      " keys called more than once, %.1f%%; %.1f%% of calls went to their "
      "key's usual backend\n",
      r.keys_on_one, r.distinct_keys,
      Ratio(r.keys_on_one, r.distinct_keys) * 100, r.repeat_keys,
      Ratio(r.repeat_keys_on_one, r.repeat_keys) * 100,
      Ratio(r.home_calls, r.ok) * 100);
  std::vector<std::string> hot;
  uint64_t hot_total = 0;
  for (uint64_t c : r.hot_calls) hot_total += c;
  for (size_t b = 0; b < r.hot_calls.size(); ++b) {
    if (r.hot_calls[b] == 0) continue;
    hot.push_back(absl::StrFormat("%s %.0f%%", r.rows[b].id,
                                  Ratio(r.hot_calls[b], hot_total) * 100));
  }
  std::printf("  hot key \"%s\": %" PRIu64 " calls -> %s\n", kHotKey, hot_total,
              absl::StrJoin(hot, ", ").c_str());
  if (r.have_stats) {
    std::printf("  spill rate: %.1f%% (%" PRIu64 " of %" PRIu64
                " picks went past a full owner)\n",
                Ratio(r.spills, r.picks) * 100, r.spills, r.picks);
  } else if (IsPoise(r.policy)) {
    std::printf("  spill rate: n/a (no statistics for this channel)\n");
  } else {
    std::printf(
        "  spill rate: n/a (round_robin ignores keys; peak in-flight is "
        "the backends' own count)\n");
  }
}

void PrintStop(const PolicyReport& r, const StopReport& s) {
  std::vector<std::string> to;
  for (size_t b = 0; b < s.moved_to.size(); ++b) {
    if (s.moved_to[b] > 0) {
      to.push_back(absl::StrCat(r.rows[b].id, " ", s.moved_to[b]));
    }
  }
  std::printf("  stop %s (weight %" PRIu64 ") with traffic running: %" PRIu64
              " of %" PRIu64
              " calls failed in the first %.1f s; then %.1f s, %" PRIu64
              " calls, %" PRIu64 " failed, %" PRIu64 " answered by %s\n",
              s.backend.c_str(), s.weight, s.switch_failed, s.switch_sent,
              kSettleSeconds, s.after_seconds, s.after_sent, s.after_failed,
              s.after_calls_on_stopped, s.backend.c_str());
  std::printf("  calls lost by the stop: %" PRIu64
              " without a retryPolicy; stopped again with the "
              "recommended retryPolicy: %" PRIu64 " of %" PRIu64
              " calls lost\n",
              s.switch_failed, s.retry_failed, s.retry_sent);
  std::printf("  keys moved: %" PRIu64 " of %" PRIu64
              " keys seen before and after: %" PRIu64 " of %s's %" PRIu64
              " keys (-> %s), %" PRIu64 " of the other backends' %" PRIu64 "\n",
              s.moved, s.keys_compared, s.moved_from_stopped, s.backend.c_str(),
              s.stopped_keys,
              to.empty() ? "none" : absl::StrJoin(to, ", ").c_str(),
              s.moved_from_others, s.keys_compared - s.stopped_keys);
}

void PrintPolicy(const Options& opt, const PolicyReport& r) {
  std::printf("\n== %s", PolicyName(r.policy));
  if (r.policy == Policy::kBounded) {
    std::printf(" (balance factor %" PRIu64 "%%)", opt.factor);
  }
  std::printf(": %" PRIu64 " calls in %.1f s, %" PRIu64 " failed%s\n", r.sent,
              r.seconds, r.failed,
              Failures(r.failures, r.failure_messages).c_str());
  PrintTable(r);
  PrintKeys(r);
  if (r.stop.has_value()) PrintStop(r, *r.stop);
}

// ---------------------------------------------------------------------------
// JSON.

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// The "backends" and "workload" members: what every policy was given.
std::string SetupJson(const Options& opt, const BackendSet& set) {
  std::vector<std::string> backends;
  for (size_t i = 0; i < set.size(); ++i) {
    backends.push_back(
        absl::StrCat("{\"id\":", JsonString(set.backend(i).id()),
                     ",\"address\":", JsonString(set.backend(i).address()),
                     ",\"weight\":", opt.weights[i], "}"));
  }
  std::string out =
      absl::StrCat("\"backends\":[", absl::StrJoin(backends, ","), "]");
  absl::StrAppend(
      &out, R"(,"workload":{"keys":)", opt.keys,
      ",\"hot_key\":", JsonString(kHotKey), ",\"hot_share\":", kHotShare,
      ",\"zipf_exponent\":", kZipfExponent, ",\"seed\":", kSeed,
      ",\"concurrency\":", opt.concurrency, ",\"delay_ms\":", opt.delay_ms,
      ",\"duration_s\":", opt.duration, ",\"warmup_s\":", kWarmupSeconds,
      ",\"balance_factor_percent\":", opt.factor, "}");
  return out;
}

// The "backends" and "hot_key_calls" members of a policy.
std::string RowsJson(const PolicyReport& r) {
  std::vector<std::string> rows, hot;
  for (size_t b = 0; b < r.rows.size(); ++b) {
    const BackendRow& row = r.rows[b];
    std::string j = absl::StrCat(
        "{\"id\":", JsonString(row.id),
        ",\"address\":", JsonString(row.address), ",\"weight\":", row.weight,
        ",\"weight_share\":", row.weight_share, ",\"calls\":", row.calls,
        ",\"share\":", row.share,
        ",\"server_peak_in_flight\":", row.server_peak_in_flight,
        ",\"server_calls\":", row.server_calls,
        ",\"distinct_keys\":", row.distinct_keys,
        ",\"keys_only_here\":", row.keys_only_here);
    if (r.have_stats) {
      absl::StrAppend(&j, ",\"peak_in_flight\":", row.peak_in_flight,
                      ",\"spilled_in\":", row.spilled_in);
    }
    rows.push_back(j + "}");
    hot.push_back(absl::StrCat(JsonString(row.id), ":", r.hot_calls[b]));
  }
  return absl::StrCat(",\"backends\":[", absl::StrJoin(rows, ","), "]",
                      ",\"hot_key_calls\":{", absl::StrJoin(hot, ","), "}");
}

// The "stop" member of a policy.
std::string StopJson(const PolicyReport& r, const StopReport& s) {
  std::vector<std::string> to;
  for (size_t b = 0; b < s.moved_to.size(); ++b) {
    to.push_back(absl::StrCat(JsonString(r.rows[b].id), ":", s.moved_to[b]));
  }
  return absl::StrCat(
      R"(,"stop":{"backend":)", JsonString(s.backend), ",\"weight\":", s.weight,
      ",\"settle_s\":", kSettleSeconds, ",\"after_s\":", s.after_seconds,
      ",\"switch_calls_sent\":", s.switch_sent,
      ",\"switch_calls_failed\":", s.switch_failed,
      ",\"after_calls_sent\":", s.after_sent,
      ",\"after_calls_failed\":", s.after_failed,
      ",\"after_calls_on_stopped\":", s.after_calls_on_stopped,
      ",\"keys_compared\":", s.keys_compared,
      ",\"stopped_backend_keys\":", s.stopped_keys, ",\"keys_moved\":", s.moved,
      ",\"moved_from_stopped\":", s.moved_from_stopped,
      ",\"moved_from_others\":", s.moved_from_others, ",\"moved_to\":{",
      absl::StrJoin(to, ","), "}", ",\"retry_calls_sent\":", s.retry_sent,
      ",\"retry_calls_failed\":", s.retry_failed, "}");
}

std::string PolicyJson(const PolicyReport& r) {
  std::string p =
      absl::StrCat("{\"policy\":", JsonString(PolicyName(r.policy)),
                   ",\"label\":", JsonString(r.label),
                   ",\"seconds\":", r.seconds, ",\"calls_sent\":", r.sent,
                   ",\"calls_ok\":", r.ok, ",\"calls_failed\":", r.failed,
                   ",\"statistics\":", r.have_stats ? "true" : "false");
  if (r.have_stats) {
    absl::StrAppend(&p, ",\"picks\":", r.picks, ",\"spills\":", r.spills,
                    ",\"spill_rate\":", Ratio(r.spills, r.picks),
                    ",\"missing_key\":", r.missing_key,
                    ",\"failed_picks\":", r.failed_picks);
  }
  absl::StrAppend(&p, ",\"distinct_keys\":", r.distinct_keys,
                  ",\"keys_on_one_backend\":", r.keys_on_one,
                  ",\"keys_on_multiple_backends\":", r.keys_on_many,
                  ",\"affinity_rate\":", Ratio(r.keys_on_one, r.distinct_keys),
                  ",\"repeat_keys\":", r.repeat_keys,
                  ",\"repeat_keys_on_one_backend\":", r.repeat_keys_on_one,
                  ",\"home_calls\":", r.home_calls,
                  ",\"home_call_rate\":", Ratio(r.home_calls, r.ok));
  absl::StrAppend(&p, RowsJson(r));
  if (r.stop.has_value()) absl::StrAppend(&p, StopJson(r, *r.stop));
  return p + "}";
}

}  // namespace

void PrintText(const Options& opt, const BackendSet& set,
               const std::vector<PolicyReport>& reports) {
  std::printf(
      "poise-demo: %zu backends on 127.0.0.1, weights %s; workload: %zu "
      "Zipf keys + hot key \"%s\" (%.0f%% of calls), %zu calls in flight, "
      "%u ms server delay, %.1f s per policy after %.1f s warm-up\n",
      set.size(), absl::StrJoin(opt.weights, ",").c_str(), opt.keys, kHotKey,
      kHotShare * 100, opt.concurrency, opt.delay_ms, opt.duration,
      kWarmupSeconds);
  for (const PolicyReport& r : reports) PrintPolicy(opt, r);
}

void PrintJson(const Options& opt, const BackendSet& set,
               const std::vector<PolicyReport>& reports) {
  std::vector<std::string> policies;
  policies.reserve(reports.size());
  for (const PolicyReport& r : reports) policies.push_back(PolicyJson(r));
  const std::string out =
      absl::StrCat("{", SetupJson(opt, set), ",\"policies\":[",
                   absl::StrJoin(policies, ","), "]}");
  std::printf("%s\n", out.c_str());
}

}  // namespace poise_demo
