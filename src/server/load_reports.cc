// poise::server: the calls in flight of a gRPC server, reported through ORCA
// per call (trailing metadata) and out of band (StreamCoreMetrics).
//
// Ownership: the interceptor factory, which the server owns from
// BuildAndStart() on, holds the counter (State) and the ORCA service, so
// both live as long as the server. A ServerBuilderOption adds a plugin that,
// at BuildAndStart(), registers the service and refuses to start a server
// whose interceptors were replaced after EnableLoadReports.
#include "poise/load_reports.h"

#include <grpc/grpc.h>
#include <grpc/support/log.h>
#include <grpcpp/alarm.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/impl/server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>
#include <grpcpp/impl/service_type.h>
#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/interceptor.h>
#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/slice.h>
#include <grpcpp/support/status.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/core/metric_name.h"
#include "src/server/orca_wire.h"

namespace poise {
namespace load_reports_internal {

class OrcaStream;

struct State {
  explicit State(LoadReportOptions o) : options(std::move(o)) {}

  const LoadReportOptions options;
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> refused{0};
  std::atomic<int64_t> unparsed{0};
  // The interceptor factories alive (0 or 1): 0 at BuildAndStart() means
  // that the builder's interceptors were replaced.
  std::atomic<int> live_factories{0};

  std::mutex streams_mu;
  std::unordered_set<OrcaStream*> streams;  // guarded by streams_mu
  bool streams_ended = false;               // guarded by streams_mu
};

namespace {

using grpc::experimental::InterceptionHookPoints;

// A client asking for a longer interval than this gets reports this often
// (it keeps the alarm's deadline far from overflowing).
constexpr std::chrono::nanoseconds kMaxReportInterval = std::chrono::hours(1);

// The request header admission adds to a refused call (CallRefused); a
// client's own copy is erased first.
constexpr char kRefusedMark[] = "poise-refused-by-admission";

// The longest bound header read (18 digits: below 2^63, so no overflow).
constexpr size_t kMaxBoundDigits = 18;

// The bound in a header value: 1 to 18 decimal digits, at least 1; else
// nullopt.
std::optional<int64_t> ParseBound(grpc::string_ref value) {
  if (value.empty() || value.size() > kMaxBoundDigits) return std::nullopt;
  int64_t bound = 0;
  for (char c : value) {
    if (c < '0' || c > '9') return std::nullopt;
    bound = bound * 10 + (c - '0');
  }
  if (bound < 1) return std::nullopt;
  return bound;
}

// ---------------------------------------------------------------------------
// Per call: counts the call from its creation (with admission: from its
// admission, when its request headers arrive) to its status (or its end,
// for a call whose status is never sent), and puts the report in the
// trailing metadata.
class CountingInterceptor final : public grpc::experimental::Interceptor {
 public:
  CountingInterceptor(std::shared_ptr<State> state,
                      grpc::ServerContextBase* context)
      : state_(std::move(state)), context_(context) {
    if (!state_->options.admission) Count();
  }
  CountingInterceptor(const CountingInterceptor&) = delete;
  CountingInterceptor& operator=(const CountingInterceptor&) = delete;
  ~CountingInterceptor() override { End(); }

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (state_->options.admission &&
        methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      Admit(methods->GetRecvInitialMetadata());
    }
    if (methods->QueryInterceptionHookPoint(
            InterceptionHookPoints::PRE_SEND_STATUS)) {
      // The count when the call ends, this call included.
      const int64_t count = End();
      std::multimap<std::string, std::string>* trailers =
          methods->GetSendTrailingMetadata();
      if (state_->options.per_call && count > 0 && trailers != nullptr) {
        std::string report = EncodeUtilization(state_->options.metric_name,
                                               static_cast<double>(count));
        auto existing = trailers->find(kLoadReportTrailer);
        if (existing != trailers->end()) {
          existing->second += report;  // merged into the handler's report
        } else {
          trailers->emplace(kLoadReportTrailer, std::move(report));
        }
      }
    }
    methods->Proceed();
  }

 private:
  void Count() {
    state_->in_flight.fetch_add(1, std::memory_order_relaxed);
    counted_ = true;
  }

