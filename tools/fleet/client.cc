// poise-fleet-client: one client of a fleet, for the fleet comparison
// (bench/fleet.sh, test/e2e/fleet_e2e_test.cc). One channel with
// bounded_load_rendezvous (hashHeader x-key) to a list of backends, a closed
// loop of K calls in flight; each call's key is "hot" with probability H,
// else a Zipf(s) key over N keys.
//
//   poise-fleet-client --target ipv4:127.0.0.1:P1,127.0.0.1:P2,...
//       [--mode local|fleet-per-call|fleet-oob|fleet-admission]
//       [--in-flight 1]
//       [--hot-share 0.5] [--keys 100000] [--zipf 1.0] [--seconds 10]
//       [--start-at-ms EPOCH_MS | --start-at-file PATH]
//       [--oob-interval 0.01s] [--max-report-age 1s] [--factor 150]
//       [--seed N] [--label NAME]
//
// Modes: local (no serverLoad: each client bounds its own calls only),
// fleet-per-call (serverLoad, outOfBandInterval "0s"), fleet-oob (serverLoad,
// outOfBandInterval --oob-interval), fleet-admission (fleet-oob with
// serverLoad.admission, and the retry policy it needs: RESOURCE_EXHAUSTED
// retried with retryRouting NEXT_CHOICE; its backends run --admission).
// Before the loop it sends warm-up calls until every backend has served one
// (READY), then waits for --start-at-ms (system clock) if given, so that the
// clients of a fleet start together
// (--start-at-file: prints {"ready":true} after the warm-up and waits, up to
// 10 minutes, for PATH to hold that time: start_file.h);
// the loop runs --seconds. At the end it waits (up to 5 s) for every
// backend's in_flight to return to 0 and prints one JSON line: its calls,
// errors, hot calls and those served by the hot key's owner, and the
// channel's StatsSnapshot() serverLoad counters and backends. Exit status 0,
// or 3 when some in_flight did not return to 0, 2 on bad arguments, 1 when
// the warm-up failed.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "echo.grpc.pb.h"
#include "poise/grpc_lb.h"
#include "poise/rendezvous.h"
#include "start_file.h"

namespace {

constexpr char kHeader[] = "x-key";
constexpr char kHotKey[] = "hot";

int Usage() {
  std::fprintf(
      stderr,
      "usage: poise-fleet-client --target ipv4:127.0.0.1:P1,127.0.0.1:P2,...\n"
      "    [--mode local|fleet-per-call|fleet-oob|fleet-admission]\n"
      "    [--in-flight 1]\n"
      "    [--hot-share 0.5] [--keys 100000] [--zipf 1.0] [--seconds 10]\n"
      "    [--start-at-ms EPOCH_MS | --start-at-file PATH]\n"
      "    [--oob-interval 0.01s] [--max-report-age 1s] [--factor 150]\n"
      "    [--seed N] [--label NAME]\n");
  return 2;
}

struct Options {
  std::string target;
  std::string mode = "fleet-oob";
  int in_flight = 1;
  double hot_share = 0.5;
  int keys = 100000;
  double zipf = 1.0;
  double seconds = 10;
  int64_t start_at_ms = -1;
  std::string start_at_file;
  std::string oob_interval = "0.01s";
  std::string max_report_age = "1s";
  int factor = 150;
  uint64_t seed = 0;
  std::string label = "fleet-client";
};

std::string ServiceConfig(const Options& o) {
  std::string server_load;
  if (o.mode == "fleet-per-call") {
    server_load = absl::StrCat(
        R"(,"serverLoad":{"metric":"rif","outOfBandInterval":"0s","maxReportAge":")",
        o.max_report_age, "\"}");
  } else if (o.mode == "fleet-oob" || o.mode == "fleet-admission") {
    server_load = absl::StrCat(
        R"(,"serverLoad":{"metric":"rif","outOfBandInterval":")",
        o.oob_interval, R"(","maxReportAge":")", o.max_report_age, "\"",
        o.mode == "fleet-admission" ? R"(,"admission":true)" : "", "}");
  }
  // A refused call's retry goes to the key's next choice with room; gRPC's
  // cap of 5 attempts, and a short backoff: a refusal is no failure to wait
  // out (docs/fleet-bounds.md, "Admission at the backend").
  const bool admission = o.mode == "fleet-admission";
  const char* routing = admission ? R"(,"retryRouting":"NEXT_CHOICE")" : "";
  const char* method_config =
      admission
          ? R"(,"methodConfig":[{"name":[{"service":"poise.example.Echo"}],)"
            R"("retryPolicy":{"maxAttempts":5,"initialBackoff":"0.001s",)"
            R"("maxBackoff":"0.01s","backoffMultiplier":2,)"
            R"("retryableStatusCodes":["RESOURCE_EXHAUSTED","UNAVAILABLE"]}}])"
          : "";
  return absl::StrCat(
      R"({"loadBalancingConfig":[{"bounded_load_rendezvous":{"hashHeader":")",
      kHeader, R"(","balanceFactorPercent":)", o.factor, server_load, routing,
      "}}]", method_config, "}");
}

