// poise-fleet-backend: one backend of a fleet, for the fleet comparison
// (bench/fleet.sh, test/e2e/fleet_e2e_test.cc). It serves the examples' Echo
// service by waiting a call time, reports its calls in flight through
// poise::EnableLoadReports (or not, or garbage), and measures its OWN
// concurrency over a window: the peak and the time-weighted average number of
// calls in its handler.
//
//   poise-fleet-backend [--ip 127.0.0.1] [--port 0] [--call-ms 20]
//       [--exponential] [--reports both|per-call|oob|none]
//       [--garbage nan|negative] [--lie 2^40|1e12|alternating]
//       [--window-start-ms EPOCH_MS] [--window-start-file PATH]
//       [--window-ms N] [--key-header x-key] [--hot-key hot]
//       [--admission] [--refuse-all COUNT]
//
// It prints "listening on IP:PORT" once it serves, and on SIGTERM or SIGINT
// ends its ORCA streams, shuts down (1 s deadline) and prints one JSON line:
//   {"address":..,"calls":..,"window_calls":..,"window_hot_calls":..,
//    "peak":..,"avg":..,"window_s":..,"in_flight":..,"refused":..,
//    "unparsed":..,"bound_headers":..,"max_bound":..}
// The window is [window-start-ms, window-start-ms + window-ms] on the system
// clock (milliseconds since the epoch), so that processes started apart agree
// on it; without --window-start-ms it is from the start to the signal.
// --window-start-file: the window starts at the time PATH will hold
// (start_file.h), so that a fleet can agree on it once all of it is ready.
//
// --garbage makes every reply carry its own endpoint-load-metrics-bin trailer
// with utilization "rif" = NaN or -5. The server library appends its own
// "rif" entry to a handler's trailer and the last entry of a map wins, so a
// garbage backend must run without it: --garbage implies --reports none.
//
// --lie makes the out-of-band ORCA stream (StreamCoreMetrics) report
// utilization "rif" = 2^40 or 1e12 calls in flight, whatever the backend
// serves, or 0 and 1e12 on successive reports (alternating, from 0); both
// values are counts a client accepts (it refuses values above 2^40). The
// stream writes at the interval the client asks for, never more often than
// every 10 ms, as the server library's does. It replaces the library's
// stream, which cannot be registered next to it, and no per-call report
// would carry the true count: --lie implies --reports none. The calls are
// served and measured as without it.
//
// --admission: LoadReportOptions::admission; a refused call's handler
// returns at once (poise::CallRefused), unmeasured. --refuse-all COUNT
// answers every call as a refusal at COUNT calls would (RESOURCE_EXHAUSTED,
// "poise-refused count=COUNT ..."), without the library's admission: for a
// client's handling of refusals. "bound_headers" counts the served calls that
// carried poise-bound, "max_bound" is the largest bound among them (0: none):
// with admission no backend serves more calls at once than that.
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/support/method_handler.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "echo.grpc.pb.h"
#include "poise/load_reports.h"
#include "src/server/orca_wire.h"
#include "start_file.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int /*signal*/) { g_stop = 1; }

using Clock = std::chrono::system_clock;

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             Clock::now().time_since_epoch())
      .count();
}

int Usage() {
  std::fprintf(
      stderr,
      "usage: poise-fleet-backend [--ip 127.0.0.1] [--port 0] [--call-ms 20]\n"
      "    [--exponential] [--reports both|per-call|oob|none]\n"
      "    [--garbage nan|negative] [--lie 2^40|1e12|alternating]\n"
      "    [--window-start-ms EPOCH_MS] [--window-start-file PATH]\n"
      "    [--window-ms N] [--key-header x-key] [--hot-key hot]\n"
      "    [--admission] [--refuse-all COUNT]\n"
      "--lie: the ORCA stream reports that many calls in flight (alternating:\n"
      "    0 and 1e12 in turn) at the client's interval; implies --reports "
      "none\n");
  return 2;
}

bool ParseInt(const std::string& text, int64_t low, int64_t high,
              int64_t* out) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < low || v > high) return false;
  *out = v;
  return true;
}

// The metric the server library reports and the fleet client reads.
constexpr char kMetric[] = "rif";

// A serialized xds.data.orca.v3.OrcaLoadReport with utilization["rif"] =
// value.
std::string Report(double value) {
  return poise::load_reports_internal::EncodeUtilization(kMetric, value);
}

// The time-weighted level of calls in flight over a window [start, end] in
// microseconds since the epoch: the integral of the level over the window,
// and the highest level held there for some positive time.
class Concurrency {
 public:
  Concurrency(int64_t start_us, int64_t end_us)
      : start_us_(start_us), end_us_(end_us), last_us_(NowUs()) {}

