// poise_e2e_bench: end-to-end client CPU of the policies on a real local gRPC
// channel, against gRPC's round_robin, with 95 % confidence intervals.
//
// Backends. The echo servers (poise::example::BackendSet on 127.0.0.1, port
// 0) run in a CHILD process forked before the parent creates any gRPC
// object, so the client CPU figure does not include them. Client CPU is
// CLOCK_PROCESS_CPUTIME_ID of this process: the calling thread plus all of
// gRPC's background threads (the honest total); the calling thread alone
// (CLOCK_THREAD_CPUTIME_ID) is summarised on one line. Server CPU is the
// child's process CPU clock (clock_getcpuclockid), shown for information.
//
// Design (sequential part). For each n in {3, 10, 100}: one channel per
// policy (local subchannel pool, key header x-session-id), all nine created
// and warmed up first. A segment is `--calls` back-to-back unary calls on one
// channel. A round is one segment per policy of one n, in one of the six
// orders. A block is, for each n in turn (the n order rotating from block to
// block), `--rounds` rounds (round r of block b uses order (b + r) mod 6, so
// six rounds use every order once). Segments are short (100 calls, about 10
// to 20 ms), so the three policies of a round run within a few tens of
// milliseconds of each other: drift in the machine's speed (other load, CPU
// frequency, cache state) moves them together and cancels in the ratio.
// Per-call CPU on this kind of machine shifts by up to 2x for seconds at a
// time, which is what made long rounds (2500 calls each) so noisy. Blocks are
// run until `--seconds` have passed (stopping only after whole groups of
// three blocks, so every n is first equally often), or `--blocks` of them.
// The first `--head` calls of each segment are also measured on their own:
// they run right after the switch from another channel, with colder caches,
// and show how much of the difference that is. They are part of the main
// figure too: nothing is left out.
//
// Statistics. For policy p at one n, block b gives x_b (p's client CPU per
// call over the block's segments) and y_b (round_robin's, same block). The
// estimate is the ratio of means R = sum(x) / sum(y), i.e. total CPU per call
// against total CPU per call, and the difference of means in µs per call.
// Their 95 % confidence intervals come from a paired percentile bootstrap
// over blocks: `--resamples` (2000) times draw B block indices with
// replacement (std::mt19937_64, fixed `--seed`, so a given data set always
// gives the same interval), keep each drawn block's (x_b, y_b) pair together,
// and compute sum(x*) / sum(y*) and the mean difference; the interval is the
// 2.5th and 97.5th percentile of those. Resampling whole blocks keeps the
// pairing (what cancels the drift) and assumes the blocks' paired deviations
// are roughly independent of each other (a block spans about a second; in a
// default run the per-block log ratios' lag-1..3 autocorrelations were
// within -0.07..0.12, and resampling groups of 3 or 6 consecutive blocks gave
// the same widths). The interval covers the sampling noise of this run, not
// changes of the machine itself (see docs/performance.md).
//
// Verdict per policy against the goal (issue 5: at most 2 % more client CPU
// per call than round_robin at n <= 100): MET when the upper 95 % bound is
// <= 1.02 at every n; NOT MET when the lower bound is > 1.02 at some n;
// otherwise INCONCLUSIVE (always with fewer than 20 blocks).
//
// Ceiling run: one channel driven by `--threads` threads (8;
// bounded_load_rendezvous vs round_robin, n = 10); a segment is
// `--ceiling-calls` calls per thread, a block is one segment per policy (order
// alternating), run for `--ceiling-seconds` (or `--ceiling-blocks`); same
// ratio and bootstrap.
//
// Usage: poise_e2e_bench [--seconds S | --blocks B] [--rounds R] [--calls N]
//   [--head H] [--ceiling-seconds S | --ceiling-blocks B] [--ceiling-calls N]
//   [--threads T] [--keys K] [--pattern stride|balanced] [--resamples R]
//   [--seed S] [--dump FILE] [--weighted-limit L]
//   | --serve N | --callgrind-target T --callgrind-n N [--calls C] [--keys K]
//   [--pattern P]
// --dump writes every measured segment (and head) as CSV. --weighted-limit
// sets weighted_rendezvous's maxInFlightPerBackend to L: with an L no call
// reaches, its calls take an in-flight slot as bounded_load_rendezvous's do
// (both have call trackers), and only the route differs between the two.
//
// Callgrind mode (bench/callgrind.sh runs it; see there). `--serve N` starts
// N echo backends in this process, prints their target on one line and
// waits to be killed. `--callgrind-target T --callgrind-n N [--calls C]` is
// the client to run under valgrind --tool=callgrind --instr-atstart=no: one
// channel per policy to T, each warmed up (Warmup, then C more calls), then
// per policy C sequential calls (stride pattern, or --pattern balanced) with
// instrumentation on only around them (CALLGRIND_START/STOP_INSTRUMENTATION)
// and a dump (CALLGRIND_DUMP_STATS_AT "<policy>") after each, so a dump holds
// exactly one policy's measured calls, every thread of the client process.
//
// Key pattern. `stride` (the default): call i uses key (i * 7919) mod K of
// the pool, so the rendezvous policies send consecutive calls to backends in
// no particular order, some twice in a row, while round_robin cycles through
// them. `balanced`: each key's owner is first found through the
// weighted_rendezvous channel (the backend id in its reply), and call i uses
// the next key of backend (i mod n), so every policy cycles through the
// backends as round_robin does. The two patterns separate what the pick costs
// from what the order of the traffic costs.
#include <grpcpp/grpcpp.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <valgrind/callgrind.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend.h"
#include "echo.grpc.pb.h"
#include "pipe_io.h"
#include "poise/grpc_lb.h"