  // Counts the call, or refuses it when the server serves its bound or
  // more. The test and the increment are one compare-exchange: two calls
  // cannot both take the last room.
  void Admit(std::multimap<grpc::string_ref, grpc::string_ref>* metadata) {
    std::optional<int64_t> bound;
    if (metadata != nullptr) {
      metadata->erase(kRefusedMark);  // only this interceptor sets it
      const auto [first, last] = metadata->equal_range(kBoundHeader);
      if (first != last) {
        if (std::next(first) == last) bound = ParseBound(first->second);
        if (!bound.has_value()) {
          state_->unparsed.fetch_add(1, std::memory_order_relaxed);
        }
      }
    }
    if (!bound.has_value()) {
      Count();
      return;
    }
    int64_t count = state_->in_flight.load(std::memory_order_relaxed);
    do {
      if (count >= *bound) {
        MarkRefused(metadata);
        Refuse(count, *bound);
        return;
      }
    } while (!state_->in_flight.compare_exchange_weak(
        count, count + 1, std::memory_order_relaxed));
    counted_ = true;
  }

  // The handler reads the mark from the request headers (CallRefused): the
  // one per-call place an interceptor and a handler share.
  static void MarkRefused(
      std::multimap<grpc::string_ref, grpc::string_ref>* metadata) {
    if (metadata != nullptr) metadata->emplace(kRefusedMark, kRefusedMark);
  }

  // Ends the call with RESOURCE_EXHAUSTED now. Cancelling is the one way a
  // server interceptor can end a call (the handler still runs, on a
  // cancelled call); it sends no trailer of ours, so the count goes in the
  // status message.
  void Refuse(int64_t count, int64_t bound) {
    state_->refused.fetch_add(1, std::memory_order_relaxed);
    const std::string message =
        absl::StrCat(kRefusalPrefix, count, " bound=", bound);
    grpc_call_cancel_with_status(context_->c_call(),
                                 GRPC_STATUS_RESOURCE_EXHAUSTED,
                                 message.c_str(), nullptr);
  }

  // Uncounts the call once; the count before, or 0 if it was done already
  // or the call was never counted.
  int64_t End() {
    if (ended_.exchange(true) || !counted_) return 0;
    return state_->in_flight.fetch_sub(1, std::memory_order_relaxed);
  }

  std::shared_ptr<State> state_;
  grpc::ServerContextBase* const context_;
  std::atomic<bool> counted_{false};
  std::atomic<bool> ended_{false};
};

class CountingFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  CountingFactory(std::shared_ptr<State> state,
                  std::shared_ptr<grpc::Service> service)
      : state_(std::move(state)), service_(std::move(service)) {
    state_->live_factories.fetch_add(1);
  }
  CountingFactory(const CountingFactory&) = delete;
  CountingFactory& operator=(const CountingFactory&) = delete;
  ~CountingFactory() override { state_->live_factories.fetch_sub(1); }

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    // The ORCA stream is not a call in flight: it lasts as long as the
    // client's channel. Nor are the options' uncounted methods.
    const char* method = info->method();
    if (method != nullptr) {
      if (std::strcmp(method, kOrcaStreamMethod) == 0) return nullptr;
      for (const std::string& uncounted : state_->options.uncounted_methods) {
        if (uncounted == method) return nullptr;
      }
    }
    return new CountingInterceptor(state_, info->server_context());
  }

 private:
  std::shared_ptr<State> state_;
  std::shared_ptr<grpc::Service> service_;  // lives as long as the server
};

}  // namespace

