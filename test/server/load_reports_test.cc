// poise::server against real gRPC servers on 127.0.0.1, sync and callback:
// the per-call trailer as gRPC's client channel reads it (lb_sinks.h), the
// out-of-band StreamCoreMetrics stream read both raw (ByteBuffer call,
// reports parsed by grpc_core::ParseBackendMetricData) and by gRPC's own
// ORCA client, the count after cancelled and failed calls, the options and
// the interceptors.
// First: gRPC's internal headers need -UNDEBUG (src/grpc/require_undebug.h).
// clang-format off
#include "src/grpc/require_undebug.h"
#include <grpc/support/port_platform.h>
// clang-format on

#include "poise/load_reports.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_method.h>
#include <grpcpp/support/sync_stream.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "echo.grpc.pb.h"
#include "src/core/metric_name.h"
#include "src/server/orca_wire.h"
#include "test/server/lb_sinks.h"
#include "test/server/metric_parser.h"
#include "test/server/orca_request.h"

namespace poise {
namespace {

using Clock = std::chrono::steady_clock;
using example::EchoReply;
using example::EchoRequest;
using std::chrono::milliseconds;

constexpr auto kWait = std::chrono::seconds(20);  // any awaited event

// ---------------------------------------------------------------------------
// Decoding with gRPC's own client-side parser.

using Allocator = test_support::MetricAllocator;

// The report's utilization map, or nullopt if gRPC cannot parse it.
std::optional<std::map<std::string, double>> Utilization(
    const std::string& serialized) {
  Allocator allocator;
  const grpc_core::BackendMetricData* data =
      grpc_core::ParseBackendMetricData(serialized, &allocator);
  if (data == nullptr) return std::nullopt;
  std::map<std::string, double> out;
  for (const auto& [name, value] : data->utilization) {
    out.emplace(name, value);
  }
  return out;
}

bool Eventually(const std::function<bool()>& done) {
  const auto deadline = Clock::now() + kWait;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

// ---------------------------------------------------------------------------
// The servers: Echo replies at once, or holds the call ("hold") until the
// test releases it or the client cancels; "fail" ends with UNAVAILABLE;
// "own-report" sets its own load-report trailer first.

class HeldReactor;

class Gate {
 public:
  void Enter() {
    std::lock_guard<std::mutex> lock(mu_);
    ++entered_;
    cv_.notify_all();
  }
  // Handlers of calls admission refused: they return at once.
  void EnterRefused() { refused_.fetch_add(1); }
  int refused() const { return refused_.load(); }
  bool AwaitEntered(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, kWait, [&] { return entered_ >= n; });
  }

  // Sync handlers: true when released, false when cancelled (or too long).
  bool Wait(grpc::ServerContext* context) {
    std::unique_lock<std::mutex> lock(mu_);
    const auto deadline = Clock::now() + kWait;
    while (!open_ && tickets_ == 0) {
      if (context->IsCancelled() || Clock::now() > deadline) return false;
      cv_.wait_for(lock, milliseconds(2));
    }
    if (!open_) --tickets_;
    return true;
  }

  // Callback handlers.
  void Park(HeldReactor* reactor);
  bool Unpark(HeldReactor* reactor) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = parked_.begin(); it != parked_.end(); ++it) {
      if (*it == reactor) {
        parked_.erase(it);
        return true;
      }
    }
    return false;
  }

  // Lets n held calls (or, with n < 0, every call from now on) go.
  void Release(int n);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int entered_ = 0;
  std::atomic<int> refused_{0};
  int tickets_ = 0;
  bool open_ = false;
  std::deque<HeldReactor*> parked_;
};

class HeldReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit HeldReactor(Gate* gate) : gate_(gate) {}
  void OnCancel() override {
    if (gate_->Unpark(this)) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    }
  }
  void OnDone() override { delete this; }

 private:
  Gate* gate_;
};

void Gate::Park(HeldReactor* reactor) {
  std::unique_lock<std::mutex> lock(mu_);
  if (open_ || tickets_ > 0) {
    if (!open_) --tickets_;
    lock.unlock();
    reactor->Finish(grpc::Status::OK);
    return;
  }
  parked_.push_back(reactor);
}

void Gate::Release(int n) {
  std::vector<HeldReactor*> released;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (n < 0) {
      open_ = true;
      released.assign(parked_.begin(), parked_.end());
      parked_.clear();
    } else {
      for (; n > 0 && !parked_.empty(); --n) {
        released.push_back(parked_.front());
        parked_.pop_front();
      }
      tickets_ += n;
    }
    cv_.notify_all();
  }
  for (HeldReactor* reactor : released) reactor->Finish(grpc::Status::OK);
}

