// An echo server that replies with its backend id, and reports its calls in
// flight to clients through ORCA (poise::EnableLoadReports in backend.cc).
//
//   poise-example-server --port 50051 --id a [--ip 127.0.0.2]
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "backend.h"

namespace {
volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int /*signal*/) { g_stop = 1; }

int Usage() {
  std::fprintf(stderr,
               "usage: poise-example-server [--port N] [--id ID] [--ip IP]\n");
  return 2;
}
}  // namespace

int main(int argc, char** argv) {
  int port = 50051;
  std::string id = "a";
  std::string ip = "127.0.0.1";  // another loopback address: another "pod"
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) return Usage();
    const char* value = argv[++i];
    if (arg == "--port") {
      char* end = nullptr;
      const auto parsed = std::strtol(value, &end, 10);
      if (*value == '\0' || *end != '\0' || parsed < 0 || parsed > 65535) {
        return Usage();
      }
      port = static_cast<int>(parsed);
    } else if (arg == "--id") {
      id = value;
    } else if (arg == "--ip") {
      ip = value;
    } else {
      return Usage();
    }
  }

  poise::example::Backend backend(id, "x-session-id");
  if (absl::Status status = backend.StartOn(ip, port); !status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  std::printf("backend %s listening on %s\n", id.c_str(),
              backend.address().c_str());
  std::fflush(stdout);

  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  backend.Stop();
  std::printf("backend %s served %llu calls for %zu keys\n", id.c_str(),
              static_cast<unsigned long long>(backend.calls()),
              backend.distinct_keys());
  return 0;
}