// ---------------------------------------------------------------------------
// Out of band: one StreamCoreMetrics call. Writes a report, waits the
// interval on an alarm, writes the next; a write or an alarm is pending at
// any time, never both, so Finish is called once, from whichever of the two
// sees the stream stopped. Reference counted: one reference for OnDone, one
// for a pending alarm callback.
//
// A write can stay pending for as long as the client keeps its connection:
// one that gives no flow-control window or stops reading. EndStreams does
// not wait for it: it cancels the call with the ended status, which fails
// the write, and OnWriteDone then finishes the stream.
class OrcaStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  OrcaStream(std::shared_ptr<State> state, grpc::CallbackServerContext* context,
             const grpc::ByteBuffer* request)
      : state_(std::move(state)), context_(context) {
    absl::StatusOr<std::chrono::nanoseconds> interval = Interval(request);
    if (!interval.ok()) {
      const std::string message(interval.status().message());
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message));
      return;
    }
    interval_ = *interval;
    {
      std::lock_guard<std::mutex> lock(state_->streams_mu);
      if (!state_->streams_ended) {
        state_->streams.insert(this);
        registered_ = true;
      }
    }
    if (!registered_) {
      Finish(EndedStatus());
      return;
    }
    Write();
  }

  // Ends the stream at its next step: at once if an alarm is pending; when
  // the report's write completes if one is pending, or, with
  // cancel_pending_write (EndStreams), at once by cancelling the call.
  void Stop(grpc::Status status, bool cancel_pending_write) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
    stop_status_ = std::move(status);
    // Neither the alarm's callback nor OnWriteDone runs here: gRPC runs
    // them on its executor (ok = false), so holding mu_ cannot deadlock.
    if (alarm_pending_) {
      alarm_->Cancel();
    } else if (write_pending_ && cancel_pending_write) {
      // Not TryCancel(), which sends CANCELLED (and runs the PRE_SEND_CANCEL
      // hook of the server's own interceptors, skipped here): a client
      // whose report was in flight gets the status of every ended stream.
      // The call lives until OnDone, which cannot come while the write is
      // pending (OnWriteDone has not yet taken mu_).
      grpc_call_cancel_with_status(
          context_->c_call(),
          static_cast<grpc_status_code>(stop_status_.error_code()),
          stop_status_.error_message().c_str(), nullptr);
    }
  }

  static grpc::Status EndedStatus() {
    return {grpc::StatusCode::UNAVAILABLE,
            "load reports ended by the server (EndStreams)"};
  }

  void OnWriteDone(bool ok) override {
    std::unique_lock<std::mutex> lock(mu_);
    write_pending_ = false;
    if (!ok || stopping_) {
      grpc::Status status =
          stopping_ ? stop_status_
                    : grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                   "could not write the load report");
      lock.unlock();
      Finish(std::move(status));
      return;
    }
    refs_.fetch_add(1);
    alarm_ = std::make_unique<grpc::Alarm>();
    alarm_pending_ = true;
    alarm_->Set(
        std::chrono::system_clock::now() +
            std::chrono::duration_cast<std::chrono::system_clock::duration>(
                interval_),
        [this](bool fired) { OnAlarm(fired); });
  }

  void OnCancel() override {
    // The call is cancelled already: a pending write fails by itself.
    Stop(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled by the client"),
         /*cancel_pending_write=*/false);
  }

  void OnDone() override {
    if (registered_) {
      std::lock_guard<std::mutex> lock(state_->streams_mu);
      state_->streams.erase(this);
    }
    Unref();
  }

 private:
  absl::StatusOr<std::chrono::nanoseconds> Interval(
      const grpc::ByteBuffer* request) const {
    std::string bytes;
    if (request != nullptr && request->Valid()) {
      std::vector<grpc::Slice> slices;
      grpc::Status dumped = request->Dump(&slices);
      if (!dumped.ok()) {
        return absl::InvalidArgumentError("cannot read the request: " +
                                          dumped.error_message());
      }
      for (const grpc::Slice& slice : slices) {
        bytes.append(reinterpret_cast<const char*>(slice.begin()),
                     slice.size());
      }
    }
    absl::StatusOr<std::optional<std::chrono::nanoseconds>> requested =
        DecodeReportInterval(bytes);
    if (!requested.ok()) return requested.status();
    std::chrono::nanoseconds interval =
        requested->value_or(std::chrono::nanoseconds(0));
    interval = std::max(interval, state_->options.min_report_interval);
    return std::min(interval, kMaxReportInterval);
  }

  // Starts the next report's write, or finishes a stream stopped since the
  // last one (a write started after Stop would not be cancelled).
  void Write() {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stopping_) {
        grpc::Status status = stop_status_;
        lock.unlock();
        Finish(std::move(status));
        return;
      }
      // Set before StartWrite: a Stop in between cancels the call, and the
      // write then fails at once.
      write_pending_ = true;
    }
    const std::string report = EncodeUtilization(
        state_->options.metric_name,
        static_cast<double>(state_->in_flight.load(std::memory_order_relaxed)));
    grpc::Slice slice(report);
    grpc::ByteBuffer buffer(&slice, 1);
    response_.Swap(&buffer);
    StartWrite(&response_);
  }

  void OnAlarm(bool fired) {
    std::unique_lock<std::mutex> lock(mu_);
    alarm_pending_ = false;
    if (stopping_ || !fired) {
      grpc::Status status =
          stopping_ ? stop_status_
                    : grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                   "the report timer was cancelled");
      lock.unlock();
      Finish(std::move(status));
    } else {
      lock.unlock();
      Write();
    }
    Unref();
  }

  void Unref() {
    if (refs_.fetch_sub(1) == 1) delete this;
  }

  const std::shared_ptr<State> state_;
  grpc::CallbackServerContext* const context_;
  std::chrono::nanoseconds interval_{0};
  bool registered_ = false;  // set in the constructor only
  grpc::ByteBuffer response_;
  std::atomic<int> refs_{1};

  std::mutex mu_;
  bool stopping_ = false;               // guarded by mu_
  grpc::Status stop_status_;            // guarded by mu_
  bool alarm_pending_ = false;          // guarded by mu_
  bool write_pending_ = false;          // guarded by mu_
  std::unique_ptr<grpc::Alarm> alarm_;  // guarded by mu_
};