// Zipf(s) over ranks 1..n by its cumulative distribution.
class Zipf {
 public:
  Zipf(int n, double s) : cdf_(static_cast<size_t>(n)) {
    double sum = 0;
    for (int k = 1; k <= n; ++k) {
      sum += 1.0 / std::pow(static_cast<double>(k), s);
      cdf_[static_cast<size_t>(k - 1)] = sum;
    }
    for (double& c : cdf_) c /= sum;
  }
  size_t Draw(double uniform) const {
    return static_cast<size_t>(
        std::lower_bound(cdf_.begin(), cdf_.end(), uniform) - cdf_.begin());
  }

 private:
  std::vector<double> cdf_;
};

struct Counts {
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> errors{0};
  std::atomic<uint64_t> hot_calls{0};
  std::atomic<uint64_t> hot_to_owner{0};
  std::mutex mu;
  std::string first_error;
};

grpc::Status OneCall(poise::example::Echo::Stub& stub, const std::string& key,
                     std::string* backend_id) {
  grpc::ClientContext context;
  context.AddMetadata(kHeader, key);
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  poise::example::EchoRequest request;
  poise::example::EchoReply reply;
  grpc::Status status = stub.Echo(&context, request, &reply);
  if (status.ok()) *backend_id = reply.backend_id();
  return status;
}

std::string JsonEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out.push_back(c);
  }
  return out;
}

bool Parse(const std::string& text, int* out) {
  return absl::SimpleAtoi(text, out);
}
bool Parse(const std::string& text, int64_t* out) {
  return absl::SimpleAtoi(text, out);
}
bool Parse(const std::string& text, double* out) {
  return absl::SimpleAtod(text, out);
}

// Parses `text` into *out if it is a number in [low, high].
template <typename T>
bool InRange(const std::string& text, T* out, T low, T high) {
  T value{};
  if (!Parse(text, &value) || !(value >= low && value <= high)) return false;
  *out = value;
  return true;
}

// One option (all take a value); false for a bad one.
bool ParseValue(const std::string& arg, const std::string& value, Options* o) {
  if (arg == "--target") {
    o->target = value;
    return value.rfind("ipv4:", 0) == 0;
  }
  if (arg == "--mode") {
    o->mode = value;
    return value == "local" || value == "fleet-per-call" ||
           value == "fleet-oob" || value == "fleet-admission";
  }
  if (arg == "--in-flight") {
    return InRange(value, &o->in_flight, 1, 64);
  }
  if (arg == "--hot-share") {
    return InRange(value, &o->hot_share, 0.0, 1.0);
  }
  if (arg == "--keys") {
    return InRange(value, &o->keys, 1, 10000000);
  }
  if (arg == "--zipf") {
    return InRange(value, &o->zipf, 0.0, 5.0);
  }
  if (arg == "--seconds") {
    return InRange(value, &o->seconds, 0.001, 3600.0);
  }
  if (arg == "--start-at-ms") {
    return InRange(value, &o->start_at_ms, int64_t{0},
                   std::numeric_limits<int64_t>::max() / 1000000);
  }
  if (arg == "--start-at-file") {
    o->start_at_file = value;
    return !value.empty();
  }
  if (arg == "--factor") {
    return InRange(value, &o->factor, 100, 100000);
  }
  if (arg == "--seed") return absl::SimpleAtoi(value, &o->seed);
  std::string* text = arg == "--oob-interval"     ? &o->oob_interval
                      : arg == "--max-report-age" ? &o->max_report_age
                      : arg == "--label"          ? &o->label
                                                  : nullptr;
  if (text == nullptr) return false;
  *text = value;
  return true;
}

