#include "analysis.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace poise_demo {
namespace {

// The rows' columns that do not come from the call log.
std::vector<BackendRow> Rows(const Options& opt, const BackendSet& set,
                             bool have_stats, const PoiseStats& before,
                             const PoiseStats& after,
                             const ServerCounters& server) {
  uint64_t total_weight = 0;
  for (uint64_t w : opt.weights) total_weight += w;
  std::vector<BackendRow> rows(set.size());
  for (size_t b = 0; b < set.size(); ++b) {
    BackendRow& row = rows[b];
    row.id = set.backend(b).id();
    row.address = set.backend(b).address();
    row.weight = opt.weights[b];
    row.weight_share =
        static_cast<double>(row.weight) / static_cast<double>(total_weight);
    row.server_calls = server.calls[b];
    row.server_peak_in_flight = server.peaks[b];
    if (have_stats) {
      row.peak_in_flight = after.peak_in_flight[b];
      row.spilled_in = after.spilled_in[b] - before.spilled_in[b];
    }
  }
  return rows;
}

// Adds the phase's calls to the rows and counts where each key went.
void CountKeys(const Options& opt, const PhaseLog& p, PolicyReport* r) {
  const size_t nb = r->rows.size();
  r->hot_calls.assign(nb, 0);
  for (size_t key = 0; key <= opt.keys; ++key) {
    uint64_t key_calls = 0, backends_used = 0, most = 0;
    size_t only = 0;
    for (size_t b = 0; b < nb; ++b) {
      const uint32_t c = p.calls[key * nb + b];
      if (c == 0) continue;
      key_calls += c;
      most = std::max<uint64_t>(most, c);
      ++backends_used;
      only = b;
      r->rows[b].calls += c;
      ++r->rows[b].distinct_keys;
      if (key == opt.keys) r->hot_calls[b] = c;
    }
    if (key_calls == 0) continue;
    ++r->distinct_keys;
    r->home_calls += most;
    if (backends_used == 1) {
      ++r->keys_on_one;
      ++r->rows[only].keys_only_here;
    } else {
      ++r->keys_on_many;
    }
    if (key_calls >= 2) {
      ++r->repeat_keys;
      if (backends_used == 1) ++r->repeat_keys_on_one;
    }
  }
}

// The backend that served most of the key's calls in the phase, or -1.
int Home(const PhaseLog& p, size_t key, size_t nb) {
  int best = -1;
  uint32_t most = 0;
  for (size_t b = 0; b < nb; ++b) {
    if (p.calls[key * nb + b] > most) {
      most = p.calls[key * nb + b];
      best = static_cast<int>(b);
    }
  }
  return best;
}

}  // namespace

PolicyReport Analyse(const Options& opt, const BackendSet& set, Policy policy,
                     const RunLog& log, double seconds,
                     const PoiseStats& before, const PoiseStats& after,
                     const ServerCounters& server) {
  const PhaseLog& p = log.phase[kMain];
  PolicyReport r;
  r.policy = policy;
  r.seconds = seconds;
  r.sent = p.sent;
  r.ok = p.ok;
  r.failed = p.failed;
  r.failures = p.failures;
  r.failure_messages = p.messages;
  r.have_stats = IsPoise(policy) && before.found && after.found;
  if (r.have_stats) {
    r.picks = after.picks - before.picks;
    r.spills = after.spills - before.spills;
    r.missing_key = after.missing_key - before.missing_key;
    r.failed_picks = after.failed_picks - before.failed_picks;
  }
  r.rows = Rows(opt, set, r.have_stats, before, after, server);
  CountKeys(opt, p, &r);
  for (auto& row : r.rows) {
    row.share =
        r.ok == 0 ? 0
                  : static_cast<double>(row.calls) / static_cast<double>(r.ok);
  }
  return r;
}

StopReport AnalyseStop(const Options& opt, const BackendSet& set,
                       const RunLog& log, size_t stopped,
                       double after_seconds) {
  const size_t nb = set.size();
  StopReport s;
  s.backend = set.backend(stopped).id();
  s.weight = opt.weights[stopped];
  s.after_seconds = after_seconds;
  s.switch_sent = log.phase[kSwitch].sent;
  s.switch_failed = log.phase[kSwitch].failed;
  s.after_sent = log.phase[kAfter].sent;
  s.after_failed = log.phase[kAfter].failed;
  s.moved_to.assign(nb, 0);
  for (size_t key = 0; key <= opt.keys; ++key) {
    s.after_calls_on_stopped += log.phase[kAfter].calls[key * nb + stopped];
    const int was = Home(log.phase[kMain], key, nb);
    const int now = Home(log.phase[kAfter], key, nb);
    if (was < 0 || now < 0) continue;
    ++s.keys_compared;
    const bool on_stopped = static_cast<size_t>(was) == stopped;
    if (on_stopped) ++s.stopped_keys;
    if (was == now) continue;
    ++s.moved;
    ++s.moved_to[static_cast<size_t>(now)];
    if (on_stopped) {
      ++s.moved_from_stopped;
    } else {
      ++s.moved_from_others;
    }
  }
  return s;
}

}  // namespace poise_demo