namespace {

constexpr char kHeader[] = "x-session-id";
constexpr std::array<size_t, 3> kSizes = {3, 10, 100};
constexpr size_t kCeilingIndex = 1;  // kSizes[1] == 10
constexpr double kGoal = 1.02;
// Below this many blocks a percentile bootstrap has too few distinct
// resamples to be trusted, and no verdict is given.
constexpr int kMinBlocks = 20;

struct Options {
  double seconds = 210;  // sequential part, when blocks == 0
  int blocks = 0;        // fixed number of blocks instead (0: use seconds)
  int rounds = 6;        // rounds per n per block
  uint64_t calls = 100;  // sequential calls per segment
  uint64_t head = 5;     // first calls of a segment, also reported apart
  double ceiling_seconds = 30;   // ceiling run, when ceiling_blocks == 0
  int ceiling_blocks = 0;        // fixed number instead; -1 skips the run
  uint64_t ceiling_calls = 100;  // per thread per ceiling segment
  int threads = 8;               // ceiling run
  size_t keys = 1000;            // the fixed key pool
  bool balanced = false;         // --pattern balanced
  int resamples = 2000;          // bootstrap resamples
  uint64_t seed = 1;             // bootstrap seed
  std::string dump;              // per-segment CSV, if set
  // maxInFlightPerBackend for weighted_rendezvous (0: unset). A limit no
  // call reaches gives its calls the bounded policy's in-flight counter
  // without its route: the two policies' difference then splits.
  uint64_t weighted_limit = 0;
  size_t serve = 0;              // --serve N: backends only
  std::string callgrind_target;  // --callgrind-target T: callgrind client
  size_t callgrind_n = 0;        // its number of backends (for warm-up)
};

double Seconds(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return -1;
  return static_cast<double>(ts.tv_sec) +
         static_cast<double>(ts.tv_nsec) * 1e-9;
}

double WallSeconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// utime + stime of `pid` in seconds (clock-tick resolution), or -1. Only the
// fallback when the child's CPU clock cannot be read.
double ProcStatCpuSeconds(pid_t pid) {
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

// The server process's CPU: its process CPU clock (ns resolution) when the
// kernel lets us read it, else /proc/<pid>/stat.
class ServerCpu {
 public:
  explicit ServerCpu(pid_t pid) : pid_(pid) {
    precise_ = clock_getcpuclockid(pid, &clock_) == 0 && Seconds(clock_) >= 0;
  }
  double Now() const {
    return precise_ ? Seconds(clock_) : ProcStatCpuSeconds(pid_);
  }
  bool precise() const { return precise_; }

 private:
  pid_t pid_;
  clockid_t clock_{};
  bool precise_ = false;
};

// --- backends in a child process -------------------------------------------

struct Servers {
  pid_t pid = -1;
  int control_fd = -1;               // closing it ends the child
  std::vector<std::string> targets;  // one per kSizes entry
};

using poise::bench::ReadAll;
using poise::bench::WriteAll;

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
  std::istringstream lines(ReadAll(targets_pipe[0]));
  close(targets_pipe[0]);
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

std::string ServiceConfig(Policy policy, uint64_t weighted_limit) {
  if (policy == kRoundRobin) {
    return R"({"loadBalancingConfig":[{"round_robin":{}}]})";
  }
  const std::string limit =
      policy == kWeighted && weighted_limit != 0
          ? absl::StrCat(R"(,"maxInFlightPerBackend":)", weighted_limit)
          : "";
  return absl::StrCat(R"({"loadBalancingConfig":[{")", kPolicyNames[policy],
                      R"(":{"hashHeader":")", kHeader, R"(")", limit, "}}]}");
}

// What the tables call a policy: its name, and the limit if one is set.
std::string PolicyLabel(Policy policy, uint64_t weighted_limit) {
  if (policy != kWeighted || weighted_limit == 0) return kPolicyNames[policy];
  return absl::StrCat(kPolicyNames[policy], " (limit ", weighted_limit, ")");
}