  // Moves the window (before it starts: --window-start-file).
  void SetWindow(int64_t start_us, int64_t end_us) {
    std::lock_guard<std::mutex> lock(mu_);
    Advance(NowUs());
    start_us_ = start_us;
    end_us_ = end_us;
  }

  void Change(int delta, bool hot) {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = NowUs();
    Advance(now);
    level_ += delta;
    if (delta > 0) {
      ++calls_;
      if (now >= start_us_ && now < end_us_) {
        ++window_calls_;
        if (hot) ++window_hot_calls_;
      }
    }
  }

  // Ends the window at `end_us` if it is still open (a signal before its
  // end) and prints the JSON line.
  void Print(const std::string& address, int64_t refused, int64_t unparsed,
             uint64_t bound_headers, int64_t max_bound) {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = NowUs();
    Advance(now);
    const int64_t end = std::min(end_us_, now);
    const int64_t length = std::max<int64_t>(0, end - start_us_);
    const double avg = length > 0 ? area_ / static_cast<double>(length) : 0.0;
    std::printf("{\"address\":\"%s\",\"calls\":%" PRIu64
                ",\"window_calls\":%" PRIu64 ",\"window_hot_calls\":%" PRIu64
                ",\"peak\":%d,\"avg\":%.4f,\"window_s\":%.3f,\"in_flight\":%d"
                ",\"refused\":%" PRId64 ",\"unparsed\":%" PRId64
                ",\"bound_headers\":%" PRIu64 ",\"max_bound\":%" PRId64 "}\n",
                address.c_str(), calls_, window_calls_, window_hot_calls_,
                peak_, avg, static_cast<double>(length) / 1e6, level_, refused,
                unparsed, bound_headers, max_bound);
    std::fflush(stdout);
  }

 private:
  // The level held from last_us_ to now, clipped to the window.
  void Advance(int64_t now) {
    const int64_t from = std::max(last_us_, start_us_);
    const int64_t to = std::min(now, end_us_);
    if (to > from) {
      area_ += static_cast<double>(level_) * static_cast<double>(to - from);
      peak_ = std::max(peak_, level_);
    }
    last_us_ = now;
  }

  std::mutex mu_;
  int64_t start_us_;
  int64_t end_us_;
  int64_t last_us_;
  int level_ = 0;
  int peak_ = 0;
  double area_ = 0.0;  // level x microseconds
  uint64_t calls_ = 0;
  uint64_t window_calls_ = 0;
  uint64_t window_hot_calls_ = 0;
};

struct Options {
  std::string ip = "127.0.0.1";
  int64_t port = 0;
  int64_t call_ms = 20;
  bool exponential = false;
  std::string reports = "both";
  std::string garbage;  // "", "nan" or "negative"
  std::string lie;      // "", "2^40", "1e12" or "alternating"
  int64_t window_start_ms = -1;
  std::string window_start_file;
  int64_t window_ms = -1;
  std::string key_header = "x-key";
  std::string hot_key = "hot";
  bool admission = false;
  int64_t refuse_all = -1;  // -1: serve
};

class Service final : public poise::example::Echo::Service {
 public:
  Service(const Options& options, Concurrency* concurrency)
      : options_(options), concurrency_(concurrency) {
    if (options.garbage == "nan") {
      garbage_ = Report(std::numeric_limits<double>::quiet_NaN());
    } else if (options.garbage == "negative") {
      garbage_ = Report(-5.0);
    }
  }

  void set_address(std::string address) { address_ = std::move(address); }
  uint64_t bound_headers() const { return bound_headers_.load(); }
  int64_t max_bound() const { return max_bound_.load(); }

