// Serves the policies' metrics for a Prometheus scraper, or an
// OpenTelemetry collector's Prometheus receiver: GET /metrics over HTTP/1.1
// on 127.0.0.1, the body poise::grpc_lb::PrometheusText() (docs/metrics.md).
//
//   poise-example-metrics-server [--port N]    (0, the default: any free port)
//   curl http://127.0.0.1:N/metrics
//
// So that there is something to see, it starts three echo backends in this
// process and sends them a keyed call every 50 ms through a
// bounded_load_rendezvous channel labelled "example"; every tenth call gives
// its backend 5 ms for 20 ms of work and ends DEADLINE_EXCEEDED. It listens
// on the loopback address only; SIGINT or SIGTERM stops it.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "backend.h"
#include "echo.grpc.pb.h"
#include "poise/grpc_lb.h"

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int /*signal*/) { g_stop = 1; }

int Usage() {
  std::fprintf(stderr, "usage: poise-example-metrics-server [--port N]\n");
  return 2;
}

// A listening TCP socket on 127.0.0.1:`port` (0: the kernel chooses), or -1.
int ListenOnLoopback(int port, int* bound_port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t length = sizeof address;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
      listen(fd, 16) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    close(fd);
    return -1;
  }
  *bound_port = ntohs(address.sin_port);
  return fd;
}

void SendAll(int fd, const std::string& data) {
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n =
        send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;  // the scraper went away
    sent += static_cast<size_t>(n);
  }
}

std::string Response(const std::string& status, const std::string& type,
                     const std::string& body) {
  return "HTTP/1.1 " + status + "\r\nContent-Type: " + type +
         "\r\nContent-Length: " + std::to_string(body.size()) +
         "\r\nConnection: close\r\n\r\n" + body;
}

// Answers one request on `fd`: GET /metrics, else 404 or 405.
void ServeOne(int fd) {
  timeval timeout{2, 0};  // a client that sends nothing is dropped
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  std::string request;
  char chunk[1024];
  while (request.find("\r\n\r\n") == std::string::npos &&
         request.size() < 8192) {
    const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
    if (n <= 0) return;
    request.append(chunk, static_cast<size_t>(n));
  }
  const std::string line = request.substr(0, request.find("\r\n"));
  const size_t space = line.find(' ');
  const std::string method = line.substr(0, space);
  const std::string path =
      space == std::string::npos
          ? ""
          : line.substr(space + 1, line.find(' ', space + 1) - space - 1);
  constexpr char kText[] = "text/plain; charset=utf-8";
  if (method != "GET") {
    SendAll(fd, Response("405 Method Not Allowed", kText, "GET only\n"));
  } else if (path != "/metrics") {
    SendAll(fd, Response("404 Not Found", kText, "see /metrics\n"));
  } else {
    SendAll(fd, Response("200 OK", "text/plain; version=0.0.4; charset=utf-8",
                         poise::grpc_lb::PrometheusText()));
  }
}

// A keyed call every 50 ms until `stop`; every tenth one cannot finish in
// its deadline.
void SendTraffic(const std::string& target, const std::atomic<bool>& stop) {
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(R"({"loadBalancingConfig": [
      {"bounded_load_rendezvous": {"hashHeader": "x-session-id"}}]})");
  args.SetString(poise::grpc_lb::kStatsLabelArg, "example");
  auto stub = poise::example::Echo::NewStub(grpc::CreateCustomChannel(
      target, grpc::InsecureChannelCredentials(), args));
  for (int i = 0; !stop; ++i) {
    grpc::ClientContext context;
    context.AddMetadata("x-session-id", "user-" + std::to_string(i % 20));
    poise::example::EchoRequest request;
    const bool late = i % 10 == 9;
    request.set_delay_ms(late ? 20 : 0);
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(late ? 5 : 1000));
    poise::example::EchoReply reply;
    stub->Echo(&context, request, &reply);  // its status lands in the metrics
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  for (int i = 1; i < argc; i += 2) {
    if (std::string(argv[i]) != "--port" || i + 1 >= argc) return Usage();
    char* end = nullptr;
    const auto parsed = std::strtol(argv[i + 1], &end, 10);
    if (*argv[i + 1] == '\0' || *end != '\0' || parsed < 0 || parsed > 65535) {
      return Usage();
    }
    port = static_cast<int>(parsed);
  }
  if (absl::Status s = poise::grpc_lb::RegisterPolicies(); !s.ok()) {
    std::fprintf(stderr, "RegisterPolicies: %s\n", s.ToString().c_str());
    return 1;
  }
  poise::example::BackendSet backends;
  if (absl::Status s = backends.Start(3, "x-session-id"); !s.ok()) {
    std::fprintf(stderr, "backends: %s\n", s.ToString().c_str());
    return 1;
  }
  int bound_port = 0;
  const int listener = ListenOnLoopback(port, &bound_port);
  if (listener < 0) {
    std::perror("listen on 127.0.0.1");
    return 1;
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  std::atomic<bool> stop{false};
  std::thread traffic(SendTraffic, backends.target(), std::cref(stop));
  std::printf("metrics at http://127.0.0.1:%d/metrics\n", bound_port);
  std::fflush(stdout);

  while (!g_stop) {
    pollfd p{listener, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;  // also wakes to see a signal
    const int client = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    ServeOne(client);
    close(client);
  }
  stop = true;
  traffic.join();
  close(listener);
  return 0;
}