class Client {
 public:
  Client(const std::string& target, Policy policy, uint64_t weighted_limit,
         const std::string& label)
      : label_(label) {
    grpc::ChannelArguments args;
    args.SetServiceConfigJSON(ServiceConfig(policy, weighted_limit));
    args.SetString(poise::grpc_lb::kStatsLabelArg, label);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    // An ipv4: target's default authority is the whole address list: at
    // 1,000 backends 16 KB, over the server's 8 KB limit on a call's
    // metadata, so every call would fail.
    args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, "e2e-bench");
    channel_ = grpc::CreateCustomChannel(
        target, grpc::InsecureChannelCredentials(), args);
    stub_ = poise::example::Echo::NewStub(channel_);
  }

  // Returns false on a failed call; `backend_id`, if given, receives the id
  // of the backend that answered.
  bool Call(const std::string& key, std::string* backend_id = nullptr) {
    grpc::ClientContext context;
    context.AddMetadata(kHeader, key);
    context.set_wait_for_ready(true);
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(20));
    poise::example::EchoRequest request;
    poise::example::EchoReply reply;
    const bool ok = stub_->Echo(&context, request, &reply).ok();
    if (ok && backend_id != nullptr) *backend_id = reply.backend_id();
    return ok;
  }

  const std::string& label() const { return label_; }

 private:
  std::string label_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<poise::example::Echo::Stub> stub_;
};

// --- measurement ------------------------------------------------------------

// One segment: `calls` calls of one policy on one channel.
struct Segment {
  uint64_t calls = 0;
  uint64_t failures = 0;
  double wall = 0;
  double cpu = 0;         // this process (all threads)
  double thread_cpu = 0;  // the calling thread (sequential runs only)
  double server_cpu = 0;  // the child process
};

void Add(const Segment& s, Segment* total) {
  total->calls += s.calls;
  total->failures += s.failures;
  total->wall += s.wall;
  total->cpu += s.cpu;
  total->thread_cpu += s.thread_cpu;
  total->server_cpu += s.server_cpu;
}

// Runs `body` and measures it. The process CPU clock is read innermost, so
// the other clock reads stay outside its window.
template <typename Body>
Segment Measure(const ServerCpu& server, uint64_t calls, Body&& body) {
  Segment s;
  const double server0 = server.Now();
  const double wall0 = WallSeconds();
  const double thread0 = Seconds(CLOCK_THREAD_CPUTIME_ID);
  const double cpu0 = Seconds(CLOCK_PROCESS_CPUTIME_ID);
  s.failures = body();
  s.cpu = Seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
  s.thread_cpu = Seconds(CLOCK_THREAD_CPUTIME_ID) - thread0;
  s.wall = WallSeconds() - wall0;
  s.server_cpu = server.Now() - server0;
  s.calls = calls;
  return s;
}

// The keys of one n's calls: call i uses keys[(i * stride) mod size].
struct KeyOrder {
  std::vector<std::string> keys;
  uint64_t stride = 1;
};

const std::string& KeyAt(const KeyOrder& order, uint64_t i) {
  return order.keys[i * order.stride % order.keys.size()];
}

// The default pattern: a fixed stride through the pool spreads consecutive
// calls over keys.
KeyOrder StrideOrder(const std::vector<std::string>& pool) {
  return KeyOrder{pool, 7919};
}

// The balanced pattern for n backends: `pool_size / n` keys per backend
// (their owners found through `owners`, a weighted_rendezvous channel),
// ordered so that consecutive calls cycle through the backends. Empty if
// some backend owns too few of the keys tried.
KeyOrder BalancedOrder(Client& owners, size_t n, size_t pool_size) {
  const size_t per_backend = std::max<size_t>(1, pool_size / n);
  std::map<std::string, std::vector<std::string>> by_backend;
  size_t complete = 0;
  for (size_t k = 0; complete < n && k < 100 * per_backend * n; ++k) {
    std::string key = absl::StrCat("session-", k), backend;
    if (!owners.Call(key, &backend)) continue;
    std::vector<std::string>& mine = by_backend[backend];
    if (mine.size() == per_backend) continue;
    mine.push_back(std::move(key));
    complete += mine.size() == per_backend ? 1 : 0;
  }
  KeyOrder order;
  if (complete < n || by_backend.size() != n) return order;
  for (size_t j = 0; j < per_backend; ++j) {
    for (const auto& [backend, mine] : by_backend) {
      order.keys.push_back(mine[j]);
    }
  }
  return order;
}

// One sequential segment: `calls` calls on `client`. The first `head` of
// them (right after switching to this channel) are also measured on their own
// into *head_part; the result covers all `calls`.
Segment RunSequential(Client& client, const KeyOrder& keys, uint64_t head,
                      uint64_t calls, const ServerCpu& server,
                      uint64_t* key_cursor, Segment* head_part) {
  auto run = [&](uint64_t count) {
    return [&client, &keys, key_cursor, count]() {
      uint64_t failures = 0;
      for (uint64_t i = 0; i < count; ++i) {
        if (!client.Call(KeyAt(keys, (*key_cursor)++))) ++failures;
      }
      return failures;
    };
  };
  head = std::min(head, calls);
  *head_part = Measure(server, head, run(head));
  Segment all = *head_part;
  Add(Measure(server, calls - head, run(calls - head)), &all);
  return all;
}

