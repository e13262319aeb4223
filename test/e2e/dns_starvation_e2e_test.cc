// A silent DNS server must not stall the process (issue 29, item 1): twice
// as many poise-dns channels pointed at a paused dnsmasq as gRPC has resolver
// executor threads (2 x cores), three names each, next to one channel on a
// working dnsmasq. Measured and asserted:
//   - GetState(true) on a silent channel returns at once;
//   - each silent channel fails its resolution after one query timeout (its
//     names are looked up together, not one after another);
//   - the working channel's calls end within their deadline + 100 ms (and
//     succeed);
//   - no thread of the process uses more than 20 % of a core meanwhile, and
//     the whole process less than half of one (per-thread CPU from
//     /proc/self/task/*/stat);
//   - the silent channels serve once the server resumes;
//   - destroying channels with lookups in flight returns at once, and no
//     query socket to the silent server stays open after it.
// Only the public API and the test fixtures, so the same file also measures
// an older build (docs/reliability.md gives both).
#include <grpc/support/cpu.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend.h"
#include "test/support/dns_pods.h"
#include "test/support/dns_server.h"
#include "test/support/e2e_harness.h"

namespace poise::test_support {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr int kNamesPerChannel = 3;
// GRPC_ARG_DNS_ARES_QUERY_TIMEOUT_MS's default for these resolvers.
constexpr milliseconds kQueryTimeout{5000};
constexpr milliseconds kCallDeadline{2000};
constexpr milliseconds kLateAllowance{100};
constexpr milliseconds kWindow{8000};
constexpr double kMaxThreadShare = 0.20;
constexpr double kMaxProcessShare = 0.50;

double Ms(Clock::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// One thread's CPU time so far, from /proc/self/task/<tid>/stat.
struct ThreadCpu {
  std::string name;
  uint64_t ticks = 0;  // utime + stime, in clock ticks
};

std::map<int, ThreadCpu> ThreadsCpu() {
  std::map<int, ThreadCpu> out;
  const std::string base = "/proc/self/task/";
  for (const auto& entry : std::filesystem::directory_iterator(base)) {
    const std::string tid = entry.path().filename().string();
    std::ifstream stat(base + tid + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)),
                     std::istreambuf_iterator<char>());
    const size_t open = text.find('(');
    const size_t close = text.rfind(')');
    if (open == std::string::npos || close == std::string::npos) continue;
    ThreadCpu cpu;
    cpu.name = text.substr(open + 1, close - open - 1);
    // After ") ": state(3) ppid pgrp session tty tpgid flags minflt cminflt
    // majflt cmajflt utime(14) stime(15).
    std::istringstream rest(text.substr(close + 2));
    std::string field;
    uint64_t utime = 0;
    uint64_t stime = 0;
    for (int i = 3; i <= 15 && rest >> field; ++i) {
      if (i == 14) utime = std::stoull(field);
      if (i == 15) stime = std::stoull(field);
    }
    cpu.ticks = utime + stime;
    out[std::stoi(tid)] = cpu;
  }
  return out;
}

// The busiest thread between two samples (its name and share of one core),
// and the whole process's share of one core.
struct CpuUse {
  std::string busiest_name;
  int busiest_tid = 0;
  double busiest_share = 0;
  double process_share = 0;
};

CpuUse CpuBetween(const std::map<int, ThreadCpu>& before,
                  const std::map<int, ThreadCpu>& after, Clock::duration wall) {
  const auto ticks_per_second = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double seconds = std::chrono::duration<double>(wall).count();
  CpuUse use;
  for (const auto& [tid, cpu] : after) {
    const auto it = before.find(tid);
    const uint64_t start = it == before.end() ? 0 : it->second.ticks;
    const double share =
        static_cast<double>(cpu.ticks - start) / ticks_per_second / seconds;
    use.process_share += share;
    if (share > use.busiest_share) {
      use.busiest_name = cpu.name;
      use.busiest_tid = tid;
      use.busiest_share = share;
    }
  }
  return use;
}