// Echoes the call's id into the trailer (lb_sinks.h), and on "own-report"
// sets a load report of its own.
void Trailers(
    const EchoRequest& request, grpc::ServerContextBase* context,
    const std::multimap<grpc::string_ref, grpc::string_ref>& client_metadata) {
  auto id = client_metadata.find(test_support::kCallIdKey);
  if (id != client_metadata.end()) {
    context->AddTrailingMetadata(
        test_support::kCallIdKey,
        std::string(id->second.data(), id->second.size()));
  }
  if (request.payload() == "own-report") {
    context->AddTrailingMetadata(
        kLoadReportTrailer,
        load_reports_internal::EncodeUtilization("own", 0.25));
  }
}

class SyncEcho final : public example::Echo::Service {
 public:
  explicit SyncEcho(Gate* gate) : gate_(gate) {}
  grpc::Status Echo(grpc::ServerContext* context, const EchoRequest* request,
                    EchoReply* reply) override {
    if (CallRefused(*context)) {
      gate_->EnterRefused();
      return {grpc::StatusCode::INTERNAL, "the refused call's handler"};
    }
    gate_->Enter();
    Trailers(*request, context, context->client_metadata());
    if (request->payload() == "hold" && !gate_->Wait(context)) {
      return {grpc::StatusCode::CANCELLED, "cancelled"};
    }
    if (request->fail()) {
      return {grpc::StatusCode::UNAVAILABLE, "asked to fail"};
    }
    reply->set_payload(request->payload());
    return grpc::Status::OK;
  }

 private:
  Gate* gate_;
};

class CallbackEcho final : public example::Echo::CallbackService {
 public:
  explicit CallbackEcho(Gate* gate) : gate_(gate) {}
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const EchoRequest* request,
                                 EchoReply* reply) override {
    if (CallRefused(*context)) {
      gate_->EnterRefused();
      grpc::ServerUnaryReactor* refused = context->DefaultReactor();
      refused->Finish(grpc::Status(grpc::StatusCode::INTERNAL,
                                   "the refused call's handler"));
      return refused;
    }
    gate_->Enter();
    Trailers(*request, context, context->client_metadata());
    if (request->payload() == "hold") {
      auto* reactor = new HeldReactor(gate_);
      gate_->Park(reactor);
      return reactor;
    }
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (request->fail()) {
      reactor->Finish(
          grpc::Status(grpc::StatusCode::UNAVAILABLE, "asked to fail"));
    } else {
      reply->set_payload(request->payload());
      reactor->Finish(grpc::Status::OK);
    }
    return reactor;
  }

 private:
  Gate* gate_;
};

enum class Kind { kSync, kCallback };

// One server with the load reports. Shut down on every path: the
// destructor ends the ORCA streams, lets held calls go, and shuts down with
// a deadline.
class TestServer {
 public:
  // Configure runs on the builder in place of EnableLoadReports(builder).
  explicit TestServer(
      Kind kind,
      const std::function<void(grpc::ServerBuilder&)>& configure = nullptr) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    if (kind == Kind::kSync) {
      service_ = std::make_unique<SyncEcho>(&gate_);
    } else {
      service_ = std::make_unique<CallbackEcho>(&gate_);
    }
    builder.RegisterService(service_.get());
    if (configure) {
      configure(builder);
    } else {
      reports_ = EnableLoadReports(builder);
    }
    server_ = builder.BuildAndStart();
    if (server_ != nullptr) {
      channel_ = Channel("intercept_trailing_metadata_lb");
    }
  }
  TestServer(const TestServer&) = delete;
  TestServer& operator=(const TestServer&) = delete;
  ~TestServer() { Shutdown(); }

  void Shutdown() {
    if (server_ == nullptr) return;
    if (reports_ != nullptr) reports_->EndStreams();
    gate_.Release(-1);
    server_->Shutdown(std::chrono::system_clock::now() + milliseconds(5000));
    server_.reset();
  }

  // A channel to the server with a test LB policy of gRPC (lb_sinks.h).
  std::shared_ptr<grpc::Channel> Channel(const std::string& policy) const {
    grpc::ChannelArguments args;
    args.SetServiceConfigJSON(R"({"loadBalancingConfig":[{")" + policy +
                              R"(":{}}]})");
    return grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port_),
                                     grpc::InsecureChannelCredentials(), args);
  }

  bool started() const { return server_ != nullptr; }
  Gate& gate() { return gate_; }
  std::shared_ptr<LoadReports>& reports() { return reports_; }
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }

 private:
  Gate gate_;
  std::unique_ptr<grpc::Service> service_;
  std::shared_ptr<LoadReports> reports_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

