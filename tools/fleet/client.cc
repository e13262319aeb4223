// poise-fleet-client: one client of a fleet, for the fleet comparison
// (bench/fleet.sh, test/e2e/fleet_e2e_test.cc). One channel with
// bounded_load_rendezvous (hashHeader x-key) to a list of backends, a closed
// loop of K calls in flight; each call's key is "hot" with probability H,
// else a Zipf(s) key over N keys.
//
//   poise-fleet-client --target ipv4:127.0.0.1:P1,127.0.0.1:P2,...
//       [--mode local|fleet-per-call|fleet-oob] [--in-flight 1]
//       [--hot-share 0.5] [--keys 100000] [--zipf 1.0] [--seconds 10]
//       [--start-at-ms EPOCH_MS] [--oob-interval 0.01s]
//       [--max-report-age 1s] [--factor 150] [--seed N] [--label NAME]
//
// Modes: local (no serverLoad: each client bounds its own calls only),
// fleet-per-call (serverLoad, outOfBandInterval "0s"), fleet-oob (serverLoad,
// outOfBandInterval --oob-interval). Before the loop it sends warm-up calls
// until every backend has served one (READY), then waits for --start-at-ms
// (system clock) if given, so that the clients of a fleet start together;
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
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "echo.grpc.pb.h"
#include "poise/grpc_lb.h"
#include "poise/rendezvous.h"