poise::grpc_lb::ChannelStats StatsOf(const std::string& label) {
  for (auto& s : poise::grpc_lb::StatsSnapshot()) {
    if (s.label == label) return s;
  }
  return {};
}

bool EveryBackendPicked(const poise::grpc_lb::ChannelStats& s, size_t n) {
  return s.backends.size() == n &&
         std::all_of(s.backends.begin(), s.backends.end(),
                     [](const auto& b) { return b.picks > 0; });
}

// Warm-up: fresh keys until every backend has been picked (all READY).
bool WarmUp(poise::example::Echo::Stub& stub, const Options& o, size_t n) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int k = 0; !EveryBackendPicked(StatsOf(o.label), n); ++k) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::string ignored;
    OneCall(stub, absl::StrCat("warm-up-", o.label, "-", k), &ignored);
  }
  return true;
}

// The start time: --start-at-ms, or the one --start-at-file will hold (after
// saying the client is ready); -1: none, or the file never came.
int64_t StartAtMs(const Options& o) {
  if (o.start_at_file.empty()) return o.start_at_ms;
  std::printf("{\"ready\":true}\n");
  std::fflush(stdout);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (std::chrono::steady_clock::now() < deadline) {
    if (const std::optional<int64_t> ms =
            poise::fleet::ReadStartFile(o.start_at_file)) {
      return *ms;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return -1;
}

// Sleeps until the start time; how late the client was for it (0: on time).
int64_t AwaitStart(int64_t start_at_ms) {
  if (start_at_ms < 0) return 0;
  const auto start = std::chrono::system_clock::time_point(
      std::chrono::milliseconds(start_at_ms));
  const auto now = std::chrono::system_clock::now();
  if (now < start) {
    std::this_thread::sleep_until(start);
    return 0;
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(now - start)
      .count();
}

void Count(const grpc::Status& status, bool hot, bool to_owner,
           Counts* counts) {
  counts->calls.fetch_add(1);
  if (!status.ok()) {
    counts->errors.fetch_add(1);
    std::lock_guard<std::mutex> lock(counts->mu);
    if (counts->first_error.empty()) {
      counts->first_error = status.error_message();
    }
    return;
  }
  if (hot) {
    counts->hot_calls.fetch_add(1);
    if (to_owner) counts->hot_to_owner.fetch_add(1);
  }
}

// The closed loop: o.in_flight threads, each one call at a time.
void RunLoop(poise::example::Echo::Stub& stub, const Options& o,
             const std::string& owner, Counts* counts) {
  const Zipf zipf(o.keys, o.zipf);
  const auto stop_at =
      std::chrono::steady_clock::now() +
      std::chrono::microseconds(static_cast<int64_t>(o.seconds * 1e6));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(o.in_flight));
  for (int t = 0; t < o.in_flight; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(o.seed * 1000003U + static_cast<uint64_t>(t) +
                          std::random_device{}());
      std::uniform_real_distribution<double> uniform(0.0, 1.0);
      while (std::chrono::steady_clock::now() < stop_at) {
        const bool hot = uniform(rng) < o.hot_share;
        const std::string key =
            hot ? std::string(kHotKey)
                : absl::StrCat("k", zipf.Draw(uniform(rng)));
        std::string backend;
        // Two statements: the call fills `backend` before it is compared.
        const grpc::Status status = OneCall(stub, key, &backend);
        Count(status, hot, backend == owner, counts);
      }
    });
  }
  for (auto& th : threads) th.join();
}

bool AllZero(const poise::grpc_lb::ChannelStats& s) {
  return s.scope_in_flight == 0 &&
         std::all_of(s.backends.begin(), s.backends.end(),
                     [](const auto& b) { return b.in_flight == 0; });
}

// Every call has ended: every in_flight must return to 0 (within 5 s).
bool AwaitZero(const Options& o, poise::grpc_lb::ChannelStats* s) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    *s = StatsOf(o.label);
    if (AllZero(*s)) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