  grpc::Status Echo(grpc::ServerContext* context,
                    const poise::example::EchoRequest* request,
                    poise::example::EchoReply* reply) override {
    // Not measured: gRPC runs the handler of a call admission refused.
    if (poise::CallRefused(*context)) {
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, "refused"};
    }
    const auto& metadata = context->client_metadata();
    if (auto it = metadata.find(poise::kBoundHeader); it != metadata.end()) {
      bound_headers_.fetch_add(1);
      int64_t bound = 0;
      if (absl::SimpleAtoi(
              absl::string_view(it->second.data(), it->second.size()),
              &bound)) {
        int64_t seen = max_bound_.load();
        while (bound > seen && !max_bound_.compare_exchange_weak(seen, bound)) {
        }
      }
    }
    if (options_.refuse_all >= 0) {
      return {grpc::StatusCode::RESOURCE_EXHAUSTED,
              absl::StrCat(poise::kRefusalPrefix, options_.refuse_all,
                           " bound=", options_.refuse_all)};
    }
    bool hot = false;
    if (auto it = metadata.find(options_.key_header); it != metadata.end()) {
      hot = std::string_view(it->second.data(), it->second.size()) ==
            options_.hot_key;
    }
    concurrency_->Change(+1, hot);
    auto ms = static_cast<double>(options_.call_ms);
    if (options_.exponential && ms > 0) {
      thread_local std::mt19937_64 rng(std::random_device{}());
      ms = std::exponential_distribution<double>(1.0 / ms)(rng);
    }
    ms += request->delay_ms();
    const auto until =
        std::chrono::steady_clock::now() +
        std::chrono::microseconds(static_cast<int64_t>(ms * 1e3));
    grpc::Status status = grpc::Status::OK;
    // Sleep in slices so that a cancelled call ends promptly.
    for (;;) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= until) break;
      if (context->IsCancelled()) {
        status = grpc::Status(grpc::StatusCode::CANCELLED, "cancelled");
        break;
      }
      std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
          std::chrono::milliseconds(5), until - now));
    }
    if (!garbage_.empty()) {
      context->AddTrailingMetadata(poise::kLoadReportTrailer, garbage_);
    }
    reply->set_backend_id(address_);
    reply->set_payload(request->payload());
    concurrency_->Change(-1, false);
    return status;
  }

 private:
  const Options& options_;
  Concurrency* const concurrency_;
  std::string garbage_;
  std::string address_;
  std::atomic<uint64_t> bound_headers_{0};
  std::atomic<int64_t> max_bound_{0};
};

// The lying out-of-band stream of --lie, on a sync handler: one server thread
// per stream, which a fleet backend's few clients can afford.
class LyingOrcaService final : public grpc::Service {
 public:
  explicit LyingOrcaService(std::string lie) : lie_(std::move(lie)) {
    AddMethod(new grpc::internal::RpcServiceMethod(
        poise::kOrcaStreamMethod, grpc::internal::RpcMethod::SERVER_STREAMING,
        new grpc::internal::ServerStreamingHandler<
            LyingOrcaService, grpc::ByteBuffer, grpc::ByteBuffer>(
            [](LyingOrcaService* service, grpc::ServerContext* context,
               const grpc::ByteBuffer* request,
               grpc::ServerWriter<grpc::ByteBuffer>* writer) {
              return service->Stream(context, *request, writer);
            },
            this)));
  }

  // Ends every stream at its next step, and any later one at once (before
  // the server shuts down, which would wait for them).
  void EndStreams() { ended_.store(true); }

 private:
  // The value of the stream's n-th report (from 0).
  double Lie(uint64_t n) const {
    if (lie_ == "2^40") return 1099511627776.0;
    if (lie_ == "1e12") return 1e12;
    return n % 2 == 0 ? 0.0 : 1e12;  // alternating
  }

  grpc::Status Stream(grpc::ServerContext* context,
                      const grpc::ByteBuffer& request,
                      grpc::ServerWriter<grpc::ByteBuffer>* writer) const {
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (request.Valid() && request.Dump(&slices).ok()) {
      for (const grpc::Slice& slice : slices) {
        bytes.append(reinterpret_cast<const char*>(slice.begin()),
                     slice.size());
      }
    }
    const auto requested =
        poise::load_reports_internal::DecodeReportInterval(bytes);
    if (!requested.ok()) {
      return {grpc::StatusCode::INVALID_ARGUMENT,
              std::string{requested.status().message()}};
    }
    // The server library's floor and ceiling (LoadReportOptions).
    const std::chrono::nanoseconds interval =
        std::clamp<std::chrono::nanoseconds>(
            requested->value_or(std::chrono::nanoseconds(0)),
            std::chrono::milliseconds(10), std::chrono::hours(1));
    for (uint64_t n = 0;; ++n) {
      grpc::Slice slice(Report(Lie(n)));
      if (!writer->Write(grpc::ByteBuffer(&slice, 1))) {
        return {grpc::StatusCode::UNAVAILABLE,
                "could not write the load report"};
      }
      // In slices, so that a signal or the client's cancel ends it promptly.
      const auto next = std::chrono::steady_clock::now() + interval;
      for (auto now = std::chrono::steady_clock::now(); now < next;
           now = std::chrono::steady_clock::now()) {
        if (ended_.load()) {
          return {grpc::StatusCode::UNAVAILABLE,
                  "load reports ended by the server"};
        }
        if (context->IsCancelled()) {
          return {grpc::StatusCode::CANCELLED, "cancelled by the client"};
        }
        std::this_thread::sleep_for(
            std::min<std::chrono::steady_clock::duration>(
                std::chrono::milliseconds(5), next - now));
      }
    }
  }