namespace {

class OrcaService final : public grpc::Service {
 public:
  explicit OrcaService(const std::shared_ptr<State>& state) {
    AddMethod(new grpc::internal::RpcServiceMethod(
        kOrcaStreamMethod, grpc::internal::RpcMethod::SERVER_STREAMING,
        /*handler=*/nullptr));
    MarkMethodCallback(
        0, new grpc::internal::CallbackServerStreamingHandler<grpc::ByteBuffer,
                                                              grpc::ByteBuffer>(
               [state](grpc::CallbackServerContext* context,
                       const grpc::ByteBuffer* request) {
                 return new OrcaStream(state, context, request);
               }));
  }
};

// ---------------------------------------------------------------------------
// At BuildAndStart(): registers the ORCA service, or makes the build fail
// when the counting interceptor is no longer the builder's.
class LoadReportsPlugin final : public grpc::ServerBuilderPlugin {
 public:
  LoadReportsPlugin(std::shared_ptr<State> state,
                    std::shared_ptr<grpc::Service> service)
      : state_(std::move(state)), service_(std::move(service)) {}

  std::string name() override { return "poise_load_reports"; }

  void UpdateServerBuilder(grpc::ServerBuilder* builder) override {
    if (state_->live_factories.load() == 0) {
      gpr_log(GPR_ERROR,
              "poise::EnableLoadReports: the server builder's interceptors "
              "were replaced after EnableLoadReports (by "
              "experimental().SetInterceptorCreators or a second "
              "EnableLoadReports), so the calls in flight cannot be counted; "
              "pass your interceptors to EnableLoadReports instead. "
              "BuildAndStart() fails: the ORCA service is registered twice "
              "on purpose.");
      // Registering one service twice makes BuildAndStart() return nullptr.
      if (service_ == nullptr) service_ = std::make_shared<OrcaService>(state_);
      builder->RegisterService(service_.get());
      builder->RegisterService(service_.get());
      return;
    }
    if (service_ != nullptr) builder->RegisterService(service_.get());
  }

  void InitServer(grpc::ServerInitializer* /*si*/) override {}
  void Finish(grpc::ServerInitializer* /*si*/) override {}
  void ChangeArguments(const std::string& /*name*/, void* /*value*/) override {}

 private:
  std::shared_ptr<State> state_;
  std::shared_ptr<grpc::Service> service_;
};

class LoadReportsOption final : public grpc::ServerBuilderOption {
 public:
  LoadReportsOption(std::shared_ptr<State> state,
                    std::shared_ptr<grpc::Service> service)
      : state_(std::move(state)), service_(std::move(service)) {}

