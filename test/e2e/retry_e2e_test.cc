// Backends failing under load, on real local servers: retries go to the
// key's next choice, a graceful drain and a crash (SIGKILL of a backend
// process) lose no call with the recommended retry policy
// (examples/retry_service_config.json), and without it a crash fails no more
// calls than were sent to the dead backend. Eight client threads, bounded in
// calls and time; every in-flight counter ends at exactly zero.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "test/support/e2e_harness.h"

namespace poise::e2e {
namespace {

using test_support::CallOptions;
using test_support::CallOutcome;
using test_support::Client;
using test_support::StatsFor;
using test_support::TotalInFlight;
using test_support::WaitFor;

constexpr int kThreads = 8;

// The recommended retryPolicy, read from the file the README points to.
std::string RecommendedMethodConfig() {
  std::ifstream in(POISE_RETRY_SERVICE_CONFIG);
  std::stringstream text;
  text << in.rdbuf();
  const std::string json = text.str();
  // The file's "methodConfig": [...] member, as it is.
  const size_t begin = json.find("\"methodConfig\"");
  const size_t end = json.rfind(']');
  if (begin == std::string::npos || end == std::string::npos) return "";
  return json.substr(begin, end + 1 - begin);
}

// A service config: `policy` with `extra` fields, and the recommended
// retryPolicy when `retry`.
std::string ServiceConfig(const std::string& policy, bool retry,
                          const std::string& extra = "") {
  std::string out = absl::StrCat(R"({"loadBalancingConfig":[{")", policy,
                                 R"(":{"hashHeader":"x-session-id")",
                                 extra.empty() ? "" : ",", extra, "}}]");
  if (retry) absl::StrAppend(&out, ",", RecommendedMethodConfig());
  return out + "}";
}

std::string PolicyName(const ::testing::TestParamInfo<const char*>& info) {
  return info.param;
}

// Identities are the addresses: the core's order of `key` over them.
std::vector<size_t> Order(const std::vector<std::string>& addresses,
                          const std::string& key) {
  std::vector<Candidate> c;
  for (const auto& a : addresses) c.push_back({a, 1, true});
  const Result<std::vector<Rank>> ranking = WeightedRendezvous::Ranking(key, c);
  std::vector<size_t> out;
  if (!ranking.ok()) return out;
  for (const Rank& r : ranking.value()) out.push_back(r.index);
  return out;
}

const grpc_lb::BackendStats* BackendNamed(const grpc_lb::ChannelStats& s,
                                          const std::string& address) {
  for (const auto& b : s.backends) {
    if (b.address == address) return &b;
  }
  return nullptr;
}

// ---------------------------------------------------------------------------
// Backends in child processes (poise-example-server), so one can be killed.

class ChildBackends {
 public:
  ChildBackends() = default;
  ChildBackends(const ChildBackends&) = delete;
  ChildBackends& operator=(const ChildBackends&) = delete;
  ~ChildBackends() {
    for (size_t i = 0; i < pids_.size(); ++i) Kill(i, SIGKILL);
  }

  // Starts n servers on kernel-chosen ports; false if one did not come up.
  bool Start(size_t n) {
    for (size_t i = 0; i < n; ++i) {
      std::array<int, 2> fds{};
      if (pipe(fds.data()) != 0) return false;
      const std::string id = absl::StrCat("b", i);
      const pid_t pid = fork();
      if (pid < 0) return false;
      if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlives the test
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        execl(POISE_EXAMPLE_SERVER_PATH, POISE_EXAMPLE_SERVER_PATH, "--port",
              "0", "--id", id.c_str(), static_cast<char*>(nullptr));
        _exit(127);
      }
      close(fds[1]);
      pids_.push_back(pid);
      // "backend bN listening on 127.0.0.1:PORT\n"
      std::string line;
      char c;
      while (line.size() < 200 && read(fds[0], &c, 1) == 1 && c != '\n') {
        line.push_back(c);
      }
      close(fds[0]);
      const size_t at = line.rfind(' ');
      if (line.find("listening on 127.0.0.1:") == std::string::npos ||
          at == std::string::npos) {
        return false;
      }
      addresses_.push_back(line.substr(at + 1));
    }
    return true;
  }

  // Sends `signal` to backend i (once) and reaps it.
  void Kill(size_t i, int signal) {
    if (pids_[i] <= 0) return;
    kill(pids_[i], signal);
    int status = 0;
    waitpid(pids_[i], &status, 0);
    pids_[i] = -1;
  }

  const std::vector<std::string>& addresses() const { return addresses_; }
  std::string target() const {
    return absl::StrCat("ipv4:", absl::StrJoin(addresses_, ","));
  }