// Unary calls through the callback client API; the destructor cancels and
// awaits the calls still open, so no call outlives its context.
class Calls {
 public:
  explicit Calls(std::shared_ptr<grpc::Channel> channel)
      : stub_(example::Echo::NewStub(std::move(channel))) {}
  Calls(const Calls&) = delete;
  Calls& operator=(const Calls&) = delete;
  ~Calls() {
    for (auto& call : calls_) call->context.TryCancel();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kWait, [&] { return done_.size() == calls_.size(); });
  }

  // Starts a call; returns its index.
  size_t Start(const std::string& payload, bool fail = false,
               milliseconds timeout = milliseconds(20000)) {
    return StartWith(payload, {}, fail, timeout);
  }

  // Starts a call with these request headers too.
  size_t StartWith(
      const std::string& payload,
      const std::vector<std::pair<std::string, std::string>>& headers,
      bool fail = false, milliseconds timeout = milliseconds(20000)) {
    auto call = std::make_unique<Call>();
    call->request.set_payload(payload);
    call->request.set_fail(fail);
    call->context.set_deadline(std::chrono::system_clock::now() + timeout);
    call->context.set_wait_for_ready(true);
    call->id = std::to_string(next_id_.fetch_add(1));
    call->context.AddMetadata(test_support::kCallIdKey, call->id);
    for (const auto& [key, value] : headers) {
      call->context.AddMetadata(key, value);
    }
    Call* raw = call.get();
    size_t index = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      index = calls_.size();
      calls_.push_back(std::move(call));
    }
    stub_->async()->Echo(&raw->context, &raw->request, &raw->reply,
                         [this, raw, index](grpc::Status status) {
                           std::lock_guard<std::mutex> lock(mu_);
                           raw->status = std::move(status);
                           done_.push_back(index);
                           cv_.notify_all();
                         });
    return index;
  }

  // The index of the next call to end (in order of ending), or nullopt.
  std::optional<size_t> NextDone() {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, kWait, [&] { return done_.size() > taken_; })) {
      return std::nullopt;
    }
    return done_[taken_++];
  }

  // Starts a call and awaits its end.
  size_t Run(const std::string& payload, bool fail = false) {
    return RunWith(payload, {}, fail);
  }
  size_t RunWith(
      const std::string& payload,
      const std::vector<std::pair<std::string, std::string>>& headers,
      bool fail = false) {
    const size_t index = StartWith(payload, headers, fail);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, kWait, [&] {
      return std::find(done_.begin(), done_.end(), index) != done_.end();
    });
    return index;
  }

  const grpc::Status& status(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[i]->status;
  }
  grpc::ClientContext& context(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_[i]->context;
  }
  // utilization[name] of the call's trailer as gRPC's client channel read
  // it; nullopt without a report or without that key.
  std::optional<double> Metric(size_t i, const std::string& name = "rif") {
    std::string id;
    {
      std::lock_guard<std::mutex> lock(mu_);
      id = calls_[i]->id;
    }
    std::optional<test_support::Utilization> report =
        test_support::Sink().Call(id);
    if (!report.has_value()) return std::nullopt;
    auto it = report->find(name);
    if (it == report->end()) return std::nullopt;
    return it->second;
  }
  bool TrailerSeen(size_t i) {
    std::lock_guard<std::mutex> lock(mu_);
    return test_support::Sink().SawCall(calls_[i]->id);
  }

 private:
  struct Call {
    grpc::ClientContext context;
    EchoRequest request;
    EchoReply reply;
    grpc::Status status;
    std::string id;
  };
  static inline std::atomic<int> next_id_{0};
  std::unique_ptr<example::Echo::Stub> stub_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Call>> calls_;
  std::vector<size_t> done_;
  size_t taken_ = 0;
};

// ---------------------------------------------------------------------------
// The out-of-band stream, read with a plain ByteBuffer call.

using test_support::ReportRequest;

class OrcaStreamClient {
 public:
  OrcaStreamClient(const std::shared_ptr<grpc::Channel>& channel,
                   const std::string& request,
                   const char* method = kOrcaStreamMethod)
      : method_(method, grpc::internal::RpcMethod::SERVER_STREAMING, channel) {
    context_.set_deadline(std::chrono::system_clock::now() + kWait);
    grpc::Slice slice(request);
    grpc::ByteBuffer buffer(&slice, 1);
    reader_.reset(grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(
        channel.get(), method_, &context_, buffer));
  }
  OrcaStreamClient(const OrcaStreamClient&) = delete;
  OrcaStreamClient& operator=(const OrcaStreamClient&) = delete;
  ~OrcaStreamClient() {
    if (!finished_) {
      context_.TryCancel();
      Finish();
    }
  }