  void UpdateArguments(grpc::ChannelArguments* /*args*/) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>*
                         plugins) override {
    plugins->push_back(std::make_unique<LoadReportsPlugin>(state_, service_));
  }

 private:
  std::shared_ptr<State> state_;
  std::shared_ptr<grpc::Service> service_;
};

absl::Status Validate(
    const LoadReportOptions& options,
    const std::vector<
        std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>&
        own) {
  if (!internal::IsMetricName(options.metric_name)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "EnableLoadReports: metric_name ", internal::kMetricNameRule,
        " (the client's serverLoad.metric rule)"));
  }
  if (options.min_report_interval <= std::chrono::nanoseconds(0)) {
    return absl::InvalidArgumentError(
        "EnableLoadReports: min_report_interval must be more than 0");
  }
  if (!options.per_call && !options.out_of_band) {
    return absl::InvalidArgumentError(
        "EnableLoadReports: neither per_call nor out_of_band is on");
  }
  for (const auto& factory : own) {
    if (factory == nullptr) {
      return absl::InvalidArgumentError(
          "EnableLoadReports: an interceptor factory is null");
    }
  }
  return absl::OkStatus();
}

}  // namespace

struct Access {
  static std::shared_ptr<LoadReports> Make(std::shared_ptr<State> state) {
    return std::shared_ptr<LoadReports>(new LoadReports(std::move(state)));
  }
};

}  // namespace load_reports_internal

using load_reports_internal::State;

LoadReports::LoadReports(std::shared_ptr<State> state)
    : state_(std::move(state)) {}

int64_t LoadReports::calls_in_flight() const {
  return state_->in_flight.load(std::memory_order_relaxed);
}

int64_t LoadReports::calls_refused() const {
  return state_->refused.load(std::memory_order_relaxed);
}

int64_t LoadReports::bounds_unparsed() const {
  return state_->unparsed.load(std::memory_order_relaxed);
}

void LoadReports::EndStreams() {
  std::lock_guard<std::mutex> lock(state_->streams_mu);
  state_->streams_ended = true;
  // A stream leaves the set in OnDone, under this lock: each is alive here.
  for (load_reports_internal::OrcaStream* stream : state_->streams) {
    stream->Stop(load_reports_internal::OrcaStream::EndedStatus(),
                 /*cancel_pending_write=*/true);
  }
}

bool CallRefused(const grpc::ServerContextBase& context) {
  return context.client_metadata().count(load_reports_internal::kRefusedMark) >
         0;
}

const LoadReportOptions& LoadReports::options() const {
  return state_->options;
}

std::shared_ptr<LoadReports> EnableLoadReports(grpc::ServerBuilder& builder) {
  absl::StatusOr<std::shared_ptr<LoadReports>> reports =
      EnableLoadReports(builder, LoadReportOptions{});
  // The default options are valid: this is never null.
  return reports.ok() ? *std::move(reports) : nullptr;
}

absl::StatusOr<std::shared_ptr<LoadReports>> EnableLoadReports(
    grpc::ServerBuilder& builder, LoadReportOptions options,
    std::vector<
        std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        own_interceptors) {
  if (absl::Status valid =
          load_reports_internal::Validate(options, own_interceptors);
      !valid.ok()) {
    return valid;
  }
  auto state = std::make_shared<State>(std::move(options));
  std::shared_ptr<grpc::Service> service;
  if (state->options.out_of_band) {
    service = std::make_shared<load_reports_internal::OrcaService>(state);
  }
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      creators;
  creators.reserve(own_interceptors.size() + 1);
  creators.push_back(
      std::make_unique<load_reports_internal::CountingFactory>(state, service));
  for (auto& factory : own_interceptors) creators.push_back(std::move(factory));
  builder.experimental().SetInterceptorCreators(std::move(creators));
  builder.SetOption(std::make_unique<load_reports_internal::LoadReportsOption>(
      state, service));
  return load_reports_internal::Access::Make(std::move(state));
}

}  // namespace poise
