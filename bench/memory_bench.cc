// poise_memory_bench: what many channels to the same backends cost in memory
// under each policy, against round_robin.
//
// Setup. One gRPC server in a CHILD process (forked before this process
// creates any gRPC object) listens on `--backends` ports of 127.0.0.1 (port
// 0 each: the kernel chooses; AddListeningPort reports the port) and answers
// Echo. This process then creates `--channels` channels to the same
// "ipv4:127.0.0.1:p1,...,127.0.0.1:pN" target with the policy's service
// config and default channel arguments, so gRPC's global subchannel pool
// gives every channel the same N connections: what differs between policies
// is their per-channel state. It waits until
//   1. this process holds an ESTABLISHED TCP connection to each of the N
//      ports (/proc/net/tcp: every backend is connected),
//   2. every channel is READY and has routed one call (OK),
// and then reads VmRSS (/proc/self/status) and the heap in use
// (mallinfo2: uordblks + hblkhd, the small and the mmapped blocks), and
// reports both minus the same figures taken just before the first channel.
//
// Each policy runs in a fresh process (this binary again with --policy), so
// none inherits another's heap; without --policy it runs round_robin,
// weighted_rendezvous and bounded_load_rendezvous in turn and prints the
// table. The child server stops on every exit path (its control pipe closes
// when this process ends, however it ends).
//
// Usage: poise_memory_bench [--channels C] [--backends N] [--policy P]
#include <grpcpp/grpcpp.h>
#include <malloc.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "echo.grpc.pb.h"
#include "pipe_io.h"
#include "poise/grpc_lb.h"
#if __has_include("src/core/identity_store.h")
#include "src/core/identity_store.h"
#define POISE_MEMORY_BENCH_HAS_STORE 1
#endif

namespace {

struct Options {
  size_t channels = 100;
  size_t backends = 1000;
  std::string policy;  // empty: run all three, each in its own process
};

// --- the server, in a child process -----------------------------------------

class EchoService final : public poise::example::Echo::Service {
  grpc::Status Echo(grpc::ServerContext* /*context*/,
                    const poise::example::EchoRequest* request,
                    poise::example::EchoReply* reply) override {
    reply->set_backend_id("memory-bench");
    reply->set_payload(request->payload());
    return grpc::Status::OK;
  }
};

using poise::bench::ReadAll;
using poise::bench::WriteAll;

struct Server {
  pid_t pid = -1;
  int control_fd = -1;  // closing it (or this process ending) ends the child
  std::vector<int> ports;
};

// Must run before this process creates any gRPC object.
bool ForkServer(size_t backends, Server* out) {
  int ports_pipe[2];
  int control_pipe[2];
  if (pipe(ports_pipe) != 0) return false;
  if (pipe(control_pipe) != 0) {
    close(ports_pipe[0]);
    close(ports_pipe[1]);
    return false;
  }
  const pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    close(ports_pipe[0]);
    close(control_pipe[1]);
    EchoService service;
    grpc::ServerBuilder builder;
    std::vector<int> ports(backends, 0);
    for (size_t i = 0; i < backends; ++i) {
      builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                               &ports[i]);
    }
    builder.RegisterService(&service);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    std::string text;
    for (const int port : ports) {
      if (server == nullptr || port == 0) _exit(2);
      absl::StrAppend(&text, port, "\n");
    }
    if (!WriteAll(ports_pipe[1], text)) _exit(3);
    close(ports_pipe[1]);
    char c;
    while (read(control_pipe[0], &c, 1) < 0 && errno == EINTR) {
    }
    _exit(0);  // no orderly shutdown needed: connections just drop
  }
  close(ports_pipe[1]);
  close(control_pipe[0]);
  out->pid = pid;
  out->control_fd = control_pipe[1];
  std::istringstream lines(ReadAll(ports_pipe[0]));
  close(ports_pipe[0]);
  int port = 0;
  while (lines >> port) out->ports.push_back(port);
  return out->ports.size() == backends;
}

void StopServer(Server* server) {
  if (server->control_fd >= 0) close(server->control_fd);
  server->control_fd = -1;
  if (server->pid > 0) {
    int status = 0;
    waitpid(server->pid, &status, 0);
  }
  server->pid = -1;
}

// --- measurements
// -------------------------------------------------------------

struct Memory {
  int64_t rss_kib = 0;  // VmRSS
  int64_t heap = 0;     // bytes malloc has handed out and not taken back
};

