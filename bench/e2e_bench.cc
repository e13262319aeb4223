// poise_e2e_bench: end-to-end cost of the policies on a real local gRPC
// channel, against gRPC's round_robin.
//
// The echo backends (poise::example::BackendSet on 127.0.0.1, port 0) run in
// a CHILD process forked before the parent creates any gRPC object, so the
// client CPU figure (CLOCK_PROCESS_CPUTIME_ID of this process) does not
// include the servers. Server CPU is read from /proc/<child>/stat (10 ms
// ticks, coarse) and printed separately.
//
// For each n in {3, 10, 100}: one channel per policy (local subchannel pool),
// warmed up, then `--rounds` interleaved rounds of `--calls` sequential unary
// calls per policy, the policy order rotating each round. Then a ceiling run:
// one channel driven by 8 threads (bounded_load_rendezvous vs round_robin,
// n = 10).
//
// Usage: poise_e2e_bench [--calls N] [--rounds R] [--keys K] [--threads T]
#include <grpcpp/grpcpp.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend.h"
#include "echo.grpc.pb.h"
#include "poise/grpc_lb.h"

namespace {

constexpr char kHeader[] = "x-session-id";
constexpr std::array<size_t, 3> kSizes = {3, 10, 100};
constexpr size_t kCeilingN = 10;

struct Options {
  uint64_t calls = 2500;  // sequential calls per policy per round
  int rounds = 10;
  size_t keys = 1000;  // the fixed key pool
  int threads = 8;     // ceiling run
};

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) +
         static_cast<double>(ts.tv_nsec) * 1e-9;
}

double WallSeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// utime + stime of `pid` in seconds (clock-tick resolution), or -1.
double ProcessCpuSeconds(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string line;
  if (!std::getline(in, line)) return -1;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos) return -1;
  std::istringstream fields(line.substr(paren + 1));
  std::string token;
  // After ")" comes field 3 (state); utime and stime are fields 14 and 15.
  for (int field = 3; field < 14; ++field) fields >> token;
  uint64_t utime = 0, stime = 0;
  fields >> utime >> stime;
  if (!fields) return -1;
  return static_cast<double>(utime + stime) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

// --- backends in a child process -------------------------------------------

struct Servers {
  pid_t pid = -1;
  int control_fd = -1;               // closing it ends the child
  std::vector<std::string> targets;  // one per kSizes entry
};

bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t w = write(fd, data.data() + done, data.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

// Must run before this process creates any gRPC object.
bool ForkServers(Servers* out) {
  int targets_pipe[2];
  int control_pipe[2];
  if (pipe(targets_pipe) != 0 || pipe(control_pipe) != 0) return false;
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    close(targets_pipe[0]);
    close(control_pipe[1]);
    std::vector<std::unique_ptr<poise::example::BackendSet>> sets;
    std::string text;
    for (size_t n : kSizes) {
      sets.push_back(std::make_unique<poise::example::BackendSet>());
      if (absl::Status s = sets.back()->Start(n); !s.ok()) {
        std::fprintf(stderr, "backend start failed: %s\n",
                     s.ToString().c_str());
        _exit(2);
      }
      absl::StrAppend(&text, sets.back()->target(), "\n");
    }
    if (!WriteAll(targets_pipe[1], text)) _exit(3);
    close(targets_pipe[1]);
    char c;
    while (read(control_pipe[0], &c, 1) != 0) {
      if (errno != EINTR) break;
    }
    _exit(0);  // no orderly shutdown needed; connections just drop
  }
  close(targets_pipe[1]);
  close(control_pipe[0]);
  out->pid = pid;
  out->control_fd = control_pipe[1];
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t r = read(targets_pipe[0], buffer, sizeof(buffer));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    text.append(buffer, static_cast<size_t>(r));
  }
  close(targets_pipe[0]);
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) out->targets.push_back(line);
  return out->targets.size() == kSizes.size();
}

void StopServers(Servers* servers) {
  if (servers->control_fd >= 0) close(servers->control_fd);
  if (servers->pid > 0) {
    int status = 0;
    waitpid(servers->pid, &status, 0);
  }
}

// --- client
// -------------------------------------------------------------------

enum Policy { kBounded = 0, kWeighted = 1, kRoundRobin = 2, kPolicies = 3 };
constexpr std::array<const char*, kPolicies> kPolicyNames = {
    "bounded_load_rendezvous", "weighted_rendezvous", "round_robin"};

