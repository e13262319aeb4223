// poise-demo: the whole idea on localhost, from real RPCs.
//
// Starts N echo backends with weights, then drives the same key workload
// (Zipf-like popularity plus one hot key, with concurrency and a small
// server-side delay so in-flight counts are real) through one channel per
// policy: bounded_load_rendezvous, weighted_rendezvous and gRPC's round_robin.
// For the two rendezvous channels it then stops one backend while the traffic
// keeps flowing and reports which keys moved and where to, and how many
// calls the stop lost without a retryPolicy and with the recommended one
// (examples/retry_service_config.json; README "Drains, crashes and retries").
//
//   poise-demo [--backends N] [--weights a,b,...] [--factor PCT]
//              [--duration SECONDS] [--keys N] [--concurrency N]
//              [--delay-ms MS] [--stop INDEX] [--json]
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "backend.h"
#include "echo.grpc.pb.h"
#include "poise/grpc_lb.h"

namespace {

using Clock = std::chrono::steady_clock;
using poise::example::BackendSet;

constexpr char kHashHeader[] = "x-session-id";
constexpr char kHotKey[] = "hot-user";
constexpr double kHotShare = 0.25;     // of all calls
constexpr double kZipfExponent = 1.0;  // popularity of the other keys
constexpr uint64_t kSeed = 20240601;
constexpr size_t kSequenceLength = size_t{1} << 18;
constexpr double kWarmupSeconds = 0.5;
constexpr double kSettleSeconds = 0.5;
// Far above any --concurrency, so never reached: with it weighted_rendezvous
// counts in-flight calls too, and the statistics show its peaks.
constexpr int kMaxInFlight = 1000;

// ---------------------------------------------------------------------------
// Options.

struct Options {
  size_t backends = 5;
  std::vector<uint64_t> weights;  // defaults to 1,1,2,3,5 repeated
  uint64_t factor = 150;
  double duration = 4.0;  // seconds of measured traffic per policy
  size_t keys = 1000;
  size_t concurrency = 16;
  uint32_t delay_ms = 2;
  std::optional<size_t> stop;  // backend to stop; default backends / 2
  bool json = false;
};

int Usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "poise-demo: %s\n", why);
  std::fprintf(
      stderr,
      "usage: poise-demo [--backends N] [--weights a,b,...] [--factor PCT]\n"
      "                  [--duration SECONDS] [--keys N] [--concurrency N]\n"
      "                  [--delay-ms MS] [--stop INDEX] [--json]\n"
      "  --backends N       backends to start on 127.0.0.1 (1..64, default "
      "5)\n"
      "  --weights a,b,...  one weight per backend (default 1,1,2,3,5, "
      "repeated)\n"
      "  --factor PCT       bounded_load_rendezvous balance factor (>= 100, "
      "default 150)\n"
      "  --duration S       measured seconds per policy (0.2..120, default "
      "4)\n"
      "  --keys N           distinct Zipf keys besides the hot key (default "
      "1000)\n"
      "  --concurrency N    calls in flight (1..256, default 16)\n"
      "  --delay-ms MS      server-side delay per call (0..1000, default 2)\n"
      "  --stop INDEX       backend stopped mid-run (default backends/2)\n"
      "  --json             print the figures as one JSON object\n");
  return 2;
}

bool ParseUint(const std::string& text, uint64_t lo, uint64_t hi,
               uint64_t* out) {
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < lo || value > hi) {
    return false;
  }
  *out = value;
  return true;
}