 private:
  std::vector<pid_t> pids_;
  std::vector<std::string> addresses_;
};

// ---------------------------------------------------------------------------
// Load: kThreads threads, each with its own keys, calls of `delay_ms`
// without wait_for_ready (as the demo), until `stop`.

struct LoadResult {
  int total = 0;
  int failed = 0;
  std::map<grpc::StatusCode, int> codes;
  std::map<std::string, int> ok_by_backend;  // backend id -> OK replies
  bool all_in_time = true;
  bool counts_reached = true;  // the calls before and after the fault ran
};

// kThreads threads of calls until `stop`; `ended` counts the calls that
// ended, as they end.
LoadResult RunLoad(Client& client, const std::atomic<bool>& stop,
                   std::atomic<int>& ended, uint32_t delay_ms) {
  LoadResult result;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      LoadResult mine;
      CallOptions options;
      options.delay_ms = delay_ms;
      options.wait_for_ready = false;
      options.deadline = std::chrono::seconds(5);
      for (int i = 0; !stop.load(); ++i) {
        const CallOutcome out =
            client.Call(absl::StrCat("t", t, "-key-", i % 64), options);
        ++mine.total;
        ended.fetch_add(1);
        mine.all_in_time &= out.ended_in_time;
        if (out.status.ok()) {
          ++mine.ok_by_backend[out.backend_id];
        } else {
          ++mine.failed;
          ++mine.codes[out.status.error_code()];
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      result.total += mine.total;
      result.failed += mine.failed;
      result.all_in_time &= mine.all_in_time;
      for (const auto& [code, n] : mine.codes) result.codes[code] += n;
      for (const auto& [id, n] : mine.ok_by_backend) {
        result.ok_by_backend[id] += n;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return result;
}

// Starts the load, runs `fault` once `before` calls have ended, and stops
// the load once `after` more have. Counts, not time: on a busy host the
// same calls run, only later (each wait has a generous deadline).
template <typename Fault>
LoadResult LoadWithFault(Client& client, Fault fault, int before, int after) {
  std::atomic<bool> stop{false};
  std::atomic<int> ended{0};
  LoadResult result;
  std::thread load(
      [&] { result = RunLoad(client, stop, ended, /*delay_ms=*/2); });
  const auto limit = std::chrono::seconds(120);
  const bool started = WaitFor([&] { return ended.load() >= before; }, limit);
  fault();
  const int at_fault = ended.load();
  const bool finished =
      WaitFor([&] { return ended.load() >= at_fault + after; }, limit);
  stop.store(true);
  load.join();
  result.counts_reached = started && finished;
  return result;
}

// The drain and crash tests' load: calls ended before the fault, and after
// it before the load stops (a few hundred ms each on an idle host).
constexpr int kCallsBefore = 150;
constexpr int kCallsAfter = 200;

class RetryE2e : public ::testing::TestWithParam<const char*> {
 protected:
  std::string Label(const std::string& what) {
    return absl::StrCat("retry-e2e-", GetParam(), "-", what, "-", ++serial_);
  }
  static inline int serial_ = 0;
};

INSTANTIATE_TEST_SUITE_P(Policies, RetryE2e,
                         ::testing::Values("weighted_rendezvous",
                                           "bounded_load_rendezvous"),
                         PolicyName);

// The owner answers UNAVAILABLE to everything: with the recommended retry
// policy every call succeeds on the key's second choice in the core's order;
// with SAME_OWNER it fails after its four attempts, all on the owner.
TEST_P(RetryE2e, AFailingOwnersKeysSucceedOnTheirSecondChoice) {
  example::BackendSet set;
  ASSERT_TRUE(set.Start(5, test_support::kHeader).ok());
  std::vector<std::string> addresses;
  for (size_t i = 0; i < set.size(); ++i) {
    addresses.push_back(set.backend(i).address());
  }
  constexpr size_t kOwner = 2;
  // kThreads keys owned by kOwner; a factor of 500 gives five equal
  // backends room for any load, so the bounded policy's choice is the
  // plain order's too.
  std::vector<std::string> keys;
  for (int k = 0; keys.size() < kThreads; ++k) {
    const std::string key = absl::StrCat("owned-", k);
    if (Order(addresses, key)[0] == kOwner) keys.push_back(key);
  }
  const std::string extra = std::string(GetParam()) == "bounded_load_rendezvous"
                                ? R"("balanceFactorPercent":500)"
                                : "";
  set.backend(kOwner).set_fail(true);
  constexpr int kCallsPerThread = 25;
  for (const bool same_owner : {false, true}) {
    const std::string label = Label(same_owner ? "same" : "next");
    Client client(
        set.target(),
        ServiceConfig(
            GetParam(), true,
            absl::StrCat(extra, extra.empty() ? "" : ",",
                         same_owner ? R"("retryRouting":"SAME_OWNER")"
                                    : R"("retryRouting":"NEXT_CHOICE")")),
        label);
    ASSERT_TRUE(test_support::WarmUp(client, set));
    set.ResetCounters();
    const uint64_t retries_before = StatsFor(label).retries;  // warm-up's
    std::atomic<int> ok{0};
    std::atomic<int> wrong{0};
    std::atomic<int> unavailable{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const std::string& key = keys[static_cast<size_t>(t)];
        const std::string second = set.backend(Order(addresses, key)[1]).id();
        for (int i = 0; i < kCallsPerThread; ++i) {
          const CallOutcome out = client.Call(key);
          if (out.status.ok()) {
            ++ok;
            if (out.backend_id != second) ++wrong;
          } else if (out.status.error_code() == grpc::StatusCode::UNAVAILABLE) {
            ++unavailable;
          }
        }
      });
    }
    for (auto& thread : threads) thread.join();
    constexpr int kCalls = kThreads * kCallsPerThread;
    const grpc_lb::ChannelStats stats = StatsFor(label);
    if (!same_owner) {
      EXPECT_EQ(ok.load(), kCalls);
      EXPECT_EQ(wrong.load(), 0);
      EXPECT_EQ(set.backend(kOwner).calls(), uint64_t{kCalls});
      EXPECT_EQ(stats.retries - retries_before, uint64_t{kCalls});
    } else {
      EXPECT_EQ(unavailable.load(), kCalls);
      EXPECT_EQ(set.backend(kOwner).calls(), uint64_t{4 * kCalls});
      EXPECT_EQ(stats.retries - retries_before, uint64_t{3 * kCalls});
    }
    EXPECT_TRUE(WaitFor([&] { return TotalInFlight(label) == 0; }));
    EXPECT_EQ(TotalInFlight(label), 0u);
  }
}

// A graceful stop (Shutdown with a 200 ms grace) under load.
TEST_P(RetryE2e, AGracefulDrainLosesNoCallWithTheRecommendedRetryPolicy) {
  for (const bool retry : {true, false}) {
    example::BackendSet set;
    ASSERT_TRUE(set.Start(5, test_support::kHeader).ok());
    const std::string label = Label(retry ? "drain-retry" : "drain");
    Client client(set.target(), ServiceConfig(GetParam(), retry), label);
    ASSERT_TRUE(test_support::WarmUp(client, set));
    const LoadResult r = LoadWithFault(
        client, [&] { set.backend(2).Stop(); }, kCallsBefore, kCallsAfter);
    EXPECT_TRUE(r.counts_reached);
    EXPECT_GE(r.total, kCallsBefore + kCallsAfter);
    EXPECT_TRUE(r.all_in_time);
    EXPECT_TRUE(r.ok_by_backend.count("b2") == 1);  // it served before
    if (retry) {
      EXPECT_EQ(r.failed, 0);
    } else {
      // gRPC 1.51's server CANCELs the calls that reach it between
      // Shutdown() and the client reading its GOAWAY (README); nothing else
      // fails.
      for (const auto& [code, n] : r.codes) {
        EXPECT_EQ(code, grpc::StatusCode::CANCELLED) << n;
      }
      RecordProperty("failed_without_retry", r.failed);
      RecordProperty("calls_without_retry", r.total);
    }
    EXPECT_TRUE(WaitFor([&] { return TotalInFlight(label) == 0; }));
    EXPECT_EQ(TotalInFlight(label), 0u);
  }
}

// SIGKILL of a backend process under load.
TEST_P(RetryE2e, ACrashLosesNoCallWithTheRecommendedRetryPolicy) {
  for (const bool retry : {true, false}) {
    ChildBackends children;
    ASSERT_TRUE(children.Start(5));
    const std::string label = Label(retry ? "crash-retry" : "crash");
    Client client(children.target(), ServiceConfig(GetParam(), retry), label);
    // Every backend READY before the load (each serves a call).
    std::map<std::string, int> served;
    for (int i = 0; i < 2000 && served.size() < 5; ++i) {
      const CallOutcome out = client.Call(absl::StrCat("warm-", i));
      if (out.status.ok()) ++served[out.backend_id];
    }
    ASSERT_EQ(served.size(), 5u);
    const std::string victim = children.addresses()[2];
    const LoadResult r = LoadWithFault(
        client, [&] { children.Kill(2, SIGKILL); }, kCallsBefore, kCallsAfter);
    EXPECT_TRUE(r.counts_reached);
    EXPECT_GE(r.total, kCallsBefore + kCallsAfter);
    EXPECT_TRUE(r.all_in_time);
    const grpc_lb::ChannelStats stats = StatsFor(label);
    const grpc_lb::BackendStats* b2 = BackendNamed(stats, victim);
    ASSERT_NE(b2, nullptr);
    if (retry) {
      EXPECT_EQ(r.failed, 0);
    } else {
      for (const auto& [code, n] : r.codes) {
        EXPECT_EQ(code, grpc::StatusCode::UNAVAILABLE) << n;
      }
      // The bound: b2 answered every call OK until the kill, so a call
      // picked onto it and not answered was in flight at the kill or picked
      // onto it after, before the client saw the connection die. Every
      // failure is such a call (warm-up calls included in the counts).
      const auto ok_b2 = r.ok_by_backend.find("b2");
      const uint64_t answered = uint64_t{static_cast<uint64_t>(served["b2"])} +
                                (ok_b2 == r.ok_by_backend.end()
                                     ? 0
                                     : static_cast<uint64_t>(ok_b2->second));
      ASSERT_GE(b2->picks, answered);
      EXPECT_LE(static_cast<uint64_t>(r.failed), b2->picks - answered);
      RecordProperty("failed_without_retry", r.failed);
      RecordProperty("sent_to_victim_unanswered",
                     static_cast<int>(b2->picks - answered));
    }
    EXPECT_TRUE(WaitFor([&] { return TotalInFlight(label) == 0; }));
    EXPECT_EQ(TotalInFlight(label), 0u);
  }
}

// bounded_load_rendezvous: a retry skips a next choice at its bound for the
// next choice with room. Backend O fails everything; its keys' second
// choice X holds one long call; at factor 100 over four equal backends
// X is then at its bound (capacity ceil(100 * 2 / 400) = 1), so the retry
// goes to the key's third choice, the second among those with room.
TEST(RetryE2eBounded, ARetryNeverLandsOnABackendAtItsBound) {
  example::BackendSet set;
  ASSERT_TRUE(set.Start(4, test_support::kHeader).ok());
  std::vector<std::string> addresses;
  for (size_t i = 0; i < set.size(); ++i) {
    addresses.push_back(set.backend(i).address());
  }
  const std::string label = "retry-e2e-bounded-at-bound";
  Client client(set.target(),
                ServiceConfig("bounded_load_rendezvous", true,
                              R"("balanceFactorPercent":100)"),
                label);
  ASSERT_TRUE(test_support::WarmUp(client, set));
  constexpr size_t kOwner = 0;
  constexpr size_t kSecond = 1;
  std::vector<std::string> keys;  // owner O, second choice X
  std::string x_key;              // owned by X
  for (int k = 0; keys.size() < kThreads || x_key.empty(); ++k) {
    const std::string key = absl::StrCat("k", k);
    const std::vector<size_t> order = Order(addresses, key);
    if (order[0] == kOwner && order[1] == kSecond && keys.size() < kThreads) {
      keys.push_back(key);
    }
    if (order[0] == kSecond && x_key.empty()) x_key = key;
  }
  ASSERT_TRUE(WaitFor([&] { return TotalInFlight(label) == 0; }));
  set.backend(kOwner).set_fail(true);
  set.ResetCounters();
  // X's long call.
  std::thread holder([&] {
    CallOptions options;
    options.delay_ms = 1500;
    client.Call(x_key, options);
  });
  ASSERT_TRUE(WaitFor([&] { return set.backend(kSecond).in_flight() == 1; }));
  // Each retry, one at a time (so the loads are known at every pick): the
  // first attempt fails on O, the retry sees L = 1 with X full.
  const uint64_t x_retried_before =
      BackendNamed(StatsFor(label), addresses[kSecond])->retried_in;
  int on_third = 0;
  for (int round = 0; round < 3; ++round) {
    for (const std::string& key : keys) {
      const CallOutcome out = client.Call(key);
      ASSERT_TRUE(out.status.ok()) << out.status.error_message();
      EXPECT_NE(out.backend_id, set.backend(kSecond).id());
      const std::string third = set.backend(Order(addresses, key)[2]).id();
      on_third += out.backend_id == third ? 1 : 0;
    }
  }
  EXPECT_EQ(set.backend(kSecond).in_flight(), 1);  // held all along
  EXPECT_EQ(on_third, 3 * kThreads);
  EXPECT_EQ(BackendNamed(StatsFor(label), addresses[kSecond])->retried_in,
            x_retried_before);
  holder.join();
  EXPECT_TRUE(WaitFor([&] { return TotalInFlight(label) == 0; }));
  EXPECT_EQ(TotalInFlight(label), 0u);
}

}  // namespace
}  // namespace poise::e2e
