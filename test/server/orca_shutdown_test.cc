// EndStreams() then grpc::Server::Shutdown() without a deadline, with ORCA
// clients whose streams the server cannot write to: a raw HTTP/2 client
// (raw_http2_client.h) that gives the server no flow-control window, and one
// that stops reading once the server has used up the connection's window.
// Shutdown runs on a thread of its own and is awaited with a deadline, so a
// hang fails the test instead of holding ctest; the client then leaves,
// which lets a hung Shutdown return. Sync and callback servers.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cinttypes>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "echo.grpc.pb.h"
#include "poise/load_reports.h"
#include "test/server/orca_request.h"
#include "test/server/raw_http2_client.h"

namespace poise {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using test_support::RawHttp2Client;
using test_support::ReportRequest;

constexpr auto kWait = std::chrono::seconds(20);  // any awaited event
constexpr size_t kStreams = 5;
// A server's HTTP/2 connection window before the client's first
// WINDOW_UPDATE (RFC 9113 section 6.9.2): this client sends none.
constexpr uint64_t kConnectionWindow = 65535;

enum class Kind { kSync, kCallback };

// A sync or callback server (Echo, unimplemented: no call is made) with the
// load reports. Shut down with a deadline on every path the test did not.
class Server {
 public:
  Server(Kind kind, const LoadReportOptions& options) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port_);
    if (kind == Kind::kSync) {
      service_ = std::make_unique<example::Echo::Service>();
    } else {
      service_ = std::make_unique<example::Echo::CallbackService>();
    }
    builder.RegisterService(service_.get());
    absl::StatusOr<std::shared_ptr<LoadReports>> reports =
        EnableLoadReports(builder, options);
    if (reports.ok()) reports_ = *std::move(reports);
    server_ = builder.BuildAndStart();
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;
  ~Server() {
    if (server_ == nullptr || shut_down_) return;
    if (reports_ != nullptr) reports_->EndStreams();
    server_->Shutdown(std::chrono::system_clock::now() + milliseconds(5000));
  }

  bool started() const { return server_ != nullptr && reports_ != nullptr; }
  int port() const { return port_; }

  // The way docs/server-load-reports.md shuts down: EndStreams(), then
  // Shutdown() without a deadline.
  void EndStreamsAndShutdown() {
    reports_->EndStreams();
    server_->Shutdown();
    shut_down_ = true;
  }

 private:
  std::unique_ptr<grpc::Service> service_;
  std::shared_ptr<LoadReports> reports_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  bool shut_down_ = false;
};

// Runs server.EndStreamsAndShutdown() on a thread while `meanwhile` runs
// here (given the deadline), then closes the client, so that a Shutdown
// still waiting for it returns, and joins. How long Shutdown took, or
// nullopt if it had not returned by `limit` (it then returned only once the
// client left: printed too).
std::optional<Clock::duration> ShutdownWithin(
    Server& server, RawHttp2Client& client, Clock::duration limit,
    const std::function<void(Clock::time_point)>& meanwhile) {
  std::mutex mu;
  std::condition_variable returned;
  std::optional<Clock::duration> took;  // guarded by mu
  const Clock::time_point start = Clock::now();
  std::thread shutdown([&] {
    server.EndStreamsAndShutdown();
    std::lock_guard<std::mutex> lock(mu);
    took = Clock::now() - start;
    returned.notify_all();
  });
  meanwhile(start + limit);
  std::optional<Clock::duration> within;
  {
    std::unique_lock<std::mutex> lock(mu);
    returned.wait_until(lock, start + limit, [&] { return took.has_value(); });
    within = took;
  }
  const Clock::duration client_left = Clock::now() - start;
  client.Close();
  shutdown.join();
  const auto ms = [](Clock::duration d) {
    return static_cast<int64_t>(
        std::chrono::duration_cast<milliseconds>(d).count());
  };
  if (within.has_value()) {
    std::printf("EndStreams + Shutdown() took %" PRId64 " ms\n", ms(*within));
  } else {
    std::printf("EndStreams + Shutdown() had not returned after %" PRId64
                " ms; it returned %" PRId64
                " ms after the start, once the client had left\n",
                ms(client_left), ms(*took));
  }
  return within;
}