// Returns 0 on success, else the exit code.
int ParseOptions(int argc, char** argv, Options* opt) {
  bool backends_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      opt->json = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") return Usage(nullptr);
    static const char* const kValued[] = {
        "--backends", "--weights",     "--factor",   "--duration",
        "--keys",     "--concurrency", "--delay-ms", "--stop"};
    if (std::find(std::begin(kValued), std::end(kValued), arg) ==
        std::end(kValued)) {
      return Usage(("unknown option " + arg).c_str());
    }
    if (i + 1 >= argc) return Usage(("missing value for " + arg).c_str());
    const std::string value = argv[++i];
    uint64_t n = 0;
    if (arg == "--backends") {
      if (!ParseUint(value, 1, 64, &n)) return Usage("bad --backends");
      opt->backends = static_cast<size_t>(n);
      backends_given = true;
    } else if (arg == "--weights") {
      opt->weights.clear();
      for (absl::string_view part : absl::StrSplit(value, ',')) {
        if (!ParseUint(std::string{part}, 1, 1000000, &n)) {
          return Usage("bad --weights (positive integers, comma-separated)");
        }
        opt->weights.push_back(n);
      }
    } else if (arg == "--factor") {
      if (!ParseUint(value, 100, 100000, &n)) return Usage("bad --factor");
      opt->factor = n;
    } else if (arg == "--duration") {
      double d = 0;
      if (!absl::SimpleAtod(value, &d) || !(d >= 0.2 && d <= 120)) {
        return Usage("bad --duration");
      }
      opt->duration = d;
    } else if (arg == "--keys") {
      if (!ParseUint(value, 1, 1000000, &n)) return Usage("bad --keys");
      opt->keys = static_cast<size_t>(n);
    } else if (arg == "--concurrency") {
      if (!ParseUint(value, 1, 256, &n)) return Usage("bad --concurrency");
      opt->concurrency = static_cast<size_t>(n);
    } else if (arg == "--delay-ms") {
      if (!ParseUint(value, 0, 1000, &n)) return Usage("bad --delay-ms");
      opt->delay_ms = static_cast<uint32_t>(n);
    } else if (arg == "--stop") {
      if (!ParseUint(value, 0, 63, &n)) return Usage("bad --stop");
      opt->stop = static_cast<size_t>(n);
    } else {
      return Usage(("unknown option " + arg).c_str());
    }
  }
  if (!opt->weights.empty()) {
    if (!backends_given) opt->backends = opt->weights.size();
    if (opt->weights.size() != opt->backends) {
      return Usage("--weights needs one weight per backend");
    }
  } else {
    static constexpr uint64_t kDefault[] = {1, 1, 2, 3, 5};
    for (size_t i = 0; i < opt->backends; ++i) {
      opt->weights.push_back(kDefault[i % 5]);
    }
  }
  if (!opt->stop.has_value()) opt->stop = opt->backends / 2;
  if (*opt->stop >= opt->backends) return Usage("--stop is not a backend");
  return 0;
}

// ---------------------------------------------------------------------------
// The workload: a fixed pseudo-random sequence of key indices, the same for
// every policy. Index `keys` is the hot key.

std::vector<uint32_t> MakeSequence(size_t keys) {
  std::vector<double> cdf(keys);
  double total = 0;
  for (size_t r = 0; r < keys; ++r) {
    total += 1.0 / std::pow(static_cast<double>(r + 1), kZipfExponent);
    cdf[r] = total;
  }
  std::mt19937_64 rng(kSeed);
  auto uniform = [&rng] {
    return static_cast<double>(rng() >> 11) * 0x1.0p-53;
  };
  std::vector<uint32_t> sequence(kSequenceLength);
  for (uint32_t& entry : sequence) {
    if (uniform() < kHotShare) {
      entry = static_cast<uint32_t>(keys);
    } else {
      const double u = uniform() * total;
      entry = static_cast<uint32_t>(
          std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
      if (entry >= keys) entry = static_cast<uint32_t>(keys - 1);
    }
  }
  return sequence;
}

std::string KeyName(size_t index, size_t keys) {
  return index == keys ? std::string(kHotKey) : absl::StrCat("user-", index);
}

// ---------------------------------------------------------------------------
// Policies and their channels.

enum class Policy { kBounded, kWeighted, kRoundRobin };

const char* PolicyName(Policy p) {
  switch (p) {
    case Policy::kBounded:
      return "bounded_load_rendezvous";
    case Policy::kWeighted:
      return "weighted_rendezvous";
    case Policy::kRoundRobin:
      return "round_robin";
  }
  return "?";
}

bool IsPoise(Policy p) { return p != Policy::kRoundRobin; }

std::string ServiceConfig(Policy policy, const Options& opt,
                          const BackendSet& set) {
  if (!IsPoise(policy)) {
    return R"({"loadBalancingConfig":[{"round_robin":{}}]})";
  }
  std::vector<std::string> endpoints;
  for (size_t i = 0; i < set.size(); ++i) {
    endpoints.push_back(absl::StrFormat(
        R"({"address":"%s","weight":%d,"identity":"%s"})",
        set.backend(i).address(), opt.weights[i], set.backend(i).id()));
  }
  std::string fields = absl::StrCat(R"("hashHeader":")", kHashHeader, R"(")");
  if (policy == Policy::kBounded) {
    absl::StrAppend(&fields, R"(,"balanceFactorPercent":)", opt.factor);
  }
  absl::StrAppend(&fields, R"(,"endpoints":[)", absl::StrJoin(endpoints, ","),
                  R"(],"defaultWeight":1,"missingKey":"RANDOM")",
                  R"(,"maxInFlightPerBackend":)", kMaxInFlight);
  return absl::StrCat(R"({"loadBalancingConfig":[{")", PolicyName(policy),
                      R"(":{)", fields, "}}]}");
}