Memory MemoryNow() {
  Memory m;
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      m.rss_kib = std::strtoll(line.c_str() + 6, nullptr, 10);
    }
  }
  const struct mallinfo2 info = mallinfo2();
  m.heap = static_cast<int64_t>(info.uordblks + info.hblkhd);
  return m;
}

void AddConnected(const char* file, const std::set<int>& wanted,
                  std::set<int>* connected) {
  std::ifstream tcp(file);
  std::string line;
  std::getline(tcp, line);  // the header
  while (std::getline(tcp, line)) {
    std::istringstream fields(line);
    std::string slot, local, remote, state;
    fields >> slot >> local >> remote >> state;
    if (state != "01") continue;  // ESTABLISHED
    const size_t colon = remote.rfind(':');
    if (colon == std::string::npos) continue;
    const int port =
        static_cast<int>(std::strtol(remote.c_str() + colon + 1, nullptr, 16));
    if (wanted.count(port) != 0) connected->insert(port);
  }
}

// How many of `ports` this process's sockets (every socket of the network
// namespace, but only this process connects to the child's ports) have an
// ESTABLISHED connection to, from /proc/net/tcp and tcp6 (gRPC connects
// IPv4 addresses through dual-stack sockets).
size_t PortsConnected(const std::vector<int>& ports) {
  const std::set<int> wanted(ports.begin(), ports.end());
  std::set<int> connected;
  for (const char* file : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    AddConnected(file, wanted, &connected);
  }
  return connected.size();
}

std::string ServiceConfig(const std::string& policy) {
  if (policy == "round_robin") {
    return R"({"loadBalancingConfig":[{"round_robin":{}}]})";
  }
  return absl::StrCat(R"({"loadBalancingConfig":[{")", policy,
                      R"(":{"hashHeader":"x-session-id"}}]})");
}

// One policy, in this process: prints "key=value ..." on one line.
int RunPolicy(const Options& options) {
  Server server;
  if (!ForkServer(options.backends, &server)) {
    std::fprintf(stderr, "could not start the server\n");
    StopServer(&server);
    return 1;
  }
  int code = 1;
  {
    if (absl::Status s = poise::grpc_lb::RegisterPolicies(); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      StopServer(&server);
      return 1;
    }
    std::string target = "ipv4:";
    for (size_t i = 0; i < server.ports.size(); ++i) {
      absl::StrAppend(&target, i == 0 ? "" : ",",
                      "127.0.0.1:", server.ports[i]);
    }
    grpc::ChannelArguments args;
    args.SetServiceConfigJSON(ServiceConfig(options.policy));
    // The default would be the target's whole address list (about 16 KiB
    // for 1,000 addresses), past the server's metadata limit.
    args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, "memory-bench");
    const Memory before = MemoryNow();
    std::vector<std::shared_ptr<grpc::Channel>> channels;
    std::vector<std::unique_ptr<poise::example::Echo::Stub>> stubs;
    for (size_t c = 0; c < options.channels; ++c) {
      channels.push_back(grpc::CreateCustomChannel(
          target, grpc::InsecureChannelCredentials(), args));
      stubs.push_back(poise::example::Echo::NewStub(channels.back()));
    }
    bool ok = true;
    // 2. One call per channel (wait_for_ready: it waits out CONNECTING).
    for (size_t c = 0; c < stubs.size() && ok; ++c) {
      grpc::ClientContext context;
      context.AddMetadata("x-session-id", absl::StrCat("key-", c));
      context.set_wait_for_ready(true);
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(60));
      poise::example::EchoRequest request;
      poise::example::EchoReply reply;
      const grpc::Status status = stubs[c]->Echo(&context, request, &reply);
      if (!status.ok()) {
        std::fprintf(stderr, "channel %zu: %s\n", c,
                     status.error_message().c_str());
        ok = false;
      }
    }
    // 1. Every backend connected (the channels request connections eagerly
    // under the rendezvous policies and round_robin alike).
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(120);
    size_t connected = 0;
    while (ok &&
           (connected = PortsConnected(server.ports)) < server.ports.size()) {
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "only %zu of %zu backends connected\n", connected,
                     server.ports.size());
        ok = false;
        break;
      }
      usleep(20 * 1000);  // polling a condition, with a deadline
    }
    for (size_t c = 0; c < channels.size() && ok; ++c) {
      if (channels[c]->GetState(false) != GRPC_CHANNEL_READY) {
        std::fprintf(stderr, "channel %zu is not READY\n", c);
        ok = false;
      }
    }
    if (ok) {
      const Memory after = MemoryNow();
      size_t tracked = 0;  // policy instances in the stats registry
      for (const auto& s : poise::grpc_lb::StatsSnapshot()) {
        if (s.backends.size() == options.backends && s.picks >= 1) ++tracked;
      }
      std::string store;
#ifdef POISE_MEMORY_BENCH_HAS_STORE
      const poise::internal::IdentityStoreCounts counts =
          poise::internal::IdentityStore::Global().counts();
      store = absl::StrCat(" store_rows=", counts.rows,
                           " store_tables=", counts.tables,
                           " identities_hashed=", counts.identities_hashed);
#endif
      std::printf(
          "policy=%s channels=%zu backends=%zu connected=%zu "
          "policy_instances_routed=%zu rss_kib=%lld heap_bytes=%lld%s\n",
          options.policy.c_str(), options.channels, options.backends, connected,
          tracked, static_cast<long long>(after.rss_kib - before.rss_kib),
          static_cast<long long>(after.heap - before.heap), store.c_str());
      code = 0;
    }
  }
  StopServer(&server);
  return code;
}