// `threads` threads each make `calls_per_thread` calls on `client`, keys
// walking the pool from different offsets. thread_cpu is meaningless here.
Segment RunThreaded(Client& client, const KeyOrder& keys, int threads,
                    uint64_t calls_per_thread, const ServerCpu& server,
                    uint64_t* key_cursor) {
  const uint64_t base = *key_cursor;
  *key_cursor += calls_per_thread * static_cast<uint64_t>(threads);
  return Measure(server, calls_per_thread * static_cast<uint64_t>(threads),
                 [&]() {
                   std::atomic<uint64_t> failures{0};
                   std::vector<std::thread> pool;
                   pool.reserve(static_cast<size_t>(threads));
                   for (int t = 0; t < threads; ++t) {
                     pool.emplace_back([&, t]() {
                       uint64_t local_failures = 0;
                       const uint64_t from =
                           base + static_cast<uint64_t>(t) * calls_per_thread;
                       for (uint64_t i = 0; i < calls_per_thread; ++i) {
                         if (!client.Call(KeyAt(keys, from + i))) {
                           ++local_failures;
                         }
                       }
                       failures += local_failures;
                     });
                   }
                   for (auto& th : pool) th.join();
                   return failures.load();
                 });
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

// --- statistics -------------------------------------------------------------

struct Interval {
  double point = 0;
  double lo = 0;
  double hi = 0;
};

struct Comparison {
  Interval ratio;  // mean(x) / mean(y)
  Interval diff;   // mean(x) - mean(y)
};

// Percentile of sorted `v` (linear interpolation between order statistics).
double Quantile(const std::vector<double>& v, double q) {
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto i = static_cast<size_t>(pos);
  const double frac = pos - static_cast<double>(i);
  if (i + 1 >= v.size()) return v.back();
  return v[i] * (1 - frac) + v[i + 1] * frac;
}

// x[b], y[b]: per-call CPU of the policy and of the reference in block b.
// Ratio and difference of the means over the paired blocks, with 95 %
// paired percentile bootstrap intervals over blocks (see the top of the
// file).
Comparison Compare(const std::vector<double>& x, const std::vector<double>& y,
                   int resamples, uint64_t seed) {
  Comparison out;
  const size_t b = std::min(x.size(), y.size());
  if (b == 0 || resamples <= 0) return out;
  double sx = 0, sy = 0;
  for (size_t i = 0; i < b; ++i) {
    sx += x[i];
    sy += y[i];
  }
  const auto blocks = static_cast<double>(b);
  out.ratio.point = sx / sy;
  out.diff.point = (sx - sy) / blocks;
  std::mt19937_64 rng(seed);
  std::vector<double> ratios, diffs;
  ratios.reserve(static_cast<size_t>(resamples));
  diffs.reserve(static_cast<size_t>(resamples));
  for (int r = 0; r < resamples; ++r) {
    double rx = 0, ry = 0;
    for (size_t i = 0; i < b; ++i) {
      const auto j = static_cast<size_t>(rng() % b);
      rx += x[j];
      ry += y[j];
    }
    ratios.push_back(rx / ry);
    diffs.push_back((rx - ry) / blocks);
  }
  std::sort(ratios.begin(), ratios.end());
  std::sort(diffs.begin(), diffs.end());
  out.ratio.lo = Quantile(ratios, 0.025);
  out.ratio.hi = Quantile(ratios, 0.975);
  out.diff.lo = Quantile(diffs, 0.025);
  out.diff.hi = Quantile(diffs, 0.975);
  return out;
}

std::string Fmt(const char* format, double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), format, v);
  return buffer;
}

std::string FmtInterval(const Interval& i, const char* format = "%.3f") {
  return Fmt(format, i.point) + " [" + Fmt(format, i.lo) + ", " +
         Fmt(format, i.hi) + "]";
}

// A difference of seconds per call, shown in signed µs per call.
std::string FmtMicros(const Interval& seconds) {
  return FmtInterval({1e6 * seconds.point, 1e6 * seconds.lo, 1e6 * seconds.hi},
                     "%+.2f");
}

// Per-call value of `field` in each block.
std::vector<double> PerCall(const std::vector<Segment>& blocks,
                            double Segment::*field) {
  std::vector<double> v;
  v.reserve(blocks.size());
  for (const Segment& s : blocks) {
    v.push_back(s.*field / static_cast<double>(s.calls));
  }
  return v;
}

Segment Sum(const std::vector<Segment>& blocks) {
  Segment t;
  for (const Segment& s : blocks) Add(s, &t);
  return t;
}