// The recommended retryPolicy of examples/retry_service_config.json, for the
// demo's service (README "Drains, crashes and retries" gives the reasons).
constexpr char kRetryMethodConfig[] =
    R"("methodConfig":[{"name":[{"service":"poise.example.Echo"}],)"
    R"("retryPolicy":{"maxAttempts":4,"initialBackoff":"0.01s",)"
    R"("maxBackoff":"0.1s","backoffMultiplier":2,)"
    R"("retryableStatusCodes":["UNAVAILABLE","CANCELLED"]}}])";

// `config` (an object) with the recommended retryPolicy added.
std::string WithRetryPolicy(const std::string& config) {
  return absl::StrCat(config.substr(0, config.rfind('}')), ",",
                      kRetryMethodConfig, "}");
}

// Per-channel statistics from the library, as counters we can subtract.
struct PoiseStats {
  bool found = false;
  uint64_t picks = 0, spills = 0, missing_key = 0, failed_picks = 0;
  // Indexed like the BackendSet.
  std::vector<uint64_t> picks_by_backend, spilled_in, peak_in_flight;
};

PoiseStats Snapshot(const std::string& label, const BackendSet& set) {
  PoiseStats out;
  out.picks_by_backend.assign(set.size(), 0);
  out.spilled_in.assign(set.size(), 0);
  out.peak_in_flight.assign(set.size(), 0);
  for (const auto& channel : poise::grpc_lb::StatsSnapshot()) {
    if (channel.label != label) continue;
    out.found = true;
    out.picks = channel.picks;
    out.spills = channel.spills;
    out.missing_key = channel.missing_key;
    out.failed_picks = channel.failed_picks;
    for (const auto& b : channel.backends) {
      int index = set.IndexOf(b.identity);
      for (size_t i = 0; index < 0 && i < set.size(); ++i) {
        const std::string address = set.backend(i).address();
        if (b.address == address ||
            absl::EndsWith(b.address, absl::StrCat(":", address))) {
          index = static_cast<int>(i);
        }
      }
      if (index < 0) continue;
      const auto i = static_cast<size_t>(index);
      out.picks_by_backend[i] = b.picks;
      out.spilled_in[i] = b.spilled_in;
      out.peak_in_flight[i] = b.peak_in_flight;
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Traffic.

enum Phase : int { kWarmup = 0, kMain = 1, kSwitch = 2, kAfter = 3 };
constexpr int kPhases = 4;
const char* PhaseName(int p) {
  static const char* const kNames[] = {"warm-up", "main", "stopping",
                                       "after stop"};
  return kNames[p];
}

struct PhaseLog {
  std::vector<uint32_t> calls;  // [key * backends + backend]
  uint64_t sent = 0, ok = 0, failed = 0;
  std::map<int, uint64_t> failures;     // by status code
  std::map<int, std::string> messages;  // the first message per status code
};

struct RunLog {
  PhaseLog phase[kPhases];
  void Init(size_t cells) {
    for (auto& p : phase) p.calls.assign(cells, 0);
  }
  void Merge(const RunLog& other) {
    for (int i = 0; i < kPhases; ++i) {
      PhaseLog& a = phase[i];
      const PhaseLog& b = other.phase[i];
      for (size_t c = 0; c < a.calls.size(); ++c) a.calls[c] += b.calls[c];
      a.sent += b.sent;
      a.ok += b.ok;
      a.failed += b.failed;
      for (const auto& [code, n] : b.failures) a.failures[code] += n;
      for (const auto& [code, m] : b.messages) a.messages.emplace(code, m);
    }
  }
};

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

class Runner {
 public:
  Runner(const Options& opt, BackendSet* set,
         const std::vector<uint32_t>* sequence)
      : opt_(opt), set_(set), sequence_(sequence) {
    for (size_t k = 0; k <= opt.keys; ++k) {
      key_names_.push_back(KeyName(k, opt.keys));
    }
  }

  PolicyReport Run(Policy policy, const std::string& service_config);
  // Stops backend `stopped` under the same traffic on a channel with
  // `service_config` (the recommended retryPolicy); restarts it. Returns the
  // calls sent and failed from the stop to kSettleSeconds after it.
  std::pair<uint64_t, uint64_t> StopWithRetry(const std::string& service_config,
                                              size_t stopped);

 private:
  void Worker(poise::example::Echo::Stub* stub, RunLog* log);
  void Progress(Policy policy, double elapsed, double total);
  PolicyReport Analyse(Policy policy, const RunLog& log, double seconds,
                       const PoiseStats& before, const PoiseStats& after,
                       const std::vector<uint64_t>& server_calls,
                       const std::vector<uint64_t>& server_peaks) const;
  void Sleep(Policy policy, double seconds, double* elapsed, double total);

  const Options& opt_;
  BackendSet* set_;
  const std::vector<uint32_t>* sequence_;
  std::vector<std::string> key_names_;

  std::atomic<int> phase_{kWarmup};
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> next_{0};
  std::atomic<uint64_t> sent_{0}, failed_{0};
  std::atomic<int> in_flight_[kPhases] = {};  // calls started in each phase
};

void Runner::Worker(poise::example::Echo::Stub* stub, RunLog* log) {
  const size_t nb = set_->size();
  while (!done_.load()) {
    const int phase = phase_.load();
    in_flight_[phase].fetch_add(1);
    const uint64_t i = next_.fetch_add(1);
    const uint32_t key = (*sequence_)[i % sequence_->size()];
    grpc::ClientContext context;
    context.AddMetadata(kHashHeader, key_names_[key]);
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(5));
    poise::example::EchoRequest request;
    request.set_payload(key_names_[key]);
    request.set_delay_ms(opt_.delay_ms);
    poise::example::EchoReply reply;
    const grpc::Status status = stub->Echo(&context, request, &reply);
    in_flight_[phase].fetch_sub(1);
    PhaseLog& p = log->phase[phase];
    ++p.sent;
    sent_.fetch_add(1);
    const int backend = status.ok() ? set_->IndexOf(reply.backend_id()) : -1;
    if (backend >= 0) {
      ++p.ok;
      ++p.calls[key * nb + static_cast<size_t>(backend)];
    } else {
      ++p.failed;
      failed_.fetch_add(1);
      const int code = status.ok() ? -1 : static_cast<int>(status.error_code());
      ++p.failures[code];
      p.messages.emplace(code, status.ok() ? "reply from an unknown backend"
                                           : status.error_message());
    }
  }
}

void Runner::Progress(Policy policy, double elapsed, double total) {
  // One line, rewritten in place: only for a terminal.
  static const bool kTerminal = isatty(STDERR_FILENO) != 0;
  if (!kTerminal) return;
  std::fprintf(stderr,
               "\r  %-24s %-10s %5.1f/%.1f s  %8" PRIu64 " calls  %5" PRIu64
               " failed ",
               PolicyName(policy), PhaseName(phase_.load()), elapsed, total,
               sent_.load(), failed_.load());
  std::fflush(stderr);
}

void Runner::Sleep(Policy policy, double seconds, double* elapsed,
                   double total) {
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(seconds));
  for (;;) {
    const auto now = Clock::now();
    if (now >= end) break;
    const auto step =
        std::min<Clock::duration>(end - now, std::chrono::milliseconds(200));
    std::this_thread::sleep_for(step);
    *elapsed += std::chrono::duration<double>(step).count();
    Progress(policy, *elapsed, total);
  }
}

PolicyReport Runner::Run(Policy policy, const std::string& service_config) {
  const std::string label = absl::StrCat("demo-", PolicyName(policy));
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(service_config);
  args.SetString(poise::grpc_lb::kStatsLabelArg, label);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(
      set_->target(), grpc::InsecureChannelCredentials(), args);
  auto stub = poise::example::Echo::NewStub(channel);

  const bool with_stop = IsPoise(policy) && set_->size() > 1;
  const double after_seconds = opt_.duration / 2;
  const double total = kWarmupSeconds + opt_.duration +
                       (with_stop ? kSettleSeconds + after_seconds : 0);

  phase_.store(kWarmup);
  done_.store(false);
  next_.store(0);
  sent_.store(0);
  failed_.store(0);
  std::vector<RunLog> logs(opt_.concurrency);
  for (auto& log : logs) log.Init((opt_.keys + 1) * set_->size());
  std::vector<std::thread> workers;
  for (size_t w = 0; w < opt_.concurrency; ++w) {
    workers.emplace_back(&Runner::Worker, this, stub.get(), &logs[w]);
  }

  double elapsed = 0;
  Sleep(policy, kWarmupSeconds, &elapsed, total);
  // The measured phase starts once every connection had time to come up.
  const PoiseStats before = Snapshot(label, *set_);
  set_->ResetCounters();
  phase_.store(kMain);
  const auto main_start = Clock::now();
  Sleep(policy, opt_.duration, &elapsed, total);
  // The main phase ends: new calls count as the next phase (or are not
  // started), and the main phase's last calls finish before the snapshot.
  const double seconds =
      std::chrono::duration<double>(Clock::now() - main_start).count();
  if (with_stop) {
    phase_.store(kSwitch);
  } else {
    done_.store(true);
  }
  const auto drain_deadline = Clock::now() + std::chrono::seconds(6);
  while (in_flight_[kMain].load() > 0 && Clock::now() < drain_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const PoiseStats after = Snapshot(label, *set_);
  std::vector<uint64_t> server_calls, server_peaks;
  for (size_t i = 0; i < set_->size(); ++i) {
    server_calls.push_back(set_->backend(i).calls());
    server_peaks.push_back(
        static_cast<uint64_t>(set_->backend(i).peak_in_flight()));
  }

  const size_t stopped = *opt_.stop;
  if (with_stop) {
    // Stop one backend while the traffic keeps flowing.
    set_->backend(stopped).Stop();
    Sleep(policy, kSettleSeconds, &elapsed, total);
    phase_.store(kAfter);
    Sleep(policy, after_seconds, &elapsed, total);
  }
  done_.store(true);
  for (auto& t : workers) t.join();
  if (isatty(STDERR_FILENO) != 0) {
    std::fprintf(stderr, "\r%*s\r", 90, "");
    std::fflush(stderr);
  }

  RunLog log;
  log.Init((opt_.keys + 1) * set_->size());
  for (const auto& l : logs) log.Merge(l);
  PolicyReport report =
      Analyse(policy, log, seconds, before, after, server_calls, server_peaks);
  report.label = label;

  if (with_stop) {
    const size_t nb = set_->size();
    StopReport s;
    s.backend = set_->backend(stopped).id();
    s.weight = opt_.weights[stopped];
    s.after_seconds = after_seconds;
    s.switch_sent = log.phase[kSwitch].sent;
    s.switch_failed = log.phase[kSwitch].failed;
    s.after_sent = log.phase[kAfter].sent;
    s.after_failed = log.phase[kAfter].failed;
    s.moved_to.assign(nb, 0);
    // A key's home in a phase is the backend that served most of its calls.
    auto home = [nb](const PhaseLog& p, size_t key) -> int {
      int best = -1;
      uint32_t most = 0;
      for (size_t b = 0; b < nb; ++b) {
        if (p.calls[key * nb + b] > most) {
          most = p.calls[key * nb + b];
          best = static_cast<int>(b);
        }
      }
      return best;
    };
    for (size_t key = 0; key <= opt_.keys; ++key) {
      s.after_calls_on_stopped += log.phase[kAfter].calls[key * nb + stopped];
      const int was = home(log.phase[kMain], key);
      const int now = home(log.phase[kAfter], key);
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
    if (absl::Status st = set_->backend(stopped).Restart(); !st.ok()) {
      std::fprintf(stderr, "poise-demo: restarting %s: %s\n",
                   set_->backend(stopped).id().c_str(), st.ToString().c_str());
    }
    std::tie(s.retry_sent, s.retry_failed) =
        StopWithRetry(WithRetryPolicy(service_config), stopped);
    report.stop = s;
  }
  return report;
}

std::pair<uint64_t, uint64_t> Runner::StopWithRetry(
    const std::string& service_config, size_t stopped) {
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(service_config);
  args.SetString(poise::grpc_lb::kStatsLabelArg, "demo-retry");
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(
      set_->target(), grpc::InsecureChannelCredentials(), args);
  auto stub = poise::example::Echo::NewStub(channel);
  std::atomic<bool> counting{false}, done{false};
  std::atomic<uint64_t> next{0}, sent{0}, failed{0};
  std::vector<std::thread> workers;
  for (size_t w = 0; w < opt_.concurrency; ++w) {
    workers.emplace_back([&] {
      while (!done.load()) {
        const uint32_t key =
            (*sequence_)[next.fetch_add(1) % sequence_->size()];
        grpc::ClientContext context;
        context.AddMetadata(kHashHeader, key_names_[key]);
        context.set_deadline(std::chrono::system_clock::now() +
                             std::chrono::seconds(5));
        poise::example::EchoRequest request;
        request.set_delay_ms(opt_.delay_ms);
        poise::example::EchoReply reply;
        const bool counted = counting.load();
        const grpc::Status status = stub->Echo(&context, request, &reply);
        if (!counted) continue;
        sent.fetch_add(1);
        if (!status.ok() || set_->IndexOf(reply.backend_id()) < 0) {
          failed.fetch_add(1);
        }
      }
    });
  }
  const auto seconds = [](double s) {
    return std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(s));
  };
  std::this_thread::sleep_for(seconds(kWarmupSeconds));
  counting.store(true);  // calls started from here on are counted
  set_->backend(stopped).Stop();
  std::this_thread::sleep_for(seconds(kSettleSeconds));
  done.store(true);
  for (auto& t : workers) t.join();
  if (absl::Status st = set_->backend(stopped).Restart(); !st.ok()) {
    std::fprintf(stderr, "poise-demo: restarting %s: %s\n",
                 set_->backend(stopped).id().c_str(), st.ToString().c_str());
  }
  return {sent.load(), failed.load()};
}

PolicyReport Runner::Analyse(Policy policy, const RunLog& log, double seconds,
                             const PoiseStats& before, const PoiseStats& after,
                             const std::vector<uint64_t>& server_calls,
                             const std::vector<uint64_t>& server_peaks) const {
  const size_t nb = set_->size();
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
  uint64_t total_weight = 0;
  for (uint64_t w : opt_.weights) total_weight += w;
  r.rows.resize(nb);
  for (size_t b = 0; b < nb; ++b) {
    BackendRow& row = r.rows[b];
    row.id = set_->backend(b).id();
    row.address = set_->backend(b).address();
    row.weight = opt_.weights[b];
    row.weight_share =
        static_cast<double>(row.weight) / static_cast<double>(total_weight);
    row.server_calls = server_calls[b];
    row.server_peak_in_flight = server_peaks[b];
    if (r.have_stats) {
      row.peak_in_flight = after.peak_in_flight[b];
      row.spilled_in = after.spilled_in[b] - before.spilled_in[b];
    }
  }
  r.hot_calls.assign(nb, 0);
  for (size_t key = 0; key <= opt_.keys; ++key) {
    uint64_t key_calls = 0, backends_used = 0, most = 0;
    size_t only = 0;
    for (size_t b = 0; b < nb; ++b) {
      const uint32_t c = p.calls[key * nb + b];
      if (c == 0) continue;
      key_calls += c;
      most = std::max<uint64_t>(most, c);
      ++backends_used;
      only = b;
      r.rows[b].calls += c;
      ++r.rows[b].distinct_keys;
      if (key == opt_.keys) r.hot_calls[b] = c;
    }
    if (key_calls == 0) continue;
    ++r.distinct_keys;
    r.home_calls += most;
    if (backends_used == 1) {
      ++r.keys_on_one;
      ++r.rows[only].keys_only_here;
    } else {
      ++r.keys_on_many;
    }
    if (key_calls >= 2) {
      ++r.repeat_keys;
      if (backends_used == 1) ++r.repeat_keys_on_one;
    }
  }
  for (auto& row : r.rows) {
    row.share =
        r.ok == 0 ? 0
                  : static_cast<double>(row.calls) / static_cast<double>(r.ok);
  }
  return r;
}

// ---------------------------------------------------------------------------
// Output.

double Ratio(uint64_t a, uint64_t b) {
  return b == 0 ? 0 : static_cast<double>(a) / static_cast<double>(b);
}

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

void PrintText(const Options& opt, const BackendSet& set,
               const std::vector<PolicyReport>& reports) {
  std::printf(
      "poise-demo: %zu backends on 127.0.0.1, weights %s; workload: %zu "
      "Zipf keys + hot key \"%s\" (%.0f%% of calls), %zu calls in flight, "
      "%u ms server delay, %.1f s per policy after %.1f s warm-up\n",
      set.size(), absl::StrJoin(opt.weights, ",").c_str(), opt.keys, kHotKey,
      kHotShare * 100, opt.concurrency, opt.delay_ms, opt.duration,
      kWarmupSeconds);
  for (const PolicyReport& r : reports) {
    std::printf("\n== %s", PolicyName(r.policy));
    if (r.policy == Policy::kBounded) {
      std::printf(" (balance factor %" PRIu64 "%%)", opt.factor);
    }
    std::printf(": %" PRIu64 " calls in %.1f s, %" PRIu64 " failed%s\n", r.sent,
                r.seconds, r.failed,
                Failures(r.failures, r.failure_messages).c_str());
    std::printf(
        "  %-7s  %-16s  %6s  %7s  %6s  %8s  %14s  %8s  %5s  %9s  %10s\n",
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
    std::printf("  hot key \"%s\": %" PRIu64 " calls -> %s\n", kHotKey,
                hot_total, absl::StrJoin(hot, ", ").c_str());
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
    if (r.stop.has_value()) {
      const StopReport& s = *r.stop;
      std::vector<std::string> to;
      for (size_t b = 0; b < s.moved_to.size(); ++b) {
        if (s.moved_to[b] > 0) {
          to.push_back(absl::StrCat(r.rows[b].id, " ", s.moved_to[b]));
        }
      }
      std::printf("  stop %s (weight %" PRIu64
                  ") with traffic running: %" PRIu64 " of %" PRIu64
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
      std::printf(
          "  keys moved: %" PRIu64 " of %" PRIu64
          " keys seen before and after: %" PRIu64 " of %s's %" PRIu64
          " keys (-> %s), %" PRIu64 " of the other backends' %" PRIu64 "\n",
          s.moved, s.keys_compared, s.moved_from_stopped, s.backend.c_str(),
          s.stopped_keys, to.empty() ? "none" : absl::StrJoin(to, ", ").c_str(),
          s.moved_from_others, s.keys_compared - s.stopped_keys);
    }
  }
}

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

void PrintJson(const Options& opt, const BackendSet& set,
               const std::vector<PolicyReport>& reports) {
  std::string out = "{";
  std::vector<std::string> backends;
  for (size_t i = 0; i < set.size(); ++i) {
    backends.push_back(
        absl::StrCat("{\"id\":", JsonString(set.backend(i).id()),
                     ",\"address\":", JsonString(set.backend(i).address()),
                     ",\"weight\":", opt.weights[i], "}"));
  }
  absl::StrAppend(&out, "\"backends\":[", absl::StrJoin(backends, ","), "]");
  absl::StrAppend(
      &out, R"(,"workload":{"keys":)", opt.keys,
      ",\"hot_key\":", JsonString(kHotKey), ",\"hot_share\":", kHotShare,
      ",\"zipf_exponent\":", kZipfExponent, ",\"seed\":", kSeed,
      ",\"concurrency\":", opt.concurrency, ",\"delay_ms\":", opt.delay_ms,
      ",\"duration_s\":", opt.duration, ",\"warmup_s\":", kWarmupSeconds,
      ",\"balance_factor_percent\":", opt.factor, "}");
  std::vector<std::string> policies;
  for (const PolicyReport& r : reports) {
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
    absl::StrAppend(
        &p, ",\"distinct_keys\":", r.distinct_keys,
        ",\"keys_on_one_backend\":", r.keys_on_one,
        ",\"keys_on_multiple_backends\":", r.keys_on_many,
        ",\"affinity_rate\":", Ratio(r.keys_on_one, r.distinct_keys),
        ",\"repeat_keys\":", r.repeat_keys,
        ",\"repeat_keys_on_one_backend\":", r.repeat_keys_on_one,
        ",\"home_calls\":", r.home_calls,
        ",\"home_call_rate\":", Ratio(r.home_calls, r.ok));
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
    absl::StrAppend(&p, ",\"backends\":[", absl::StrJoin(rows, ","), "]",
                    ",\"hot_key_calls\":{", absl::StrJoin(hot, ","), "}");
    if (r.stop.has_value()) {
      const StopReport& s = *r.stop;
      std::vector<std::string> to;
      for (size_t b = 0; b < s.moved_to.size(); ++b) {
        to.push_back(
            absl::StrCat(JsonString(r.rows[b].id), ":", s.moved_to[b]));
      }
      absl::StrAppend(
          &p, R"(,"stop":{"backend":)", JsonString(s.backend),
          ",\"weight\":", s.weight, ",\"settle_s\":", kSettleSeconds,
          ",\"after_s\":", s.after_seconds,
          ",\"switch_calls_sent\":", s.switch_sent,
          ",\"switch_calls_failed\":", s.switch_failed,
          ",\"after_calls_sent\":", s.after_sent,
          ",\"after_calls_failed\":", s.after_failed,
          ",\"after_calls_on_stopped\":", s.after_calls_on_stopped,
          ",\"keys_compared\":", s.keys_compared,
          ",\"stopped_backend_keys\":", s.stopped_keys,
          ",\"keys_moved\":", s.moved,
          ",\"moved_from_stopped\":", s.moved_from_stopped,
          ",\"moved_from_others\":", s.moved_from_others, ",\"moved_to\":{",
          absl::StrJoin(to, ","), "}", ",\"retry_calls_sent\":", s.retry_sent,
          ",\"retry_calls_failed\":", s.retry_failed, "}");
    }
    policies.push_back(p + "}");
  }
  absl::StrAppend(&out, ",\"policies\":[", absl::StrJoin(policies, ","), "]}");
  std::printf("%s\n", out.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  if (int rc = ParseOptions(argc, argv, &opt); rc != 0) return rc;
  const auto start = Clock::now();

  // Before the first channel or server exists.
  if (absl::Status s = poise::grpc_lb::RegisterPolicies(); !s.ok()) {
    std::fprintf(stderr, "poise-demo: RegisterPolicies: %s\n",
                 s.ToString().c_str());
    return 1;
  }

  BackendSet set;
  if (absl::Status s = set.Start(opt.backends, kHashHeader); !s.ok()) {
    std::fprintf(stderr, "poise-demo: starting backends: %s\n",
                 s.ToString().c_str());
    return 1;
  }
  const std::vector<uint32_t> sequence = MakeSequence(opt.keys);
  Runner runner(opt, &set, &sequence);

  std::vector<PolicyReport> reports;
  for (Policy policy :
       {Policy::kBounded, Policy::kWeighted, Policy::kRoundRobin}) {
    const std::string config = ServiceConfig(policy, opt, set);
    if (absl::Status s = poise::grpc_lb::ValidateServiceConfig(config);
        !s.ok()) {
      std::fprintf(stderr, "poise-demo: service config for %s: %s\n%s\n",
                   PolicyName(policy), s.ToString().c_str(), config.c_str());
      return 1;
    }
    reports.push_back(runner.Run(policy, config));
  }
  set.StopAll();

  if (opt.json) {
    PrintJson(opt, set, reports);
  } else {
    PrintText(opt, set, reports);
    std::printf("\n(%.1f s in all)\n",
                std::chrono::duration<double>(Clock::now() - start).count());
  }
  return 0;
}