std::string ServiceConfig(Policy policy) {
  if (policy == kRoundRobin) {
    return R"({"loadBalancingConfig":[{"round_robin":{}}]})";
  }
  return absl::StrCat(R"({"loadBalancingConfig":[{")", kPolicyNames[policy],
                      R"(":{"hashHeader":")", kHeader, R"("}}]})");
}

class Client {
 public:
  Client(const std::string& target, Policy policy, const std::string& label)
      : label_(label) {
    grpc::ChannelArguments args;
    args.SetServiceConfigJSON(ServiceConfig(policy));
    args.SetString(poise::grpc_lb::kStatsLabelArg, label);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channel_ = grpc::CreateCustomChannel(
        target, grpc::InsecureChannelCredentials(), args);
    stub_ = poise::example::Echo::NewStub(channel_);
  }

  // Returns false on a failed call.
  bool Call(const std::string& key) {
    grpc::ClientContext context;
    context.AddMetadata(kHeader, key);
    context.set_wait_for_ready(true);
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(20));
    poise::example::EchoRequest request;
    poise::example::EchoReply reply;
    return stub_->Echo(&context, request, &reply).ok();
  }

  const std::string& label() const { return label_; }

 private:
  std::string label_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<poise::example::Echo::Stub> stub_;
};

struct Totals {
  uint64_t calls = 0;
  uint64_t failures = 0;
  double wall = 0;
  double cpu = 0;
  double server_cpu = 0;
  std::vector<double> cpu_per_call;  // per round, for the ratio range
};

// `threads` threads each make `calls_per_thread` calls on `client`, keys
// walking the pool from different offsets. Adds to `totals`.
void RunRound(Client& client, const std::vector<std::string>& keys, int threads,
              uint64_t calls_per_thread, pid_t server_pid, uint64_t* key_cursor,
              Totals* totals) {
  std::atomic<uint64_t> failures{0};
  const uint64_t base = *key_cursor;
  *key_cursor += calls_per_thread * static_cast<uint64_t>(threads);
  auto work = [&](int t) {
    uint64_t local_failures = 0;
    for (uint64_t i = 0; i < calls_per_thread; ++i) {
      // A fixed stride through the pool spreads consecutive calls over keys.
      const uint64_t k =
          (base + static_cast<uint64_t>(t) * calls_per_thread + i) * 7919u %
          keys.size();
      if (!client.Call(keys[k])) ++local_failures;
    }
    failures += local_failures;
  };
  const double server0 = ProcessCpuSeconds(server_pid);
  const double cpu0 = CpuSeconds();
  const double wall0 = WallSeconds();
  if (threads == 1) {
    work(0);
  } else {
    std::vector<std::thread> pool;
    pool.reserve(static_cast<size_t>(threads));
    for (int t = 0; t < threads; ++t) pool.emplace_back(work, t);
    for (auto& th : pool) th.join();
  }
  const double wall = WallSeconds() - wall0;
  const double cpu = CpuSeconds() - cpu0;
  const double server = ProcessCpuSeconds(server_pid) - server0;
  const uint64_t calls = calls_per_thread * static_cast<uint64_t>(threads);
  totals->calls += calls;
  totals->failures += failures.load();
  totals->wall += wall;
  totals->cpu += cpu;
  totals->server_cpu += server;
  totals->cpu_per_call.push_back(cpu / static_cast<double>(calls));
}

void Warmup(Client& client, const std::vector<std::string>& keys, size_t n) {
  // Every key once (connects every owner), a pause so that round_robin sees
  // every subchannel READY, then once more.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t k = 0; k < std::max(keys.size(), 4 * n); ++k) {
      client.Call(keys[k % keys.size()]);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
}

uint64_t Spills(const std::string& label, uint64_t* picks) {
  for (const auto& s : poise::grpc_lb::StatsSnapshot()) {
    if (s.label == label) {
      *picks = s.picks;
      return s.spills;
    }
  }
  *picks = 0;
  return 0;
}

std::string Fmt(const char* format, double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, v);
  return buffer;
}

// Median and range of the per-round ratios of a's to b's CPU per call
// (rounds paired: the same round ran both back to back).
std::string RatioRange(const Totals& a, const Totals& b) {
  std::vector<double> q;
  for (size_t r = 0; r < a.cpu_per_call.size() && r < b.cpu_per_call.size();
       ++r) {
    q.push_back(a.cpu_per_call[r] / b.cpu_per_call[r]);
  }
  if (q.empty()) return "-";
  std::sort(q.begin(), q.end());
  const double median = q.size() % 2 == 1
                            ? q[q.size() / 2]
                            : (q[q.size() / 2 - 1] + q[q.size() / 2]) / 2;
  return Fmt("%.3f", median) + " (" + Fmt("%.3f", q.front()) + "–" +
         Fmt("%.3f", q.back()) + ")";
}