bool ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> const char* {
      return i + 1 < argc ? argv[++i] : nullptr;
    };
    const char* v = nullptr;
    if (arg == "--seconds" && (v = value())) {
      o->seconds = std::atof(v);
    } else if (arg == "--blocks" && (v = value())) {
      o->blocks = std::atoi(v);
    } else if (arg == "--rounds" && (v = value())) {
      o->rounds = std::atoi(v);
    } else if (arg == "--calls" && (v = value())) {
      o->calls = std::strtoull(v, nullptr, 10);
    } else if (arg == "--head" && (v = value())) {
      o->head = std::strtoull(v, nullptr, 10);
    } else if (arg == "--ceiling-seconds" && (v = value())) {
      o->ceiling_seconds = std::atof(v);
    } else if (arg == "--ceiling-blocks" && (v = value())) {
      o->ceiling_blocks = std::atoi(v);
    } else if (arg == "--ceiling-calls" && (v = value())) {
      o->ceiling_calls = std::strtoull(v, nullptr, 10);
    } else if (arg == "--threads" && (v = value())) {
      o->threads = std::atoi(v);
    } else if (arg == "--keys" && (v = value())) {
      o->keys = std::strtoull(v, nullptr, 10);
    } else if (arg == "--pattern" && (v = value()) &&
               (std::strcmp(v, "stride") == 0 ||
                std::strcmp(v, "balanced") == 0)) {
      o->balanced = std::strcmp(v, "balanced") == 0;
    } else if (arg == "--resamples" && (v = value())) {
      o->resamples = std::atoi(v);
    } else if (arg == "--seed" && (v = value())) {
      o->seed = std::strtoull(v, nullptr, 10);
    } else if (arg == "--dump" && (v = value())) {
      o->dump = v;
    } else if (arg == "--weighted-limit" && (v = value())) {
      o->weighted_limit = std::strtoull(v, nullptr, 10);
    } else if (arg == "--serve" && (v = value())) {
      o->serve = std::strtoull(v, nullptr, 10);
    } else if (arg == "--callgrind-target" && (v = value())) {
      o->callgrind_target = v;
    } else if (arg == "--callgrind-n" && (v = value())) {
      o->callgrind_n = std::strtoull(v, nullptr, 10);
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--seconds S | --blocks B] [--rounds R] [--calls N] "
          "[--head H]\n  [--ceiling-seconds S | --ceiling-blocks B (-1: "
          "skip)] [--ceiling-calls N] [--threads T]\n  [--keys K] "
          "[--pattern stride|balanced] [--resamples R] [--seed S] [--dump "
          "FILE]\n  [--weighted-limit L]\n  | --serve N | --callgrind-target T "
          "--callgrind-n N [--calls C] [--keys K] [--pattern P]\n",
          argv[0]);
      return false;
    }
  }
  return o->seconds > 0 && o->blocks >= 0 && o->rounds > 0 && o->calls > 0 &&
         o->ceiling_seconds > 0 && o->ceiling_blocks >= -1 &&
         o->ceiling_calls > 0 && o->threads > 0 && o->keys > 0 &&
         o->resamples > 0;
}

// The six orders of the three policies.
constexpr std::array<std::array<size_t, kPolicies>, 6> kOrders = {{
    {0, 1, 2},
    {1, 2, 0},
    {2, 0, 1},
    {0, 2, 1},
    {2, 1, 0},
    {1, 0, 2},
}};

// Whether to run block `b` (0-based): a fixed count, or until `seconds` have
// passed since `since`, checked only at multiples of `group` blocks.
bool MoreBlocks(int b, int fixed, double seconds, double since, int group) {
  if (fixed > 0) return b < fixed;
  if (b % group != 0) return true;
  return WallSeconds() - since < seconds;
}