class OrcaShutdownTest : public ::testing::TestWithParam<Kind> {};

INSTANTIATE_TEST_SUITE_P(Servers, OrcaShutdownTest,
                         ::testing::Values(Kind::kSync, Kind::kCallback),
                         [](const ::testing::TestParamInfo<Kind>& param) {
                           return param.param == Kind::kSync ? "Sync"
                                                             : "Callback";
                         });

// The client reads everything and answers the server's PINGs, but never
// gives a stream any window: each stream's first report stays unsent.
TEST_P(OrcaShutdownTest, ZeroWindowClientDoesNotHoldShutdown) {
  Server server(GetParam(), LoadReportOptions{});
  ASSERT_TRUE(server.started());
  RawHttp2Client client;
  RawHttp2Client::Options options;
  options.initial_window_size = 0;
  ASSERT_TRUE(client.Connect(server.port(), options)) << client.error();
  for (size_t i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(
        client.OpenStream(kOrcaStreamMethod, ReportRequest(0, 10'000'000)))
        << client.error();
  }
  // Response headers are not flow controlled, reports are: once a stream's
  // headers arrive, its first report is written and waits for window.
  ASSERT_TRUE(client.ReadUntil(
      [&] { return client.streams_with_headers() == kStreams; },
      Clock::now() + kWait))
      << client.error();
  EXPECT_EQ(client.data_bytes(), 0u);

  const std::optional<Clock::duration> took = ShutdownWithin(
      server, client, std::chrono::seconds(10), [&](Clock::time_point end) {
        client.ReadUntil([&] { return client.closed(); }, end);
      });
  EXPECT_TRUE(took.has_value())
      << "Shutdown() without a deadline waited for the zero-window client";
  // Every stream ended with EndStreams' status and no report sent, and the
  // server closed the connection.
  EXPECT_EQ(client.streams_ended(), kStreams);
  for (uint32_t stream = 1; stream < 2 * kStreams; stream += 2) {
    EXPECT_EQ(client.Trailer(stream, "grpc-status"), "14") << stream;
    EXPECT_EQ(client.Trailer(stream, "grpc-message"),
              "load reports ended by the server (EndStreams)")
        << stream;
  }
  EXPECT_EQ(client.data_bytes(), 0u);
  EXPECT_TRUE(client.closed());
}

// The client reads until the server has used up the connection's window,
// then never reads again: the server's next reports stay unsent, and the
// client answers neither the PING of the server's GOAWAY nor anything else.
TEST_P(OrcaShutdownTest, ClientThatStopsReadingDoesNotHoldShutdown) {
  LoadReportOptions server_options;
  server_options.min_report_interval = milliseconds(1);
  Server server(GetParam(), server_options);
  ASSERT_TRUE(server.started());
  RawHttp2Client client;
  RawHttp2Client::Options options;
  options.receive_buffer = 4096;  // what the server writes later stays queued
  ASSERT_TRUE(client.Connect(server.port(), options)) << client.error();
  for (size_t i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(
        client.OpenStream(kOrcaStreamMethod, ReportRequest(0, 1'000'000)))
        << client.error();
  }
  ASSERT_TRUE(
      client.ReadUntil([&] { return client.data_bytes() >= kConnectionWindow; },
                       Clock::now() + kWait))
      << client.error();
  EXPECT_EQ(client.data_bytes(), kConnectionWindow);
  EXPECT_EQ(client.streams_ended(), 0u);

  // chttp2 (gRPC 1.51) sends its final GOAWAY, and closes the connection,
  // once the client has answered a PING or 20 s have passed
  // (GracefulGoaway in chttp2_transport.cc): this client never answers.
  const std::optional<Clock::duration> took =
      ShutdownWithin(server, client, std::chrono::seconds(45),
                     [](Clock::time_point /*end*/) {});
  EXPECT_TRUE(took.has_value())
      << "Shutdown() without a deadline waited for the client that stopped "
         "reading";
}

}  // namespace
}  // namespace poise