// Every policy, each in a fresh process: the table.
int RunAll(const Options& options, const char* self) {
  const char* const policies[] = {"round_robin", "weighted_rendezvous",
                                  "bounded_load_rendezvous"};
  std::vector<std::string> lines;
  for (const char* policy : policies) {
    int out[2];
    if (pipe(out) != 0) return 1;
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      const std::string channels = std::to_string(options.channels);
      const std::string backends = std::to_string(options.backends);
      execl(self, self, "--policy", policy, "--channels", channels.c_str(),
            "--backends", backends.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    close(out[1]);
    std::string line = ReadAll(out[0]);
    close(out[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || line.empty()) {
      std::fprintf(stderr, "%s failed\n", policy);
      return 1;
    }
    while (!line.empty() && line.back() == '\n') line.pop_back();
    lines.push_back(line);
  }
  auto field = [](const std::string& line, const std::string& key) {
    const size_t at = line.find(" " + key + "=");
    if (at == std::string::npos) return int64_t{-1};
    return static_cast<int64_t>(
        std::strtoll(line.c_str() + at + key.size() + 2, nullptr, 10));
  };
  const auto per = static_cast<double>(options.channels * options.backends);
  const int64_t rr_rss = field(lines[0], "rss_kib");
  const int64_t rr_heap = field(lines[0], "heap_bytes");
  std::printf(
      "memory: %zu channels x %zu backends (READY, one gRPC server in a child "
      "process on 127.0.0.1), each policy in a fresh process; growth from "
      "just before the first channel\n",
      options.channels, options.backends);
  std::printf(
      "| policy | RSS MiB | heap MiB | RSS over round_robin MiB | heap over "
      "round_robin MiB | heap over round_robin B per backend per channel |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const std::string& line : lines) {
    const size_t start = line.find("policy=") + 7;
    const std::string name = line.substr(start, line.find(' ', start) - start);
    const int64_t rss = field(line, "rss_kib");
    const int64_t heap = field(line, "heap_bytes");
    std::printf("| %s | %.1f | %.1f | %+.1f | %+.1f | %+.0f |\n", name.c_str(),
                static_cast<double>(rss) / 1024.0,
                static_cast<double>(heap) / 1048576.0,
                static_cast<double>(rss - rr_rss) / 1024.0,
                static_cast<double>(heap - rr_heap) / 1048576.0,
                static_cast<double>(heap - rr_heap) / per);
  }
  for (const std::string& line : lines) std::printf("  %s\n", line.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--channels" && has_value) {
      options.channels = std::strtoul(argv[++i], nullptr, 10);
    } else if (arg == "--backends" && has_value) {
      options.backends = std::strtoul(argv[++i], nullptr, 10);
    } else if (arg == "--policy" && has_value) {
      options.policy = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: poise_memory_bench [--channels C] [--backends N] "
                   "[--policy round_robin|weighted_rendezvous|"
                   "bounded_load_rendezvous]\n");
      return 2;
    }
  }
  if (options.channels == 0 || options.backends == 0) {
    std::fprintf(stderr, "--channels and --backends must be at least 1\n");
    return 2;
  }
  if (!options.policy.empty()) return RunPolicy(options);
  return RunAll(options, "/proc/self/exe");
}
