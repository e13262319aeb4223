// PrometheusText() on real channels to real local backends (127.0.0.1, port
// 0): calls that succeed, fail with UNAVAILABLE (a failing backend) and
// DEADLINE_EXCEEDED, a stopped backend's state, a channel that goes, and
// poise-example-metrics-server fetched over HTTP. Every text goes through the
// strict parser of test/support/prometheus_text_parser.h.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend.h"
#include "poise/grpc_lb.h"
#include "test/support/child_process.h"
#include "test/support/e2e_harness.h"
#include "test/support/prometheus_text_parser.h"

namespace poise::grpc_lb {
namespace {

using example::BackendSet;
using test_support::CallOptions;
using test_support::Client;
using test_support::LbConfig;
using test_support::OwnerId;
using test_support::ParsePrometheusText;
using test_support::PromExposition;
using test_support::PromLabels;
using test_support::PromParse;
using test_support::StatsFor;
using test_support::WaitFor;
using test_support::WarmUp;
using test_support::With;

// `base` made unique in this process: a label's channel totals outlive its
// channels, so a test run again (--gtest_repeat) needs a label of its own.
std::string UniqueLabel(const std::string& base) {
  static std::atomic<int> runs{0};
  return absl::StrCat(base, "-", runs++);
}

// The current exposition, parsed; fails the test when it breaks a rule.
PromExposition Scrape() {
  const std::string text = PrometheusText();
  const PromParse parsed = ParsePrometheusText(text);
  EXPECT_TRUE(parsed.ok()) << parsed.error << "\n" << text;
  return parsed.exposition;
}

// A sample's value, 0 when absent (a backend's code not seen yet).
double ValueOr0(const PromExposition& e, const std::string& name,
                const PromLabels& labels) {
  return e.Value(name, labels).value_or(0);
}

// The counts a test compares before and after its calls.
struct Counts {
  std::map<std::string, double> ok;  // by backend identity
  double unavailable = 0;            // on the failing backend
  double deadline_exceeded = 0;      // on the slow key's owner
  double channel_count = 0;          // the channel's histogram _count
  double channel_sum = 0;            // and _sum
  double channel_fast = 0;           // and its le="0.1" bucket