  // The next report's utilization map; nullopt when the stream has ended
  // (or the report does not parse: then the map is empty).
  std::optional<std::map<std::string, double>> Next() {
    grpc::ByteBuffer buffer;
    if (!reader_->Read(&buffer)) return std::nullopt;
    std::vector<grpc::Slice> slices;
    std::string bytes;
    if (buffer.Dump(&slices).ok()) {
      for (const auto& s : slices) {
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
    }
    return Utilization(bytes).value_or(std::map<std::string, double>{});
  }

  // Reads until utilization["rif"] == want; false if the stream ends first.
  bool AwaitRif(double want) {
    for (;;) {
      std::optional<std::map<std::string, double>> report = Next();
      if (!report.has_value()) return false;
      auto it = report->find("rif");
      if (it != report->end() && it->second == want) return true;
    }
  }

  grpc::Status Finish() {
    grpc::ByteBuffer ignored;
    while (reader_->Read(&ignored)) {
    }
    finished_ = true;
    return reader_->Finish();
  }

 private:
  grpc::internal::RpcMethod method_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader_;
  bool finished_ = false;
};

// ---------------------------------------------------------------------------

class LoadReportsTest : public ::testing::TestWithParam<Kind> {};

INSTANTIATE_TEST_SUITE_P(Servers, LoadReportsTest,
                         ::testing::Values(Kind::kSync, Kind::kCallback),
                         [](const ::testing::TestParamInfo<Kind>& param) {
                           return param.param == Kind::kSync ? "Sync"
                                                             : "Callback";
                         });

TEST_P(LoadReportsTest, TrailerCountsTheCallsInFlightWhenEachCallEnds) {
  TestServer server(GetParam());
  ASSERT_TRUE(server.started());
  Calls calls(server.channel());
  constexpr int kHeld = 3;
  for (int i = 0; i < kHeld; ++i) calls.Start("hold");
  ASSERT_TRUE(server.gate().AwaitEntered(kHeld));
  EXPECT_EQ(server.reports()->calls_in_flight(), kHeld);
  // Each released call reports the calls in flight when it ended, itself
  // included: 3, then 2, then 1.
  for (int expected = kHeld; expected >= 1; --expected) {
    server.gate().Release(1);
    std::optional<size_t> done = calls.NextDone();
    ASSERT_TRUE(done.has_value());
    ASSERT_TRUE(calls.status(*done).ok())
        << calls.status(*done).error_message();
    EXPECT_EQ(calls.Metric(*done), expected);
  }
  EXPECT_EQ(server.reports()->calls_in_flight(), 0);
  // One call at a time: each reports itself alone.
  for (int i = 0; i < 3; ++i) {
    const size_t call = calls.Run("one");
    ASSERT_TRUE(calls.status(call).ok());
    EXPECT_EQ(calls.Metric(call), 1.0);
  }
  EXPECT_EQ(server.reports()->calls_in_flight(), 0);
}

TEST_P(LoadReportsTest, ErrorStatusCarriesTheReportAndTheCountReturnsToZero) {
  TestServer server(GetParam());
  ASSERT_TRUE(server.started());
  Calls calls(server.channel());
  const size_t failed = calls.Run("x", /*fail=*/true);
  EXPECT_EQ(calls.status(failed).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(calls.Metric(failed), 1.0);
  EXPECT_EQ(server.reports()->calls_in_flight(), 0);
}

TEST_P(LoadReportsTest, CancelledAndTimedOutCallsLeaveTheCount) {
  TestServer server(GetParam());
  ASSERT_TRUE(server.started());
  Calls calls(server.channel());
  const size_t cancelled = calls.Start("hold");
  const size_t timed_out = calls.Start("hold", false, milliseconds(2000));
  ASSERT_TRUE(server.gate().AwaitEntered(2));
  EXPECT_EQ(server.reports()->calls_in_flight(), 2);
  calls.context(cancelled).TryCancel();
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(calls.NextDone().has_value());
  EXPECT_EQ(calls.status(cancelled).error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_EQ(calls.status(timed_out).error_code(),
            grpc::StatusCode::DEADLINE_EXCEEDED);
  // The server learns of the end a little after the client.
  EXPECT_TRUE(
      Eventually([&] { return server.reports()->calls_in_flight() == 0; }));
  const size_t after = calls.Run("after");
  EXPECT_EQ(calls.Metric(after), 1.0);
}

TEST_P(LoadReportsTest, HandlersOwnReportIsKeptAndMerged) {
  TestServer server(GetParam());
  ASSERT_TRUE(server.started());
  Calls calls(server.channel());
  const size_t call = calls.Run("own-report");
  ASSERT_TRUE(calls.status(call).ok());
  EXPECT_EQ(calls.Metric(call, "own"), 0.25);
  EXPECT_EQ(calls.Metric(call, "rif"), 1.0);
}

TEST_P(LoadReportsTest, OutOfBandStreamFollowsTheCount) {
  TestServer server(GetParam());
  ASSERT_TRUE(server.started());
  Calls calls(server.channel());
  {
    OrcaStreamClient stream(server.channel(), ReportRequest(0, 10'000'000));
    // The stream itself is not a call in flight.
    ASSERT_TRUE(stream.AwaitRif(0));
    calls.Start("hold");
    calls.Start("hold");
    ASSERT_TRUE(stream.AwaitRif(2));
    server.gate().Release(1);
    ASSERT_TRUE(stream.AwaitRif(1));
    server.gate().Release(1);
    ASSERT_TRUE(stream.AwaitRif(0));
    // Several reports at 10 ms: the stream goes on.
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(stream.AwaitRif(0));
  }
  EXPECT_EQ(server.reports()->calls_in_flight(), 0);
}

// gRPC's own ORCA client (the client channel's OOB producer, asking for 1 s
// reports) reads the stream.
TEST_P(LoadReportsTest, GrpcOrcaClientReadsTheStream) {
  TestServer server(GetParam());
  ASSERT_TRUE(server.started());
  const size_t before = test_support::Sink().oob_count();
  std::shared_ptr<grpc::Channel> oob_channel =
      server.Channel("oob_backend_metric_test_lb");
  Calls oob_calls(oob_channel);
  ASSERT_TRUE(oob_calls.status(oob_calls.Run("connect")).ok());
  const auto rif_is = [](double want) {
    return [want](const test_support::Utilization& report) {
      auto it = report.find("rif");
      return it != report.end() && it->second == want;
    };
  };
  constexpr auto kOobWait = std::chrono::seconds(20);
  std::optional<size_t> seen =
      test_support::Sink().AwaitOob(before, rif_is(0), kOobWait);
  ASSERT_TRUE(seen.has_value());
  Calls calls(server.channel());
  calls.Start("hold");
  calls.Start("hold");
  seen = test_support::Sink().AwaitOob(*seen, rif_is(2), kOobWait);
  ASSERT_TRUE(seen.has_value());
  server.gate().Release(2);
  seen = test_support::Sink().AwaitOob(*seen, rif_is(0), kOobWait);
  ASSERT_TRUE(seen.has_value());
}

TEST_P(LoadReportsTest, IntervalBelowTheMinimumIsRaisedToIt) {
  std::shared_ptr<LoadReports> reports;
  TestServer server(GetParam(), [&](grpc::ServerBuilder& builder) {
    LoadReportOptions options;
    options.min_report_interval = milliseconds(40);
    auto enabled = EnableLoadReports(builder, options);
    ASSERT_TRUE(enabled.ok()) << enabled.status();
    reports = *enabled;
  });
  server.reports() = reports;
  ASSERT_TRUE(server.started());
  // Asks for 1 ms; gets 40 ms: 6 reports span at least 5 intervals.
  OrcaStreamClient stream(server.channel(), ReportRequest(0, 1'000'000));
  ASSERT_TRUE(stream.Next().has_value());
  const auto first = Clock::now();
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(stream.Next().has_value());
  EXPECT_GE(Clock::now() - first, milliseconds(5 * 40 - 10));
  // A longer interval than the minimum is honoured: 3 reports at 100 ms.
  OrcaStreamClient slower(server.channel(), ReportRequest(0, 100'000'000));
  ASSERT_TRUE(slower.Next().has_value());
  const auto start = Clock::now();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(slower.Next().has_value());
  EXPECT_GE(Clock::now() - start, milliseconds(3 * 100 - 10));
}

TEST_P(LoadReportsTest, NoIntervalMeansTheMinimum) {
  TestServer server(GetParam());
  ASSERT_TRUE(server.started());
  OrcaStreamClient stream(server.channel(), "");
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(stream.AwaitRif(0));
}

TEST_P(LoadReportsTest, MalformedRequestIsInvalidArgument) {
  TestServer server(GetParam());
  ASSERT_TRUE(server.started());
  OrcaStreamClient stream(server.channel(), std::string("\x0a\x05\x08", 3));
  EXPECT_FALSE(stream.Next().has_value());
  const grpc::Status status = stream.Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(status.error_message().find("OrcaLoadReportRequest"),
            std::string::npos);
}

TEST_P(LoadReportsTest, EndStreamsEndsOpenAndNewStreams) {
  TestServer server(GetParam());
  ASSERT_TRUE(server.started());
  OrcaStreamClient open(server.channel(), ReportRequest(1, 0));  // 1 s
  ASSERT_TRUE(open.Next().has_value());
  server.reports()->EndStreams();
  EXPECT_FALSE(open.Next().has_value());
  EXPECT_EQ(open.Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  OrcaStreamClient late(server.channel(), ReportRequest(0, 10'000'000));
  EXPECT_FALSE(late.Next().has_value());
  EXPECT_EQ(late.Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  // Per-call reports go on.
  Calls calls(server.channel());
  const size_t call = calls.Run("x");
  EXPECT_EQ(calls.Metric(call), 1.0);
}

TEST_P(LoadReportsTest, ShutdownAfterEndStreamsDoesNotWaitForAStream) {
  TestServer server(GetParam());
  ASSERT_TRUE(server.started());
  OrcaStreamClient stream(server.channel(), ReportRequest(0, 10'000'000));
  ASSERT_TRUE(stream.Next().has_value());
  const auto start = Clock::now();
  server.Shutdown();  // EndStreams first: no wait for the deadline
  EXPECT_LT(Clock::now() - start, milliseconds(4000));
  EXPECT_FALSE(stream.AwaitRif(-1));
}

TEST_P(LoadReportsTest, CustomMetricName) {
  TestServer server(GetParam(), [&](grpc::ServerBuilder& builder) {
    LoadReportOptions options;
    options.metric_name = "calls";
    options.out_of_band = false;
    ASSERT_TRUE(EnableLoadReports(builder, options).ok());
  });
  ASSERT_TRUE(server.started());
  Calls calls(server.channel());
  const size_t call = calls.Run("x");
  EXPECT_EQ(calls.Metric(call, "calls"), 1.0);
  EXPECT_FALSE(calls.Metric(call, "rif").has_value());
  // out_of_band off: no ORCA service.
  OrcaStreamClient stream(server.channel(), "");
  EXPECT_FALSE(stream.Next().has_value());
  EXPECT_EQ(stream.Finish().error_code(), grpc::StatusCode::UNIMPLEMENTED);
}

TEST_P(LoadReportsTest, UncountedMethodsAreNotCounted) {
  TestServer server(GetParam(), [&](grpc::ServerBuilder& builder) {
    LoadReportOptions options;
    options.uncounted_methods = {"/poise.example.Echo/Echo"};
    ASSERT_TRUE(EnableLoadReports(builder, options).ok());
  });
  ASSERT_TRUE(server.started());
  Calls calls(server.channel());
  const size_t call = calls.Run("x");
  ASSERT_TRUE(calls.status(call).ok());
  EXPECT_TRUE(calls.TrailerSeen(call));
  EXPECT_FALSE(calls.Metric(call).has_value());
}

// gRPC's health Watch stream (uncounted by default) lasts as long as a
// client's channel: it is not a call in flight.
TEST_P(LoadReportsTest, HealthWatchIsNotCountedByDefault) {
  std::shared_ptr<LoadReports> server_reports;
  for (const bool by_default : {true, false}) {
    grpc::EnableDefaultHealthCheckService(true);
    TestServer server(GetParam(), [&](grpc::ServerBuilder& builder) {
      LoadReportOptions options;
      if (!by_default) options.uncounted_methods.clear();
      auto enabled = EnableLoadReports(builder, options);
      ASSERT_TRUE(enabled.ok());
      server_reports = *enabled;
    });
    grpc::EnableDefaultHealthCheckService(false);
    ASSERT_TRUE(server.started());
    server.reports() = std::move(server_reports);
    OrcaStreamClient watch(server.channel(), "",
                           "/grpc.health.v1.Health/Watch");
    ASSERT_TRUE(watch.Next().has_value());  // SERVING
    EXPECT_EQ(server.reports()->calls_in_flight(), by_default ? 0 : 1);
    Calls calls(server.channel());
    const size_t call = calls.Run("x");
    EXPECT_EQ(calls.Metric(call), by_default ? 1.0 : 2.0);
  }
}

TEST_P(LoadReportsTest, PerCallOffStillCountsOutOfBand) {
  std::shared_ptr<LoadReports> reports;
  TestServer server(GetParam(), [&](grpc::ServerBuilder& builder) {
    LoadReportOptions options;
    options.per_call = false;
    auto enabled = EnableLoadReports(builder, options);
    ASSERT_TRUE(enabled.ok());
    reports = *enabled;
  });
  server.reports() = reports;
  ASSERT_TRUE(server.started());
  Calls calls(server.channel());
  OrcaStreamClient stream(server.channel(), ReportRequest(0, 10'000'000));
  calls.Start("hold");
  ASSERT_TRUE(stream.AwaitRif(1));
  server.gate().Release(1);
  const std::optional<size_t> done = calls.NextDone();
  ASSERT_TRUE(done.has_value());
  EXPECT_TRUE(calls.TrailerSeen(*done));
  EXPECT_FALSE(calls.Metric(*done).has_value());
  ASSERT_TRUE(stream.AwaitRif(0));
}

// The server's own interceptors, passed to EnableLoadReports, run too.
class SeenFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit SeenFactory(std::atomic<int>* seen) : seen_(seen) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* /*info*/) override {
    seen_->fetch_add(1);
    return nullptr;
  }

 private:
  std::atomic<int>* seen_;
};

TEST_P(LoadReportsTest, OwnInterceptorsAreKept) {
  std::atomic<int> seen{0};
  TestServer server(GetParam(), [&](grpc::ServerBuilder& builder) {
    std::vector<
        std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        own;
    own.push_back(std::make_unique<SeenFactory>(&seen));
    ASSERT_TRUE(EnableLoadReports(builder, {}, std::move(own)).ok());
  });
  ASSERT_TRUE(server.started());
  Calls calls(server.channel());
  const size_t call = calls.Run("x");
  EXPECT_EQ(calls.Metric(call), 1.0);
  EXPECT_EQ(seen.load(), 1);
}

TEST_P(LoadReportsTest, InterceptorsReplacedAfterwardsFailTheBuild) {
  TestServer server(GetParam(), [&](grpc::ServerBuilder& builder) {
    EnableLoadReports(builder);
    builder.experimental().SetInterceptorCreators({});
  });
  EXPECT_FALSE(server.started());
  TestServer twice(GetParam(), [&](grpc::ServerBuilder& builder) {
    EnableLoadReports(builder);
    EnableLoadReports(builder);
  });
  EXPECT_FALSE(twice.started());
}

// ---------------------------------------------------------------------------
// Admission: a call carrying its client's bound is refused when the server
// already serves that many counted calls.

std::function<void(grpc::ServerBuilder&)> WithAdmission(
    std::shared_ptr<LoadReports>* reports) {
  return [reports](grpc::ServerBuilder& builder) {
    LoadReportOptions options;
    options.admission = true;
    absl::StatusOr<std::shared_ptr<LoadReports>> enabled =
        EnableLoadReports(builder, options);
    ASSERT_TRUE(enabled.ok());
    *reports = *enabled;
  };
}

std::vector<std::pair<std::string, std::string>> Bound(const std::string& n) {
  return {{kBoundHeader, n}};
}

// The count in a refusal's message, or nullopt if it is not a refusal.
std::optional<int64_t> RefusalCount(const grpc::Status& status) {
  const std::string& message = status.error_message();
  const std::string prefix = kRefusalPrefix;
  if (status.error_code() != grpc::StatusCode::RESOURCE_EXHAUSTED ||
      message.compare(0, prefix.size(), prefix) != 0) {
    return std::nullopt;
  }
  return std::stoll(message.substr(prefix.size()));
}

TEST_P(LoadReportsTest, AdmissionRefusesACallAtItsBoundWithoutCountingIt) {
  std::shared_ptr<LoadReports> reports;
  TestServer server(GetParam(), WithAdmission(&reports));
  ASSERT_TRUE(server.started());
  Calls calls(server.channel());
  calls.StartWith("hold", Bound("2"));
  calls.StartWith("hold", Bound("2"));
  ASSERT_TRUE(server.gate().AwaitEntered(2));
  ASSERT_EQ(reports->calls_in_flight(), 2);

  const size_t refused = calls.RunWith("x", Bound("2"));
  EXPECT_EQ(RefusalCount(calls.status(refused)), 2);
  // Its handler ran on the ended call and knew it (CallRefused), and
  // the client saw the refusal, not the handler's status.
  EXPECT_TRUE(Eventually([&] { return server.gate().refused() == 1; }));
  EXPECT_EQ(reports->calls_in_flight(), 2);
  EXPECT_EQ(reports->calls_refused(), 1);
  // A bound with room, and a call without a bound, are admitted.
  EXPECT_TRUE(calls.status(calls.RunWith("x", Bound("3"))).ok());
  EXPECT_TRUE(calls.status(calls.Run("x")).ok());
  EXPECT_EQ(reports->calls_refused(), 1);
  EXPECT_EQ(reports->bounds_unparsed(), 0);

  server.gate().Release(-1);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(calls.NextDone().has_value());
  EXPECT_TRUE(Eventually([&] { return reports->calls_in_flight() == 0; }));
}

TEST_P(LoadReportsTest, AdmissionAdmitsExactlyTheBoundOfConcurrentCalls) {
  std::shared_ptr<LoadReports> reports;
  TestServer server(GetParam(), WithAdmission(&reports));
  ASSERT_TRUE(server.started());
  Calls calls(server.channel());
  constexpr int kBound = 5;
  constexpr int kCalls = 40;
  for (int i = 0; i < kCalls; ++i) calls.StartWith("hold", Bound("5"));
  int refused = 0;
  for (int i = 0; i < kCalls - kBound; ++i) {
    const std::optional<size_t> done = calls.NextDone();
    ASSERT_TRUE(done.has_value());
    const std::optional<int64_t> count = RefusalCount(calls.status(*done));
    ASSERT_TRUE(count.has_value()) << calls.status(*done).error_message();
    EXPECT_EQ(*count, kBound);
    ++refused;
  }
  EXPECT_EQ(refused, kCalls - kBound);
  EXPECT_EQ(reports->calls_in_flight(), kBound);
  EXPECT_EQ(reports->calls_refused(), kCalls - kBound);
  EXPECT_TRUE(
      Eventually([&] { return server.gate().refused() == kCalls - kBound; }));
  server.gate().Release(-1);
  for (int i = 0; i < kBound; ++i) {
    const std::optional<size_t> done = calls.NextDone();
    ASSERT_TRUE(done.has_value());
    EXPECT_TRUE(calls.status(*done).ok());
  }
  EXPECT_TRUE(Eventually([&] { return reports->calls_in_flight() == 0; }));
}

TEST_P(LoadReportsTest, AdmissionAdmitsAndCountsHostileBoundHeaders) {
  std::shared_ptr<LoadReports> reports;
  TestServer server(GetParam(), WithAdmission(&reports));
  ASSERT_TRUE(server.started());
  Calls calls(server.channel());
  calls.Start("hold");  // one call in flight: a bound of 1 would refuse
  ASSERT_TRUE(server.gate().AwaitEntered(1));
  const std::vector<std::string> hostile = {
      "",
      "0",
      "-1",
      "+1",
      " 1",
      "1 ",
      "0x1",
      "1.5",
      "abc",
      "1e3",
      std::string(19, '9'),
      "99999999999999999999999999999999999999"};
  for (const std::string& value : hostile) {
    const size_t call = calls.RunWith("x", Bound(value));
    EXPECT_TRUE(calls.status(call).ok())
        << "'" << value << "': " << calls.status(call).error_message();
  }
  // Sent twice: which one holds is unclear, so neither does.
  const size_t twice =
      calls.RunWith("x", {{kBoundHeader, "1"}, {kBoundHeader, "1"}});
  EXPECT_TRUE(calls.status(twice).ok()) << calls.status(twice).error_message();
  EXPECT_EQ(reports->bounds_unparsed(),
            static_cast<int64_t>(hostile.size()) + 1);
  EXPECT_EQ(reports->calls_refused(), 0);
  // Each was counted while it ran: its trailer says 2.
  EXPECT_EQ(calls.Metric(twice), 2.0);
  server.gate().Release(-1);
  ASSERT_TRUE(calls.NextDone().has_value());
  EXPECT_TRUE(Eventually([&] { return reports->calls_in_flight() == 0; }));
}

TEST_P(LoadReportsTest, WithoutAdmissionTheBoundHeaderIsIgnored) {
  TestServer server(GetParam());
  ASSERT_TRUE(server.started());
  Calls calls(server.channel());
  calls.Start("hold");
  ASSERT_TRUE(server.gate().AwaitEntered(1));
  const size_t call = calls.RunWith("x", Bound("1"));
  EXPECT_TRUE(calls.status(call).ok());
  EXPECT_EQ(calls.Metric(call), 2.0);
  EXPECT_EQ(server.reports()->calls_refused(), 0);
}

TEST_P(LoadReportsTest, AdmissionKeepsOwnInterceptors) {
  std::atomic<int> seen{0};
  std::shared_ptr<LoadReports> reports;
  TestServer server(GetParam(), [&](grpc::ServerBuilder& builder) {
    std::vector<
        std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        own;
    own.push_back(std::make_unique<SeenFactory>(&seen));
    LoadReportOptions options;
    options.admission = true;
    auto enabled = EnableLoadReports(builder, options, std::move(own));
    ASSERT_TRUE(enabled.ok());
    reports = *enabled;
  });
  ASSERT_TRUE(server.started());
  Calls calls(server.channel());
  EXPECT_EQ(calls.Metric(calls.RunWith("x", Bound("1"))), 1.0);
  EXPECT_EQ(seen.load(), 1);
}

TEST(LoadReportOptionsTest, InvalidOptionsAreRefusedAndLeaveTheBuilder) {
  const auto refused = [](LoadReportOptions options,
                          bool null_interceptor = false) {
    grpc::ServerBuilder builder;
    Gate gate;
    SyncEcho service(&gate);
    builder.RegisterService(&service);
    std::vector<
        std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        own;
    if (null_interceptor) own.emplace_back();
    absl::StatusOr<std::shared_ptr<LoadReports>> enabled =
        EnableLoadReports(builder, std::move(options), std::move(own));
    // The builder still builds a server, without load reports.
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    EXPECT_NE(server, nullptr);
    if (server != nullptr) {
      server->Shutdown(std::chrono::system_clock::now() + milliseconds(1000));
    }
    return enabled.status();
  };
  LoadReportOptions empty_name;
  empty_name.metric_name.clear();
  LoadReportOptions zero_interval;
  zero_interval.min_report_interval = milliseconds(0);
  LoadReportOptions nothing;
  nothing.per_call = false;
  nothing.out_of_band = false;
  for (const absl::Status& status :
       {refused(empty_name), refused(zero_interval), refused(nothing),
        refused(LoadReportOptions{}, /*null_interceptor=*/true)}) {
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_NE(status.message().find("EnableLoadReports"), std::string::npos);
  }
  // metric_name follows the client's serverLoad.metric rule: a name no
  // client could read is refused, naming the field.
  for (const std::string& name :
       {std::string(300, 'm'), std::string(65, 'm'), std::string("a b"),
        std::string("rif\n"), std::string("r\xc3\xa9")}) {
    LoadReportOptions options;
    options.metric_name = name;
    const absl::Status status = refused(options);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(status.message().find("metric_name"), std::string::npos)
        << status;
  }
  for (const std::string& name : {std::string(64, 'm'), std::string("rif")}) {
    EXPECT_TRUE(internal::IsMetricName(name)) << name;
  }
}

TEST(LoadReportsLifetimeTest, HandleOutlivesTheServer) {
  std::shared_ptr<LoadReports> reports;
  {
    TestServer server(Kind::kSync);
    ASSERT_TRUE(server.started());
    reports = server.reports();
    Calls calls(server.channel());
    calls.Run("x");
  }
  EXPECT_EQ(reports->calls_in_flight(), 0);
  EXPECT_EQ(reports->options().metric_name, "rif");
  reports->EndStreams();
}

}  // namespace
}  // namespace poise
