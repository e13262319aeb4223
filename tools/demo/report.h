// The figures of one policy's run and their two printed forms: the tables
// (the default) and one JSON object (--json).
#ifndef POISE_TOOLS_DEMO_REPORT_H_
#define POISE_TOOLS_DEMO_REPORT_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends.h"
#include "options.h"
#include "policies.h"

namespace poise_demo {

struct BackendRow {
  std::string id, address;
  uint64_t weight = 0;
  double weight_share = 0;
  uint64_t calls = 0;
  double share = 0;
  uint64_t peak_in_flight = 0;         // library statistics (poise policies)
  uint64_t server_peak_in_flight = 0;  // the backend's own count
  uint64_t server_calls = 0;
  uint64_t distinct_keys = 0, keys_only_here = 0;
  uint64_t spilled_in = 0;
};

struct StopReport {
  std::string backend;
  uint64_t weight = 0;
  uint64_t switch_sent = 0, switch_failed = 0;
  uint64_t after_sent = 0, after_failed = 0;
  uint64_t after_calls_on_stopped = 0;
  uint64_t keys_compared = 0, stopped_keys = 0;
  uint64_t moved = 0, moved_from_stopped = 0, moved_from_others = 0;
  std::vector<uint64_t> moved_to;  // per backend
  double after_seconds = 0;
  // The same stop again, on a channel with the recommended retryPolicy.
  uint64_t retry_sent = 0, retry_failed = 0;
};

struct PolicyReport {
  Policy policy = Policy::kRoundRobin;
  std::string label;
  double seconds = 0;
  uint64_t sent = 0, ok = 0, failed = 0;
  std::map<int, uint64_t> failures;
  std::map<int, std::string> failure_messages;
  bool have_stats = false;
  uint64_t picks = 0, spills = 0, missing_key = 0, failed_picks = 0;
  std::vector<BackendRow> rows;
  uint64_t distinct_keys = 0, keys_on_one = 0, keys_on_many = 0;
  uint64_t repeat_keys = 0, repeat_keys_on_one = 0;
  uint64_t home_calls = 0;  // calls served by their key's busiest backend
  std::vector<uint64_t> hot_calls;  // per backend
  std::optional<StopReport> stop;
};

void PrintText(const Options& opt, const BackendSet& set,
               const std::vector<PolicyReport>& reports);
void PrintJson(const Options& opt, const BackendSet& set,
               const std::vector<PolicyReport>& reports);

}  // namespace poise_demo

#endif  // POISE_TOOLS_DEMO_REPORT_H_