  static Counts Of(const PromExposition& e, const std::string& label,
                   const BackendSet& set, const std::string& failing,
                   const std::string& slow) {
    Counts c;
    for (size_t i = 0; i < set.size(); ++i) {
      const std::string id = set.backend(i).address();
      c.ok[id] = ValueOr0(
          e, "grpc_lb_poise_attempts_total",
          {{"channel", label}, {"backend", id}, {"grpc_status", "OK"}});
    }
    c.unavailable = ValueOr0(e, "grpc_lb_poise_attempts_total",
                             {{"channel", label},
                              {"backend", failing},
                              {"grpc_status", "UNAVAILABLE"}});
    c.deadline_exceeded = ValueOr0(e, "grpc_lb_poise_attempts_total",
                                   {{"channel", label},
                                    {"backend", slow},
                                    {"grpc_status", "DEADLINE_EXCEEDED"}});
    const PromLabels channel = {{"channel", label}};
    c.channel_count = ValueOr0(
        e, "grpc_lb_poise_channel_attempt_duration_seconds_count", channel);
    c.channel_sum = ValueOr0(
        e, "grpc_lb_poise_channel_attempt_duration_seconds_sum", channel);
    c.channel_fast =
        ValueOr0(e, "grpc_lb_poise_channel_attempt_duration_seconds_bucket",
                 With(channel, "le", "0.1"));
    return c;
  }
};

// The backend's state as the state gauge has it: the one state at 1, the
// others at 0 (one channel with this label), else "".
std::string StateOf(const PromExposition& e, const std::string& label,
                    const std::string& backend) {
  std::string state;
  int ones = 0;
  for (const auto* s : e.Find("grpc_lb_poise_backend_state",
                              {{"channel", label}, {"backend", backend}})) {
    if (s->value == 1) {
      state = s->labels.at("state");
      ++ones;
    } else if (s->value != 0) {
      return "";
    }
  }
  return ones == 1 ? state : "";
}

TEST(MetricsE2E, CountsCodesDurationsAndStatesOfARealChannel) {
  BackendSet set;
  ASSERT_TRUE(set.Start(3, test_support::kHeader).ok());
  // Escaped in the text: a quote, a backslash and a line feed.
  const std::string label = "metrics \"e2e\" \\ one\ntwo";
  Client client(set.target(), LbConfig("bounded_load_rendezvous"), label);
  ASSERT_TRUE(WarmUp(client, set));
  const std::string failing = set.backend(1).address();
  const std::string slow = set.backend(0).address();
  // Keys whose owner is the failing backend, and one the slow call uses.
  std::vector<std::string> failing_keys;
  for (int k = 0; failing_keys.size() < 5; ++k) {
    const std::string key = absl::StrCat("fail-", k);
    if (OwnerId(set, key) == set.backend(1).id()) failing_keys.push_back(key);
  }
  std::string slow_key;
  for (int k = 0; slow_key.empty(); ++k) {
    const std::string key = absl::StrCat("slow-", k);
    if (OwnerId(set, key) == set.backend(0).id()) slow_key = key;
  }
  // Every warm-up call is counted: gRPC 1.51 runs the tracker's Finish()
  // before it passes the call's status up (LoadBalancedCall::
  // RecordCallCompletion), so before Call() returns.
  const Counts before = Counts::Of(Scrape(), label, set, failing, slow);

  // 30 calls that succeed, counted by the backend that served each.
  std::map<std::string, double> served;
  for (int k = 0; k < 30; ++k) {
    const auto outcome = client.Call(absl::StrCat("ok-", k));
    ASSERT_TRUE(outcome.status.ok()) << outcome.status.error_message();
    served[set.backend(static_cast<size_t>(set.IndexOf(outcome.backend_id)))
               .address()] += 1;
  }
  // 5 that fail on their owner with UNAVAILABLE.
  set.backend(1).set_fail(true);
  for (const std::string& key : failing_keys) {
    EXPECT_EQ(client.Call(key).status.error_code(), grpc::UNAVAILABLE);
  }
  set.backend(1).set_fail(false);
  // One that outlives its 200 ms deadline on a backend taking 3 s.
  CallOptions late;
  late.delay_ms = 3000;
  late.deadline = std::chrono::milliseconds(200);
  EXPECT_EQ(client.Call(slow_key, late).status.error_code(),
            grpc::DEADLINE_EXCEEDED);
  constexpr double kCalls = 30 + 5 + 1;

  // Trackers finish before the application sees the status, but the wait
  // costs nothing when they already have.
  Counts after;
  ASSERT_TRUE(WaitFor([&] {
    after = Counts::Of(Scrape(), label, set, failing, slow);
    return after.channel_count - before.channel_count == kCalls;
  })) << after.channel_count - before.channel_count;
  for (const auto& [id, n] : after.ok) {
    EXPECT_EQ(n - before.ok.at(id), served[id]) << id;
  }
  EXPECT_EQ(after.unavailable - before.unavailable, 5.0);
  EXPECT_EQ(after.deadline_exceeded - before.deadline_exceeded, 1.0);
  // The late call took at least its deadline; the others are in its sum too.
  EXPECT_GE(after.channel_sum - before.channel_sum, 0.2);
  EXPECT_LE(after.channel_fast - before.channel_fast, kCalls - 1);
  // Per backend, the histogram counts every call that ended there: the
  // codes' sum.
  const PromExposition e = Scrape();
  for (size_t i = 0; i < set.size(); ++i) {
    const PromLabels b = {{"channel", label},
                          {"backend", set.backend(i).address()}};
    double by_code = 0;
    for (const auto* s : e.Find("grpc_lb_poise_attempts_total", b)) {
      by_code += s->value;
    }
    EXPECT_EQ(
        e.Value("grpc_lb_poise_attempt_duration_seconds_count", b).value_or(-1),
        by_code);
    EXPECT_EQ(StateOf(e, label, set.backend(i).address()), "READY");
  }
  EXPECT_EQ(e.Value("grpc_lb_poise_channel_state",
                    {{"channel", label}, {"state", "READY"}}),
            1.0);

  // A stopped backend: its state goes to TRANSIENT_FAILURE (connection
  // refused), in the text and in StatsSnapshot() (gRPC's reconnect backoff
  // then cycles it through IDLE and CONNECTING, so both are awaited); the
  // channel stays READY on the other two.
  const std::string stopped = set.backend(2).address();
  set.backend(2).Stop();
  ChannelStats stats;
  ASSERT_TRUE(WaitFor([&] {
    stats = StatsFor(label);
    return StateOf(Scrape(), label, stopped) == "TRANSIENT_FAILURE" &&
           stats.backends.size() == 3 &&
           stats.backends[2].connectivity == "TRANSIENT_FAILURE";
  }));
  EXPECT_EQ(stats.backends[0].connectivity, "READY");
  EXPECT_EQ(stats.connectivity, "READY");
  EXPECT_EQ(stats.backends[1].calls.by_status[14],
            static_cast<uint64_t>(after.unavailable));
  EXPECT_EQ(Scrape().Value("grpc_lb_poise_channel_state",
                           {{"channel", label}, {"state", "READY"}}),
            1.0);
}

// weighted_rendezvous without a limit counts no calls in flight, yet its
// calls have trackers too: each call that ended counts once, however often
// it was picked.
TEST(MetricsE2E, WeightedPolicyCountsEveryCallOnce) {
  BackendSet set;
  ASSERT_TRUE(set.Start(2, test_support::kHeader).ok());
  const std::string label = UniqueLabel("metrics-weighted");
  Client client(set.target(), LbConfig("weighted_rendezvous"), label);
  for (int k = 0; k < 10; ++k) {
    ASSERT_TRUE(client.Call(absl::StrCat("k", k)).status.ok());
  }
  const PromLabels ok = {{"channel", label}, {"grpc_status", "OK"}};
  ASSERT_TRUE(WaitFor([&] {
    return Scrape().Value("grpc_lb_poise_channel_attempts_total", ok) == 10.0;
  }));
  const PromExposition e = Scrape();
  EXPECT_GE(e.Value("grpc_lb_poise_channel_picks_total", {{"channel", label}})
                .value_or(0),
            10.0);
  double ok_by_backend = 0;
  for (const auto* s : e.Find("grpc_lb_poise_attempts_total", ok)) {
    ok_by_backend += s->value;
  }
  EXPECT_EQ(ok_by_backend, 10.0);
}

// A channel that goes: its backends' series go with it, its label's channel
// totals stay.
TEST(MetricsE2E, AChannelsTotalsStayAfterItGoes) {
  BackendSet set;
  ASSERT_TRUE(set.Start(2, test_support::kHeader).ok());
  const std::string label = UniqueLabel("metrics-gone");
  const PromLabels ok = {{"channel", label}, {"grpc_status", "OK"}};
  {
    Client client(set.target(), LbConfig("bounded_load_rendezvous"), label);
    for (int k = 0; k < 5; ++k) {
      ASSERT_TRUE(client.Call(absl::StrCat("k", k)).status.ok());
    }
    ASSERT_TRUE(WaitFor([&] {
      return Scrape().Value("grpc_lb_poise_channel_attempts_total", ok) == 5.0;
    }));
  }
  // Gone: no backend series, and no channel in any state (its statistics
  // were destroyed, their counters retired to the label).
  ASSERT_TRUE(WaitFor([&] {
    const PromExposition e = Scrape();
    double channels = 0;
    for (const auto* s :
         e.Find("grpc_lb_poise_channel_state", {{"channel", label}})) {
      channels += s->value;
    }
    return channels == 0 &&
           e.Find("grpc_lb_poise_backend_state", {{"channel", label}}).empty();
  }));
  EXPECT_EQ(Scrape().Value("grpc_lb_poise_channel_attempts_total", ok), 5.0);
}

// What an HTTP GET of 127.0.0.1:`port``path` returned (status line, headers
// and body), or "" when the connection failed or took over 10 s.
std::string HttpGet(int port, const std::string& request_line) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  std::string response;
  const std::string request =
      request_line + "\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    char chunk[4096];
    for (;;) {
      pollfd p{fd, POLLIN, 0};
      if (std::chrono::steady_clock::now() > deadline || poll(&p, 1, 100) < 0) {
        response.clear();
        break;
      }
      if ((p.revents & (POLLIN | POLLHUP)) == 0) continue;
      const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
      if (n <= 0) break;
      response.append(chunk, static_cast<size_t>(n));
    }
  }
  close(fd);
  return response;
}