// UDP sockets of this network namespace connected to 127.0.0.1:port (c-ares
// connects its query sockets to the server).
int SocketsTo(uint16_t port) {
  std::ifstream udp("/proc/self/net/udp");
  std::string line;
  std::getline(udp, line);  // header
  char remote[32];
  std::snprintf(remote, sizeof remote, "0100007F:%04X", port);
  int n = 0;
  while (std::getline(udp, line)) {
    std::istringstream fields(line);
    std::string slot, local, rem;
    fields >> slot >> local >> rem;
    if (rem == remote) ++n;
  }
  return n;
}

TEST(DnsStarvationE2e, SilentServerStallsNoOtherChannelAndNoThreadSpins) {
  POISE_REQUIRE_DNSMASQ();
  const std::vector<Pod> pods = StartPods(kNamesPerChannel);
  const DnsZone zone = ZoneOf(pods, false);
  DnsmasqServer working_dns;
  ASSERT_TRUE(working_dns.Start(zone));
  DnsmasqServer silent_dns;
  ASSERT_TRUE(silent_dns.Start(zone));
  ASSERT_TRUE(silent_dns.Pause());

  const int executor_threads = static_cast<int>(2 * gpr_cpu_num_cores());
  const int silent_count = 2 * executor_threads;
  const auto cpu_before = ThreadsCpu();
  const Clock::time_point window_start = Clock::now();

  // The silent channels, each asked to connect from a thread of its own (a
  // blocked GetState must not delay the working channel's calls).
  std::vector<std::unique_ptr<Client>> silent;
  silent.reserve(static_cast<size_t>(silent_count));
  for (int i = 0; i < silent_count; ++i) {
    silent.push_back(std::make_unique<Client>(DnsTarget(silent_dns, pods),
                                              LbConfig("weighted_rendezvous"),
                                              absl::StrCat("silent-", i)));
  }
  const Clock::time_point silent_started = Clock::now();
  std::vector<double> get_state_ms(silent.size());
  // The connectors stay until the window's CPU sample, which then counts
  // their time (an exited thread leaves /proc/self/task).
  std::promise<void> window_over;
  std::shared_future<void> sampled = window_over.get_future().share();
  std::vector<std::thread> connectors;
  connectors.reserve(silent.size());
  for (size_t i = 0; i < silent.size(); ++i) {
    connectors.emplace_back([&, i] {
      const Clock::time_point start = Clock::now();
      silent[i]->channel()->GetState(true);
      get_state_ms[i] = Ms(Clock::now() - start);
      sampled.wait();
    });
  }

  // When each silent channel first reports its failed resolution.
  std::vector<std::atomic<int64_t>> failed_after_ms(silent.size());
  for (auto& f : failed_after_ms) f.store(-1);
  std::atomic<bool> stop_watch{false};
  std::thread watcher([&] {
    while (!stop_watch.load()) {
      for (size_t i = 0; i < silent.size(); ++i) {
        if (failed_after_ms[i].load() < 0 &&
            silent[i]->channel()->GetState(false) ==
                GRPC_CHANNEL_TRANSIENT_FAILURE) {
          failed_after_ms[i].store(
              static_cast<int64_t>(Ms(Clock::now() - silent_started)));
        }
      }
      std::this_thread::sleep_for(milliseconds(10));
    }
  });

  // The working channel's calls, one after another through the window.
  Client working(DnsTarget(working_dns, pods), LbConfig("weighted_rendezvous"),
                 "working");
  int calls = 0;
  int failed = 0;
  int late = 0;
  double worst_call_ms = 0;
  std::string first_failure;
  while (Clock::now() - window_start < kWindow) {
    CallOptions options;
    options.deadline = kCallDeadline;
    const Clock::time_point start = Clock::now();
    const CallOutcome out = working.Call(absl::StrCat("key-", calls), options);
    const double took = Ms(Clock::now() - start);
    worst_call_ms = std::max(worst_call_ms, took);
    ++calls;
    if (took > Ms(kCallDeadline + kLateAllowance)) ++late;
    if (!out.status.ok()) {
      if (failed++ == 0) first_failure = out.status.error_message();
    }
    std::this_thread::sleep_for(milliseconds(20));  // pacing, not a wait
  }
  const Clock::time_point window_end = Clock::now();
  const auto cpu_after = ThreadsCpu();
  window_over.set_value();
  stop_watch.store(true);
  watcher.join();
  for (auto& t : connectors) t.join();
  const double worst_get_state_ms =
      *std::max_element(get_state_ms.begin(), get_state_ms.end());
  const CpuUse cpu =
      CpuBetween(cpu_before, cpu_after, window_end - window_start);
  int64_t slowest_failure_ms = 0;
  int never_failed = 0;
  for (const auto& f : failed_after_ms) {
    if (f.load() < 0) {
      ++never_failed;
    } else {
      slowest_failure_ms = std::max(slowest_failure_ms, f.load());
    }
  }
  std::printf(
      "[ starvation ] %d silent channels x %d names (query timeout %lld ms, "
      "%d executor threads) + 1 working: GetState(true) worst %.1f ms; "
      "slowest silent channel failed after %lld ms (%d not within the "
      "window); working channel: %d "
      "calls, worst end %.1f ms (deadline %lld ms), %d late, %d failed; "
      "busiest thread '%s' (%d) %.1f %% of a core, the process %.1f %%, over "
      "%.1f s\n",
      silent_count, kNamesPerChannel,
      static_cast<long long>(kQueryTimeout.count()), executor_threads,
      worst_get_state_ms, static_cast<long long>(slowest_failure_ms),
      never_failed, calls, worst_call_ms,
      static_cast<long long>(kCallDeadline.count()), late, failed,
      cpu.busiest_name.c_str(), cpu.busiest_tid, 100 * cpu.busiest_share,
      100 * cpu.process_share,
      std::chrono::duration<double>(window_end - window_start).count());
  std::fflush(stdout);

  EXPECT_LT(worst_get_state_ms, Ms(kLateAllowance));
  // One timeout per resolution round, not one per name.
  EXPECT_EQ(never_failed, 0);
  EXPECT_LT(slowest_failure_ms, 2 * kQueryTimeout.count());
  EXPECT_EQ(late, 0) << "worst call " << worst_call_ms << " ms";
  EXPECT_EQ(failed, 0) << first_failure;
  EXPECT_LT(cpu.busiest_share, kMaxThreadShare)
      << cpu.busiest_name << " (" << cpu.busiest_tid << ")";
  EXPECT_LT(cpu.process_share, kMaxProcessShare);

  // The silent channels serve once their server answers again.
  ASSERT_TRUE(silent_dns.Resume());
  const Clock::time_point resumed = Clock::now();
  for (size_t i = 0; i < silent.size(); ++i) {
    EXPECT_TRUE(WaitFor(
        [&] {
          CallOptions options;
          options.deadline = milliseconds(500);
          return silent[i]->Call("k", options).status.ok();
        },
        std::chrono::seconds(20), milliseconds(20)))
        << "silent channel " << i << " never served";
  }
  const double recovered_ms = Ms(Clock::now() - resumed);
  silent.clear();

  // Shutdown with lookups in flight: fresh channels on the paused server.
  ASSERT_TRUE(silent_dns.Pause());
  std::vector<std::unique_ptr<Client>> in_flight;
  for (int i = 0; i < silent_count; ++i) {
    in_flight.push_back(std::make_unique<Client>(
        DnsTarget(silent_dns, pods), LbConfig("weighted_rendezvous"),
        absl::StrCat("in-flight-", i)));
    in_flight.back()->channel()->GetState(true);
  }
  ASSERT_TRUE(WaitFor([&] { return SocketsTo(silent_dns.port()) > 0; },
                      std::chrono::seconds(5), milliseconds(5)))
      << "no query reached the paused server";
  const Clock::time_point shutdown = Clock::now();
  in_flight.clear();
  const double shutdown_ms = Ms(Clock::now() - shutdown);
  const bool closed = WaitFor([&] { return SocketsTo(silent_dns.port()) == 0; },
                              kLateAllowance, milliseconds(5));
  const double closed_ms = Ms(Clock::now() - shutdown);
  std::printf(
      "[ starvation ] every silent channel served %.0f ms after the server "
      "resumed; destroying %d channels with lookups in flight took %.1f ms, "
      "their query sockets %s %.0f ms after\n",
      recovered_ms, silent_count, shutdown_ms,
      closed ? "were closed" : "were still open", closed_ms);
  EXPECT_LT(shutdown_ms, Ms(kLateAllowance));
  EXPECT_TRUE(closed) << SocketsTo(silent_dns.port())
                      << " query sockets still open";
}

}  // namespace
}  // namespace poise::test_support