// --serve N: N echo backends here until killed.
int Serve(size_t n) {
  poise::example::BackendSet set;
  if (absl::Status s = set.Start(n); !s.ok()) {
    std::fprintf(stderr, "backend start failed: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("%s\n", set.target().c_str());
  std::fflush(stdout);
  for (;;) pause();
}

// The measured calls of one policy; instrumentation is on only in here.
__attribute__((noinline)) uint64_t MeasuredCalls(Client& client,
                                                 const KeyOrder& keys,
                                                 uint64_t calls,
                                                 uint64_t* key_cursor) {
  uint64_t failures = 0;
  CALLGRIND_ZERO_STATS;
  CALLGRIND_START_INSTRUMENTATION;
  for (uint64_t i = 0; i < calls; ++i) {
    if (!client.Call(KeyAt(keys, (*key_cursor)++))) ++failures;
  }
  CALLGRIND_STOP_INSTRUMENTATION;
  return failures;
}

// The callgrind client (see the top of the file).
int CallgrindClient(const Options& o) {
  if (absl::Status s = poise::grpc_lb::RegisterPolicies(); !s.ok()) {
    std::fprintf(stderr, "RegisterPolicies: %s\n", s.ToString().c_str());
    return 1;
  }
  std::vector<std::string> pool;
  for (size_t k = 0; k < o.keys; ++k) {
    pool.push_back(absl::StrCat("session-", k));
  }
  KeyOrder keys = StrideOrder(pool);
  std::array<std::unique_ptr<Client>, kPolicies> clients;
  uint64_t key_cursor = 0, failures = 0;
  for (size_t p = 0; p < kPolicies; ++p) {
    clients[p] = std::make_unique<Client>(
        o.callgrind_target, static_cast<Policy>(p), o.weighted_limit,
        absl::StrCat("cg-", kPolicyNames[p]));
    Warmup(*clients[p], pool, o.callgrind_n);
  }
  if (o.balanced) {
    keys = BalancedOrder(*clients[kWeighted], o.callgrind_n, o.keys);
    if (keys.keys.empty()) {
      std::fprintf(stderr, "--pattern balanced: too few keys per backend\n");
      return 1;
    }
  }
  // Every policy's measured calls use the same keys in the same order.
  for (size_t p : {kRoundRobin, kWeighted, kBounded}) {
    uint64_t cursor = 0;
    for (uint64_t i = 0; i < o.calls; ++i) {
      if (!clients[p]->Call(KeyAt(keys, cursor++))) ++failures;
    }
  }
  for (size_t p : {kRoundRobin, kWeighted, kBounded}) {
    key_cursor = 0;
    failures += MeasuredCalls(*clients[p], keys, o.calls, &key_cursor);
    CALLGRIND_DUMP_STATS_AT(kPolicyNames[p]);
  }
  std::printf(
      "callgrind client: n=%zu, %llu measured calls per policy, "
      "failed calls: %llu\n",
      o.callgrind_n, static_cast<unsigned long long>(o.calls),
      static_cast<unsigned long long>(failures));
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!ParseOptions(argc, argv, &options)) return 2;
  if (options.serve > 0) return Serve(options.serve);
  if (!options.callgrind_target.empty()) return CallgrindClient(options);
  const double start_wall = WallSeconds();

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
  const ServerCpu server(servers.pid);
  std::array<std::string, kPolicies> labels;
  for (size_t p = 0; p < kPolicies; ++p) {
    labels[p] = PolicyLabel(static_cast<Policy>(p), options.weighted_limit);
  }
  std::FILE* dump = nullptr;
  if (!options.dump.empty()) {
    dump = std::fopen(options.dump.c_str(), "w");
    if (dump == nullptr) {
      std::fprintf(stderr, "cannot write %s\n", options.dump.c_str());
      StopServers(&servers);
      return 2;
    }
    std::fprintf(dump,
                 "part,block,round,n,policy,position,calls,failures,wall_s,"
                 "cpu_s,thread_cpu_s,server_cpu_s\n");
  }
  auto dump_segment = [&](const char* part, int block, int round, size_t n,
                          size_t policy, size_t position, const Segment& s) {
    if (dump == nullptr) return;
    std::fprintf(dump, "%s,%d,%d,%zu,%s,%zu,%llu,%llu,%.9f,%.9f,%.9f,%.9f\n",
                 part, block, round, n, labels[policy].c_str(), position,
                 static_cast<unsigned long long>(s.calls),
                 static_cast<unsigned long long>(s.failures), s.wall, s.cpu,
                 s.thread_cpu, s.server_cpu);
  };

  std::vector<std::string> keys;
  for (size_t k = 0; k < options.keys; ++k) {
    keys.push_back(absl::StrCat("session-", k));
  }
  uint64_t key_cursor = 0;
  uint64_t total_failures = 0;

  std::printf(
      "poise_e2e_bench: segments of %llu sequential unary calls (header %s, "
      "%s); a round = one segment per policy of one n, policy order "
      "permuted;\na block = %d rounds for each n; blocks run for %s.\n"
      "client CPU = this process, all threads (CLOCK_PROCESS_CPUTIME_ID); "
      "backends = echo servers in a forked child process (127.0.0.1), NOT "
      "included;\nserver CPU = the child's %s. One channel per (n, policy), "
      "GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL=1, warmed up.\nratios and "
      "differences: mean client CPU per call vs round_robin's, [95 %% CI] = "
      "paired percentile bootstrap over blocks (%d resamples, seed %llu).\n\n",
      static_cast<unsigned long long>(options.calls), kHeader,
      options.balanced
          ? absl::StrCat("pattern balanced: ", options.keys,
                         " / n keys per backend, the backends in turn")
                .c_str()
          : absl::StrCat(options.keys, " keys").c_str(),
      options.rounds,
      options.blocks > 0 ? absl::StrCat(options.blocks, " blocks").c_str()
                         : Fmt("%.0f s", options.seconds).c_str(),
      server.precise() ? "process CPU clock" : "/proc stat (10 ms ticks)",
      options.resamples, static_cast<unsigned long long>(options.seed));
  std::fflush(stdout);

  // All nine channels exist and are warm before the first block.
  std::array<std::array<std::unique_ptr<Client>, kPolicies>, kSizes.size()>
      clients;
  for (size_t si = 0; si < kSizes.size(); ++si) {
    for (size_t p = 0; p < kPolicies; ++p) {
      auto& c = clients[si][p];
      c = std::make_unique<Client>(
          servers.targets[si], static_cast<Policy>(p), options.weighted_limit,
          absl::StrCat("e2e-", kPolicyNames[p], "-", kSizes[si]));
      Warmup(*c, keys, kSizes[si]);
    }
  }
  std::array<KeyOrder, kSizes.size()> orders;
  for (size_t si = 0; si < kSizes.size(); ++si) {
    orders[si] = options.balanced ? BalancedOrder(*clients[si][kWeighted],
                                                  kSizes[si], options.keys)
                                  : StrideOrder(keys);
    if (orders[si].keys.empty()) {
      std::fprintf(stderr,
                   "--pattern balanced: could not find %zu keys for each of "
                   "%zu backends\n",
                   std::max<size_t>(1, options.keys / kSizes[si]), kSizes[si]);
      StopServers(&servers);
      return 1;
    }
  }

  // Per (n, policy): one entry per block, summed over the block's segments
  // (`all`), and over the first `head` calls of those segments (`heads`).
  using PerBlock =
      std::array<std::array<std::vector<Segment>, kPolicies>, kSizes.size()>;
  PerBlock all, heads;
  const double seq_wall0 = WallSeconds();
  int blocks = 0;
  for (; MoreBlocks(blocks, options.blocks, options.seconds, seq_wall0,
                    static_cast<int>(kSizes.size()));
       ++blocks) {
    const auto b = static_cast<size_t>(blocks);
    for (size_t k = 0; k < kSizes.size(); ++k) {
      const size_t si = (b + k) % kSizes.size();
      std::array<Segment, kPolicies> block{}, block_head{};
      for (int r = 0; r < options.rounds; ++r) {
        const auto& order =
            kOrders[(b + static_cast<size_t>(r)) % kOrders.size()];
        for (size_t j = 0; j < kPolicies; ++j) {
          const size_t p = order[j];
          Segment head;
          const Segment s =
              RunSequential(*clients[si][p], orders[si], options.head,
                            options.calls, server, &key_cursor, &head);
          dump_segment("head", blocks, r, kSizes[si], p, j, head);
          dump_segment("segment", blocks, r, kSizes[si], p, j, s);
          Add(s, &block[p]);
          Add(head, &block_head[p]);
        }
      }
      for (size_t p = 0; p < kPolicies; ++p) {
        all[si][p].push_back(block[p]);
        heads[si][p].push_back(block_head[p]);
      }
    }
  }
  const double seq_wall = WallSeconds() - seq_wall0;
  clients = {};

  std::printf(
      "%d blocks (%llu calls per n and policy)\n\n| n | policy | calls/s | "
      "client CPU µs/call | extra µs/call [95 %% CI] | vs round_robin [95 %% "
      "CI] | first %llu calls of a segment, vs round_robin | server CPU "
      "µs/call |\n|---:|---|---:|---:|---|---|---|---:|\n",
      blocks,
      static_cast<unsigned long long>(blocks) *
          static_cast<unsigned long long>(options.rounds) * options.calls,
      static_cast<unsigned long long>(options.head));
  std::array<std::array<Interval, kSizes.size()>, kPolicies> verdict_ratio{};
  double cpu_total = 0, thread_total = 0, thread_vs_process = 0;
  for (size_t si = 0; si < kSizes.size(); ++si) {
    const auto& rr = all[si][kRoundRobin];
    for (size_t p = 0; p < kPolicies; ++p) {
      const Segment t = Sum(all[si][p]);
      const Segment h = Sum(heads[si][p]);
      total_failures += t.failures;  // the heads are part of the segments
      cpu_total += t.cpu;
      thread_total += t.thread_cpu;
      const auto calls = static_cast<double>(t.calls);
      std::string diff = "-", ratio = "1 (reference)", head = "-";
      if (p != kRoundRobin) {
        // Each (n, policy, figure) has its own stream of resamples.
        const uint64_t seed = options.seed * 1000003u + si * 16 + p * 4;
        const Comparison c =
            Compare(PerCall(all[si][p], &Segment::cpu),
                    PerCall(rr, &Segment::cpu), options.resamples, seed);
        verdict_ratio[p][si] = c.ratio;
        ratio = FmtInterval(c.ratio);
        diff = FmtMicros(c.diff);
        const Comparison thread = Compare(
            PerCall(all[si][p], &Segment::thread_cpu),
            PerCall(rr, &Segment::thread_cpu), options.resamples, seed + 1);
        thread_vs_process = std::max(
            thread_vs_process, std::fabs(thread.ratio.point - c.ratio.point));
        if (options.head > 0) {
          head = FmtInterval(
              Compare(PerCall(heads[si][p], &Segment::cpu),
                      PerCall(heads[si][kRoundRobin], &Segment::cpu),
                      options.resamples, seed + 2)
                  .ratio);
        }
      } else if (options.head > 0) {
        head =
            Fmt("(%.1f µs/call)", 1e6 * h.cpu / static_cast<double>(h.calls));
      }
      std::printf("| %zu | %s | %.0f | %.1f | %s | %s | %s | %.1f |\n",
                  kSizes[si], labels[p].c_str(), calls / t.wall,
                  1e6 * t.cpu / calls, diff.c_str(), ratio.c_str(),
                  head.c_str(), 1e6 * t.server_cpu / calls);
    }
  }
  std::printf(
      "\ncalling thread alone (CLOCK_THREAD_CPUTIME_ID): %.1f %% of the "
      "client CPU above; its ratios to round_robin differ from the process "
      "ratios by at most %.3f\n",
      100 * thread_total / cpu_total, thread_vs_process);
  // The two rendezvous policies against each other, paired in the same
  // blocks: what bounding adds (with --weighted-limit, what the route adds
  // over the pick, both calls holding an in-flight slot).
  std::string between;
  for (size_t si = 0; si < kSizes.size(); ++si) {
    // Its own stream of resamples: slot 3 of the n's, which the table's
    // (policy * 4 + figure, for policies 0 and 1) leaves free.
    const Comparison c =
        Compare(PerCall(all[si][kBounded], &Segment::cpu),
                PerCall(all[si][kWeighted], &Segment::cpu), options.resamples,
                options.seed * 1000003u + si * 16 + 3);
    absl::StrAppend(&between, si == 0 ? "" : ", ", "n=", kSizes[si], " ",
                    FmtMicros(c.diff));
  }
  std::printf("%s - %s, µs/call [95 %% CI]: %s\n", labels[kBounded].c_str(),
              labels[kWeighted].c_str(), between.c_str());
  if (blocks < kMinBlocks) {
    std::printf(
        "warning: only %d blocks; the bootstrap intervals are rough and no "
        "verdict is given below %d\n",
        blocks, kMinBlocks);
  }
  std::fflush(stdout);

  // Ceiling: one channel, many threads, the two policies alternating.
  double ceiling_wall = 0;
  if (options.ceiling_blocks >= 0) {
    const double ceiling_wall0 = WallSeconds();
    const std::array<Policy, 2> policies = {kBounded, kRoundRobin};
    std::array<std::unique_ptr<Client>, 2> ceiling;
    for (size_t p = 0; p < 2; ++p) {
      ceiling[p] = std::make_unique<Client>(
          servers.targets[kCeilingIndex], policies[p], options.weighted_limit,
          absl::StrCat("e2e-ceiling-", kPolicyNames[policies[p]]));
      Warmup(*ceiling[p], keys, kSizes[kCeilingIndex]);
    }
    uint64_t picks0 = 0;
    const uint64_t spills0 = Spills(ceiling[0]->label(), &picks0);
    std::array<std::vector<Segment>, 2> segments;
    const double run0 = WallSeconds();
    int cb = 0;
    for (; MoreBlocks(cb, options.ceiling_blocks, options.ceiling_seconds, run0,
                      2);
         ++cb) {
      for (size_t j = 0; j < 2; ++j) {
        const size_t p = (static_cast<size_t>(cb) + j) % 2;
        const Segment s =
            RunThreaded(*ceiling[p], orders[kCeilingIndex], options.threads,
                        options.ceiling_calls, server, &key_cursor);
        dump_segment("ceiling", cb, 0, kSizes[kCeilingIndex],
                     static_cast<size_t>(policies[p]), j, s);
        segments[p].push_back(s);
      }
    }
    uint64_t picks1 = 0;
    const uint64_t spills1 = Spills(ceiling[0]->label(), &picks1);
    std::printf(
        "\nceiling: one channel driven by %d threads, n = %zu; a segment = "
        "%llu calls per thread; %d blocks of one segment per policy (order "
        "alternating)\n\n| policy | calls/s | client CPU µs/call | vs "
        "round_robin [95 %% CI] | spilled picks |\n|---|---:|---:|---|---:|\n",
        options.threads, kSizes[kCeilingIndex],
        static_cast<unsigned long long>(options.ceiling_calls), cb);
    for (size_t p = 0; p < 2; ++p) {
      const Segment t = Sum(segments[p]);
      total_failures += t.failures;
      const auto calls = static_cast<double>(t.calls);
      std::string spilled = "-", ratio = "1 (reference)";
      if (p == 0) {
        ratio = FmtInterval(Compare(PerCall(segments[0], &Segment::cpu),
                                    PerCall(segments[1], &Segment::cpu),
                                    options.resamples,
                                    options.seed * 1000003u + 999)
                                .ratio);
        if (picks1 > picks0) {
          spilled =
              Fmt("%.1f %%", 100.0 * static_cast<double>(spills1 - spills0) /
                                 static_cast<double>(picks1 - picks0));
        }
      }
      std::printf("| %s | %.0f | %.1f | %s | %s |\n", kPolicyNames[policies[p]],
                  calls / t.wall, 1e6 * t.cpu / calls, ratio.c_str(),
                  spilled.c_str());
    }
    ceiling_wall = WallSeconds() - ceiling_wall0;
  }

  std::printf(
      "\ngoal (issue 5): <= 2 %% more client CPU per call than round_robin at "
      "n <= 100, i.e. ratio <= %.2f.\nMET: upper 95 %% bound <= %.2f at every "
      "n; NOT MET: lower 95 %% bound > %.2f at some n; else INCONCLUSIVE.\n",
      kGoal, kGoal, kGoal);
  for (Policy p : {kBounded, kWeighted}) {
    const auto& iv = verdict_ratio[static_cast<size_t>(p)];
    bool all_below = true, some_above = false;
    std::string detail;
    for (size_t si = 0; si < kSizes.size(); ++si) {
      if (!(iv[si].hi <= kGoal)) all_below = false;
      if (iv[si].lo > kGoal) some_above = true;
      absl::StrAppend(&detail, si == 0 ? "" : ", ", "n=", kSizes[si], " ",
                      FmtInterval(iv[si]));
    }
    const char* verdict =
        blocks < kMinBlocks
            ? "INCONCLUSIVE (too few blocks)"
            : (some_above ? "NOT MET" : (all_below ? "MET" : "INCONCLUSIVE"));
    std::printf("  %-24s %-12s (%s)\n", absl::StrCat(labels[p], ":").c_str(),
                verdict, detail.c_str());
  }
  std::printf(
      "failed calls: %llu; wall time: sequential blocks %.0f s, ceiling %.0f "
      "s, whole run %.0f s\n",
      static_cast<unsigned long long>(total_failures), seq_wall, ceiling_wall,
      WallSeconds() - start_wall);
  if (dump != nullptr) std::fclose(dump);
  StopServers(&servers);
  return total_failures == 0 ? 0 : 1;
}