TEST(MetricsE2E, ExampleServerServesTheTextOverHttp) {
  test_support::ChildProcess server;
  ASSERT_TRUE(server.Start({POISE_EXAMPLE_METRICS_SERVER_PATH, "--port", "0"}));
  const std::optional<std::string> line =
      server.ReadLine(std::chrono::seconds(30));
  ASSERT_TRUE(line.has_value());
  constexpr char kPrefix[] = "metrics at http://127.0.0.1:";
  ASSERT_EQ(line->rfind(kPrefix, 0), 0u) << *line;
  const int port = std::stoi(line->substr(sizeof kPrefix - 1));

  // Its traffic shows: OK calls, DEADLINE_EXCEEDED ones, three READY
  // backends.
  PromExposition e;
  std::string response;
  ASSERT_TRUE(WaitFor([&] {
    response = HttpGet(port, "GET /metrics HTTP/1.1");
    const size_t body = response.find("\r\n\r\n");
    if (body == std::string::npos) return false;
    const PromParse parsed = ParsePrometheusText(response.substr(body + 4));
    EXPECT_TRUE(parsed.ok()) << parsed.error;
    e = parsed.exposition;
    const PromLabels channel = {{"channel", "example"}};
    return e.Value("grpc_lb_poise_channel_attempts_total",
                   With(channel, "grpc_status", "OK"))
                   .value_or(0) > 0 &&
           e.Value("grpc_lb_poise_channel_attempts_total",
                   With(channel, "grpc_status", "DEADLINE_EXCEEDED"))
                   .value_or(0) > 0 &&
           e.Find("grpc_lb_poise_backend_state",
                  With(channel, "state", "READY"))
                   .size() == 3;
  })) << response;
  EXPECT_EQ(response.rfind("HTTP/1.1 200 OK\r\n", 0), 0u);
  EXPECT_NE(response.find("Content-Type: text/plain; version=0.0.4"),
            std::string::npos);
  double ready = 0;
  for (const auto* s : e.Find("grpc_lb_poise_backend_state",
                              {{"channel", "example"}, {"state", "READY"}})) {
    ready += s->value;
  }
  EXPECT_EQ(ready, 3.0);

  EXPECT_EQ(HttpGet(port, "GET / HTTP/1.1").rfind("HTTP/1.1 404", 0), 0u);
  EXPECT_EQ(HttpGet(port, "POST /metrics HTTP/1.1").rfind("HTTP/1.1 405", 0),
            0u);
  server.Signal(SIGTERM);
  EXPECT_EQ(server.Wait(std::chrono::seconds(20)), 0);
}

TEST(MetricsE2E, ExampleServerRejectsABadPort) {
  test_support::ChildProcess server;
  ASSERT_TRUE(
      server.Start({POISE_EXAMPLE_METRICS_SERVER_PATH, "--port", "70000"}));
  EXPECT_EQ(server.Wait(std::chrono::seconds(20)), 2);
}

}  // namespace
}  // namespace poise::grpc_lb