  const std::string lie_;
  std::atomic<bool> ended_{false};
};

// One option that takes a value; false for a bad one.
bool ParseValue(const std::string& arg, const std::string& value,
                Options* options) {
  if (arg == "--ip") {
    options->ip = value;
    return value.rfind("127.", 0) == 0;  // never outside 127.0.0.0/8
  }
  if (arg == "--port") return ParseInt(value, 0, 65535, &options->port);
  if (arg == "--call-ms") return ParseInt(value, 0, 60000, &options->call_ms);
  if (arg == "--reports") {
    options->reports = value;
    return value == "both" || value == "per-call" || value == "oob" ||
           value == "none";
  }
  if (arg == "--garbage") {
    options->garbage = value;
    return value == "nan" || value == "negative";
  }
  if (arg == "--lie") {
    options->lie = value;
    return value == "2^40" || value == "1e12" || value == "alternating";
  }
  if (arg == "--window-start-ms") {
    return ParseInt(value, 0, std::numeric_limits<int64_t>::max() / 1000,
                    &options->window_start_ms);
  }
  if (arg == "--window-start-file") {
    options->window_start_file = value;
    return !value.empty();
  }
  if (arg == "--window-ms") {
    return ParseInt(value, 1, 86400000, &options->window_ms);
  }
  if (arg == "--key-header") {
    options->key_header = value;
    return true;
  }
  if (arg == "--hot-key") {
    options->hot_key = value;
    return true;
  }
  if (arg == "--refuse-all") {
    return ParseInt(value, 0, 1000000, &options->refuse_all);
  }
  return false;
}

// The command line; false for a bad one.
bool ParseOptions(int argc, char** argv, Options* options) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--exponential") {
      options->exponential = true;
      continue;
    }
    if (arg == "--admission") {
      options->admission = true;
      continue;
    }
    if (i + 1 >= argc || !ParseValue(arg, argv[++i], options)) return false;
  }
  if (!options->garbage.empty() || !options->lie.empty()) {
    options->reports = "none";
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, &options)) return Usage();

  // The window [start, start + window-ms] (no end without --window-ms).
  const auto window_from = [&](int64_t start_us) {
    return std::pair<int64_t, int64_t>{
        start_us, options.window_ms > 0 ? start_us + options.window_ms * 1000
                                        : std::numeric_limits<int64_t>::max()};
  };
  // Until --window-start-file holds a time, no window (it starts never).
  const auto [start_us, end_us] =
      !options.window_start_file.empty()
          ? std::pair<int64_t, int64_t>{std::numeric_limits<int64_t>::max(),
                                        std::numeric_limits<int64_t>::max()}
          : window_from(options.window_start_ms >= 0
                            ? options.window_start_ms * 1000
                            : NowUs());
  Concurrency concurrency(start_us, end_us);
  Service service(options, &concurrency);

  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(absl::StrCat(options.ip, ":", options.port),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::optional<LyingOrcaService> liar;
  if (!options.lie.empty()) builder.RegisterService(&liar.emplace(options.lie));
  std::shared_ptr<poise::LoadReports> reports;
  if (options.reports != "none") {
    poise::LoadReportOptions report_options;
    report_options.per_call = options.reports != "oob";
    report_options.out_of_band = options.reports != "per-call";
    report_options.admission = options.admission;
    auto enabled = poise::EnableLoadReports(builder, report_options);
    if (!enabled.ok()) {
      std::fprintf(stderr, "%s\n", enabled.status().ToString().c_str());
      return 1;
    }
    reports = *std::move(enabled);
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    std::fprintf(stderr, "could not listen on %s:%" PRId64 "\n",
                 options.ip.c_str(), options.port);
    return 1;
  }
  const std::string address = absl::StrCat(options.ip, ":", port);
  service.set_address(address);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::printf("listening on %s\n", address.c_str());
  std::fflush(stdout);

  bool window_set = options.window_start_file.empty();
  while (!g_stop) {
    std::this_thread::sleep_for(std::chrono::milliseconds(window_set ? 20 : 2));
    if (window_set) continue;
    if (const std::optional<int64_t> ms =
            poise::fleet::ReadStartFile(options.window_start_file)) {
      const auto [from, to] = window_from(*ms * 1000);
      concurrency.SetWindow(from, to);
      window_set = true;
    }
  }
  if (reports != nullptr) reports->EndStreams();
  if (liar.has_value()) liar->EndStreams();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server->Wait();
  concurrency.Print(address, reports ? reports->calls_refused() : 0,
                    reports ? reports->bounds_unparsed() : 0,
                    service.bound_headers(), service.max_bound());
  return 0;
}