void Print(const Options& o, const Counts& counts, const std::string& owner,
           int64_t late_ms, const poise::grpc_lb::ChannelStats& warm,
           const poise::grpc_lb::ChannelStats& s, bool zero) {
  std::string backends;
  for (const auto& b : s.backends) {
    uint64_t warm_picks = 0;
    for (const auto& w : warm.backends) {
      if (w.address == b.address) warm_picks = w.picks;
    }
    absl::StrAppend(&backends, backends.empty() ? "" : ",", R"({"address":")",
                    b.address, R"(","picks":)", b.picks - warm_picks,
                    ",\"spilled_in\":", b.spilled_in,
                    ",\"in_flight\":", b.in_flight,
                    ",\"peak_in_flight\":", b.peak_in_flight,
                    ",\"reported_load\":", b.reported_load,
                    ",\"admission_refusals\":", b.admission_refusals,
                    ",\"report_age_ms\":", b.report_age_ms, "}");
  }
  std::printf(
      "{\"label\":\"%s\",\"mode\":\"%s\",\"calls\":%" PRIu64
      ",\"errors\":%" PRIu64 ",\"first_error\":\"%s\",\"hot_calls\":%" PRIu64
      ",\"hot_to_owner\":%" PRIu64 ",\"owner\":\"%s\",\"late_ms\":%" PRId64
      ",\"server_load\":%s,\"load_reports\":%" PRIu64
      ",\"refused_load_reports\":%" PRIu64 ",\"admission_refusals\":%" PRIu64
      ",\"retries\":%" PRIu64 ",\"picks_without_some_report\":%" PRIu64
      ",\"picks\":%" PRIu64 ",\"spills\":%" PRIu64
      ",\"in_flight_zero\":%s,\"backends\":[%s]}\n",
      JsonEscape(o.label).c_str(), o.mode.c_str(), counts.calls.load(),
      counts.errors.load(), JsonEscape(counts.first_error).c_str(),
      counts.hot_calls.load(), counts.hot_to_owner.load(), owner.c_str(),
      late_ms, s.server_load ? "true" : "false", s.load_reports,
      s.refused_load_reports, s.admission_refusals, s.retries,
      s.picks_without_some_report, s.picks, s.spills, zero ? "true" : "false",
      backends.c_str());
  std::fflush(stdout);
}

// The hot key's owner among the target's addresses (its identities), or ""
// for a bad target (empty, or an address outside 127.0.0.0/8).
std::string HotKeyOwner(const std::string& target, size_t* n) {
  const std::vector<std::string> addresses =
      absl::StrSplit(target.substr(5), ',');
  std::vector<poise::Candidate> candidates;
  candidates.reserve(addresses.size());
  for (const std::string& a : addresses) {
    if (a.rfind("127.", 0) != 0) return "";
    candidates.push_back({a, 1, true});
  }
  const auto owner = poise::WeightedRendezvous::Pick(kHotKey, candidates);
  if (!owner.ok()) return "";
  *n = addresses.size();
  return addresses[owner.value()];
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc || !ParseValue(arg, argv[++i], &o)) return Usage();
  }
  size_t n = 0;
  const std::string owner = o.target.empty() ? "" : HotKeyOwner(o.target, &n);
  if (owner.empty()) return Usage();

  if (absl::Status s = poise::grpc_lb::RegisterPolicies(); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  const std::string config = ServiceConfig(o);
  if (absl::Status s = poise::grpc_lb::ValidateServiceConfig(config); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 2;
  }
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(config);
  args.SetString(poise::grpc_lb::kStatsLabelArg, o.label);
  auto channel = grpc::CreateCustomChannel(
      o.target, grpc::InsecureChannelCredentials(), args);
  auto stub = poise::example::Echo::NewStub(channel);

  if (!WarmUp(*stub, o, n)) {
    std::fprintf(stderr, "warm-up: not every backend was picked in 30 s\n");
    return 1;
  }
  const poise::grpc_lb::ChannelStats warm = StatsOf(o.label);
  const int64_t start_at_ms = StartAtMs(o);
  if (start_at_ms < 0 && !o.start_at_file.empty()) {
    std::fprintf(stderr, "%s: no start time in 10 minutes\n",
                 o.start_at_file.c_str());
    return 1;
  }
  const int64_t late_ms = AwaitStart(start_at_ms);
  Counts counts;
  RunLoop(*stub, o, owner, &counts);
  poise::grpc_lb::ChannelStats s;
  const bool zero = AwaitZero(o, &s);
  Print(o, counts, owner, late_ms, warm, s, zero);
  return zero ? 0 : 3;
}