namespace {

constexpr char kHeader[] = "x-key";
constexpr char kHotKey[] = "hot";

int Usage() {
  std::fprintf(
      stderr,
      "usage: poise-fleet-client --target ipv4:127.0.0.1:P1,127.0.0.1:P2,...\n"
      "    [--mode local|fleet-per-call|fleet-oob] [--in-flight 1]\n"
      "    [--hot-share 0.5] [--keys 100000] [--zipf 1.0] [--seconds 10]\n"
      "    [--start-at-ms EPOCH_MS] [--oob-interval 0.01s]\n"
      "    [--max-report-age 1s] [--factor 150] [--seed N] [--label NAME]\n");
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
  } else if (o.mode == "fleet-oob") {
    server_load = absl::StrCat(
        R"(,"serverLoad":{"metric":"rif","outOfBandInterval":")",
        o.oob_interval, R"(","maxReportAge":")", o.max_report_age, "\"}");
  }
  return absl::StrCat(
      R"({"loadBalancingConfig":[{"bounded_load_rendezvous":{"hashHeader":")",
      kHeader, R"(","balanceFactorPercent":)", o.factor, server_load, "}}]}");
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

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return Usage();
    const std::string value = argv[++i];
    char* end = nullptr;
    if (arg == "--target") {
      o.target = value;
    } else if (arg == "--mode") {
      o.mode = value;
      if (o.mode != "local" && o.mode != "fleet-per-call" &&
          o.mode != "fleet-oob") {
        return Usage();
      }
    } else if (arg == "--in-flight") {
      o.in_flight = static_cast<int>(std::strtol(value.c_str(), &end, 10));
      if (*end != '\0' || o.in_flight < 1 || o.in_flight > 64) return Usage();
    } else if (arg == "--hot-share") {
      o.hot_share = std::strtod(value.c_str(), &end);
      if (*end != '\0' || !(o.hot_share >= 0 && o.hot_share <= 1)) {
        return Usage();
      }
    } else if (arg == "--keys") {
      o.keys = static_cast<int>(std::strtol(value.c_str(), &end, 10));
      if (*end != '\0' || o.keys < 1 || o.keys > 10000000) return Usage();
    } else if (arg == "--zipf") {
      o.zipf = std::strtod(value.c_str(), &end);
      if (*end != '\0' || !(o.zipf >= 0 && o.zipf <= 5)) return Usage();
    } else if (arg == "--seconds") {
      o.seconds = std::strtod(value.c_str(), &end);
      if (*end != '\0' || !(o.seconds > 0 && o.seconds <= 3600)) {
        return Usage();
      }
    } else if (arg == "--start-at-ms") {
      o.start_at_ms = std::strtoll(value.c_str(), &end, 10);
      if (*end != '\0' || o.start_at_ms < 0) return Usage();
    } else if (arg == "--oob-interval") {
      o.oob_interval = value;
    } else if (arg == "--max-report-age") {
      o.max_report_age = value;
    } else if (arg == "--factor") {
      o.factor = static_cast<int>(std::strtol(value.c_str(), &end, 10));
      if (*end != '\0' || o.factor < 100) return Usage();
    } else if (arg == "--seed") {
      o.seed = std::strtoull(value.c_str(), &end, 10);
      if (*end != '\0') return Usage();
    } else if (arg == "--label") {
      o.label = value;
    } else {
      return Usage();
    }
  }
  if (o.target.rfind("ipv4:", 0) != 0) return Usage();
  // The backends' addresses, which are their identities; all in 127/8.
  const std::vector<std::string> addresses =
      absl::StrSplit(o.target.substr(5), ',');
  std::vector<poise::Candidate> candidates;
  for (const std::string& a : addresses) {
    if (a.rfind("127.", 0) != 0) {
      std::fprintf(stderr, "every backend must be in 127.0.0.0/8: %s\n",
                   a.c_str());
      return 2;
    }
    candidates.push_back({a, 1, true});
  }
  const auto owner_index = poise::WeightedRendezvous::Pick(kHotKey, candidates);
  if (!owner_index.ok()) return Usage();
  const std::string owner = addresses[owner_index.value()];

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

  auto stats = [&o]() -> poise::grpc_lb::ChannelStats {
    for (auto& s : poise::grpc_lb::StatsSnapshot()) {
      if (s.label == o.label) return s;
    }
    return {};
  };

  // Warm-up: fresh keys until every backend has been picked (all READY).
  {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(30);
    int n = 0;
    for (;;) {
      std::string ignored;
      OneCall(*stub, absl::StrCat("warm-up-", o.label, "-", n++), &ignored);
      const auto s = stats();
      bool all = s.backends.size() == addresses.size();
      for (const auto& b : s.backends) all = all && b.picks > 0;
      if (all) break;
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "warm-up: not every backend was picked\n");
        return 1;
      }
    }
  }
  const auto warm = stats();
  int64_t late_ms = 0;
  if (o.start_at_ms >= 0) {
    const auto start = std::chrono::system_clock::time_point(
        std::chrono::milliseconds(o.start_at_ms));
    const auto now = std::chrono::system_clock::now();
    if (now < start) {
      std::this_thread::sleep_until(start);
    } else {
      late_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - start)
              .count();
    }
  }

  const Zipf zipf(o.keys, o.zipf);
  Counts counts;
  const auto stop_at =
      std::chrono::steady_clock::now() +
      std::chrono::microseconds(static_cast<int64_t>(o.seconds * 1e6));
  std::vector<std::thread> threads;
  for (int t = 0; t < o.in_flight; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(o.seed * 1000003u + static_cast<uint64_t>(t) +
                          std::random_device{}());
      std::uniform_real_distribution<double> uniform(0.0, 1.0);
      while (std::chrono::steady_clock::now() < stop_at) {
        const bool hot = uniform(rng) < o.hot_share;
        const std::string key =
            hot ? std::string(kHotKey)
                : absl::StrCat("k", zipf.Draw(uniform(rng)));
        std::string backend;
        const grpc::Status status = OneCall(*stub, key, &backend);
        counts.calls.fetch_add(1);
        if (!status.ok()) {
          counts.errors.fetch_add(1);
          std::lock_guard<std::mutex> lock(counts.mu);
          if (counts.first_error.empty()) {
            counts.first_error = status.error_message();
          }
          continue;
        }
        if (hot) {
          counts.hot_calls.fetch_add(1);
          if (backend == owner) counts.hot_to_owner.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();

  // Every call has ended: every in_flight must return to 0.
  bool zero = false;
  poise::grpc_lb::ChannelStats s;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    s = stats();
    zero = true;
    for (const auto& b : s.backends) zero = zero && b.in_flight == 0;
    zero = zero && s.scope_in_flight == 0;
    if (zero || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  std::string backends;
  for (const auto& b : s.backends) {
    uint64_t warm_picks = 0;
    for (const auto& w : warm.backends) {
      if (w.address == b.address) warm_picks = w.picks;
    }
    absl::StrAppend(&backends, backends.empty() ? "" : ",", "{\"address\":\"",
                    b.address, "\",\"picks\":", b.picks - warm_picks,
                    ",\"spilled_in\":", b.spilled_in,
                    ",\"in_flight\":", b.in_flight,
                    ",\"peak_in_flight\":", b.peak_in_flight,
                    ",\"reported_load\":", b.reported_load,
                    ",\"report_age_ms\":", b.report_age_ms, "}");
  }
  std::printf(
      "{\"label\":\"%s\",\"mode\":\"%s\",\"calls\":%" PRIu64
      ",\"errors\":%" PRIu64 ",\"first_error\":\"%s\",\"hot_calls\":%" PRIu64
      ",\"hot_to_owner\":%" PRIu64 ",\"owner\":\"%s\",\"late_ms\":%" PRId64
      ",\"server_load\":%s,\"load_reports\":%" PRIu64
      ",\"refused_load_reports\":%" PRIu64
      ",\"picks_without_some_report\":%" PRIu64 ",\"picks\":%" PRIu64
      ",\"spills\":%" PRIu64 ",\"in_flight_zero\":%s,\"backends\":[%s]}\n",
      JsonEscape(o.label).c_str(), o.mode.c_str(), counts.calls.load(),
      counts.errors.load(), JsonEscape(counts.first_error).c_str(),
      counts.hot_calls.load(), counts.hot_to_owner.load(), owner.c_str(),
      late_ms, s.server_load ? "true" : "false", s.load_reports,
      s.refused_load_reports, s.picks_without_some_report, s.picks, s.spills,
      zero ? "true" : "false", backends.c_str());
  std::fflush(stdout);
  return zero ? 0 : 3;
}