bool ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      return i + 1 < argc ? argv[++i] : nullptr;
    };
    const char* v = nullptr;
    if (arg == "--calls" && (v = value())) {
      o->calls = std::strtoull(v, nullptr, 10);
    } else if (arg == "--rounds" && (v = value())) {
      o->rounds = std::atoi(v);
    } else if (arg == "--keys" && (v = value())) {
      o->keys = std::strtoull(v, nullptr, 10);
    } else if (arg == "--threads" && (v = value())) {
      o->threads = std::atoi(v);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--calls N] [--rounds R] [--keys K] "
                   "[--threads T]\n",
                   argv[0]);
      return false;
    }
  }
  return o->calls > 0 && o->rounds > 0 && o->keys > 0 && o->threads > 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, &options)) return 2;

  Servers servers;
  if (!ForkServers(&servers)) {
    std::fprintf(stderr, "could not start the backends in a child process\n");
    StopServers(&servers);
    return 1;
  }
  if (absl::Status s = poise::grpc_lb::RegisterPolicies(); !s.ok()) {
    std::fprintf(stderr, "RegisterPolicies: %s\n", s.ToString().c_str());
    StopServers(&servers);
    return 1;
  }
  std::vector<std::string> keys;
  for (size_t k = 0; k < options.keys; ++k) {
    keys.push_back(absl::StrCat("session-", k));
  }
  uint64_t key_cursor = 0;
  uint64_t total_failures = 0;

  std::printf(
      "poise_e2e_bench: %llu sequential unary calls per policy per round, %d "
      "interleaved rounds (policy order rotates), %zu keys, header %s\n"
      "backends: echo servers in a forked child process (127.0.0.1); client "
      "CPU = this process only (CLOCK_PROCESS_CPUTIME_ID), servers NOT "
      "included;\nserver CPU from /proc (10 ms ticks, coarse). One channel "
      "per policy, GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL=1, warmed up.\n\n",
      static_cast<unsigned long long>(options.calls), options.rounds,
      options.keys, kHeader);
  std::printf(
      "| n | policy | calls/s | client CPU µs/call | vs round_robin (pooled) "
      "| per-round median (min–max) | server CPU µs/call |\n"
      "|---:|---|---:|---:|---:|---|---:|\n");
  std::fflush(stdout);

  // Per policy: the goal is MET when every round's ratio at every n is
  // <= 1.02, NOT MET when every round's ratio at some n is > 1.02, else the
  // noise is wider than the goal and the run is INCONCLUSIVE.
  std::array<double, kPolicies> worst_ratio{};
  std::array<bool, kPolicies> all_rounds_met{true, true, true};
  std::array<bool, kPolicies> some_n_failed{};
  for (size_t si = 0; si < kSizes.size(); ++si) {
    const size_t n = kSizes[si];
    std::vector<std::unique_ptr<Client>> clients;
    for (int p = 0; p < kPolicies; ++p) {
      clients.push_back(std::make_unique<Client>(
          servers.targets[si], static_cast<Policy>(p),
          absl::StrCat("e2e-", kPolicyNames[static_cast<size_t>(p)], "-", n)));
      Warmup(*clients.back(), keys, n);
    }
    std::array<Totals, kPolicies> totals;
    for (int r = 0; r < options.rounds; ++r) {
      for (int j = 0; j < kPolicies; ++j) {
        const int p = (r + j) % kPolicies;
        RunRound(*clients[static_cast<size_t>(p)], keys, 1, options.calls,
                 servers.pid, &key_cursor, &totals[static_cast<size_t>(p)]);
      }
    }
    const Totals& rr = totals[kRoundRobin];
    const double rr_cpu = rr.cpu / static_cast<double>(rr.calls);
    for (int p = 0; p < kPolicies; ++p) {
      const Totals& t = totals[static_cast<size_t>(p)];
      total_failures += t.failures;
      const auto calls = static_cast<double>(t.calls);
      const double ratio = (t.cpu / calls) / rr_cpu;
      if (p != kRoundRobin) {
        const auto pi = static_cast<size_t>(p);
        worst_ratio[pi] = std::max(worst_ratio[pi], ratio);
        double lo = 1e9, hi = 0;
        for (size_t r = 0; r < t.cpu_per_call.size(); ++r) {
          const double q = t.cpu_per_call[r] / rr.cpu_per_call[r];
          lo = std::min(lo, q);
          hi = std::max(hi, q);
        }
        if (hi > 1.02) all_rounds_met[pi] = false;
        if (lo > 1.02) some_n_failed[pi] = true;
      }
      std::printf("| %zu | %s | %.0f | %.1f | %s | %s | %.1f |\n", n,
                  kPolicyNames[static_cast<size_t>(p)], calls / t.wall,
                  1e6 * t.cpu / calls, Fmt("%.3f", ratio).c_str(),
                  p == kRoundRobin ? "-" : RatioRange(t, rr).c_str(),
                  1e6 * t.server_cpu / calls);
    }
    std::fflush(stdout);
  }

  // Ceiling: one channel, many threads.
  const uint64_t ceiling_calls = options.calls / 4 + 1;  // per thread per round
  std::printf(
      "\nceiling: one channel driven by %d threads, n = %zu, %llu calls per "
      "thread per round, %d interleaved rounds\n\n"
      "| policy | calls/s | client CPU µs/call | vs round_robin | spilled "
      "picks |\n|---|---:|---:|---:|---:|\n",
      options.threads, kCeilingN,
      static_cast<unsigned long long>(ceiling_calls), options.rounds);
  std::fflush(stdout);
  {
    const size_t si = 1;  // kSizes[1] == kCeilingN
    const std::array<Policy, 2> policies = {kBounded, kRoundRobin};
    std::vector<std::unique_ptr<Client>> clients;
    for (Policy p : policies) {
      clients.push_back(std::make_unique<Client>(
          servers.targets[si], p,
          absl::StrCat("e2e-ceiling-", kPolicyNames[p])));
      Warmup(*clients.back(), keys, kCeilingN);
    }
    uint64_t picks0 = 0;
    const uint64_t spills0 = Spills(clients[0]->label(), &picks0);
    std::array<Totals, 2> totals;
    for (int r = 0; r < options.rounds; ++r) {
      for (size_t j = 0; j < 2; ++j) {
        const size_t p = (static_cast<size_t>(r) + j) % 2;
        RunRound(*clients[p], keys, options.threads, ceiling_calls, servers.pid,
                 &key_cursor, &totals[p]);
      }
    }
    uint64_t picks1 = 0;
    const uint64_t spills1 = Spills(clients[0]->label(), &picks1);
    const double rr_cpu = totals[1].cpu / static_cast<double>(totals[1].calls);
    for (size_t p = 0; p < 2; ++p) {
      const Totals& t = totals[p];
      total_failures += t.failures;
      const auto calls = static_cast<double>(t.calls);
      std::string spilled = "-";
      if (p == 0 && picks1 > picks0) {
        spilled =
            Fmt("%.1f %%", 100.0 * static_cast<double>(spills1 - spills0) /
                               static_cast<double>(picks1 - picks0));
      }
      std::printf("| %s | %.0f | %.1f | %.3f | %s |\n",
                  kPolicyNames[policies[p]], calls / t.wall,
                  1e6 * t.cpu / calls, (t.cpu / calls) / rr_cpu,
                  spilled.c_str());
    }
  }

  auto verdict = [&](Policy p) {
    const auto pi = static_cast<size_t>(p);
    if (options.rounds < 3) return "INCONCLUSIVE (fewer than 3 rounds)";
    if (some_n_failed[pi]) return "NOT MET";
    if (all_rounds_met[pi]) return "MET";
    return "INCONCLUSIVE (round-to-round noise wider than 2 %)";
  };
  std::printf(
      "\ngoal (issue 5): <= 2 %% more client CPU per call than round_robin at "
      "n <= 100 (MET: every round <= 1.02; NOT MET: every round > 1.02 at "
      "some n)\n  bounded_load_rendezvous: worst pooled %+.1f %% -> %s\n"
      "  weighted_rendezvous:     worst pooled %+.1f %% -> %s\n",
      100 * (worst_ratio[kBounded] - 1), verdict(kBounded),
      100 * (worst_ratio[kWeighted] - 1), verdict(kWeighted));
  std::printf("failed calls: %llu\n",
              static_cast<unsigned long long>(total_failures));
  StopServers(&servers);
  return total_failures == 0 ? 0 : 1;
}
