// One routed call through bounded_load_rendezvous, from a user's project,
// to servers that report their calls in flight (poise::server), with one
// more listed backend that never answers.
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "echo.grpc.pb.h"
#include "poise/grpc_lb.h"
#include "poise/load_reports.h"
#include "poise/rendezvous.h"

namespace {

class EchoService final : public poise::example::Echo::Service {
 public:
  explicit EchoService(std::string id) : id_(std::move(id)) {}
  grpc::Status Echo(grpc::ServerContext* /*context*/,
                    const poise::example::EchoRequest* /*request*/,
                    poise::example::EchoReply* reply) override {
    reply->set_backend_id(id_);
    return grpc::Status::OK;
  }

 private:
  std::string id_;
};

// A loopback address where nothing listens, held by a socket bound there
// (connections are refused, and no other process can take the port) until
// the returned descriptor is closed; -1 on failure.
int RefusingAddress(std::string* address) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length) != 0) {
    close(fd);
    return -1;
  }
  *address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  return fd;
}

}  // namespace

// Result::value() (std::get) throws only if the pick failed; terminating on
// that uncaught exception fails the test, as it should.
// NOLINTNEXTLINE(bugprone-exception-escape)
int main() {
  if (absl::Status s = poise::grpc_lb::RegisterPolicies(); !s.ok()) {
    std::fprintf(stderr, "RegisterPolicies: %s\n", s.ToString().c_str());
    return 1;
  }
  std::vector<std::unique_ptr<EchoService>> services;
  std::vector<std::unique_ptr<grpc::Server>> servers;
  std::vector<std::shared_ptr<poise::LoadReports>> reports;
  std::vector<std::string> addresses;
  for (const char* id : {"a", "b", "c"}) {
    int port = 0;
    services.push_back(std::make_unique<EchoService>(id));
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                             &port);
    builder.RegisterService(services.back().get());
    reports.push_back(poise::EnableLoadReports(builder));
    servers.push_back(builder.BuildAndStart());
    if (servers.back() == nullptr || port == 0) return 1;
    addresses.push_back("127.0.0.1:" + std::to_string(port));
  }
  // The dead backend is never READY: every pick here runs the kernels' path
  // for a list with a backend left out, in this project's own build of poise
  // (unoptimised where it adds poise's source tree without a build type). It
  // must not own the key: its keys would go to their next READY choice,
  // which depends on which live backend connects first.
  std::vector<poise::Candidate> candidates;
  for (const auto& a : addresses) candidates.push_back({a, 1, true});
  std::vector<int> held;  // refusing sockets, closed at the end
  std::string dead;
  size_t owner = 0;
  do {
    if (held.size() == 20) {  // each owns it 1 in 4 times: 20 is 1 in 10^12
      std::fprintf(stderr, "20 refusing addresses each owned the key\n");
      return 1;
    }
    held.push_back(RefusingAddress(&dead));
    if (held.back() < 0) return 1;
    candidates.resize(addresses.size());
    candidates.push_back({dead, 1, true});
    owner = poise::WeightedRendezvous::Pick("customer-42", candidates).value();
  } while (owner == addresses.size());
  const std::string config =
      R"({"loadBalancingConfig":[{"bounded_load_rendezvous":{"hashHeader":"x-session-id"}}]})";
  if (!poise::grpc_lb::ValidateServiceConfig(config).ok()) return 1;
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(config);
  auto channel =
      grpc::CreateCustomChannel("ipv4:" + addresses[0] + "," + addresses[1] +
                                    "," + addresses[2] + "," + dead,
                                grpc::InsecureChannelCredentials(), args);
  auto stub = poise::example::Echo::NewStub(channel);

  grpc::ClientContext context;
  context.AddMetadata("x-session-id", "customer-42");
  context.set_wait_for_ready(true);
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  poise::example::EchoRequest request;
  poise::example::EchoReply reply;
  const grpc::Status status = stub->Echo(&context, request, &reply);
  if (!status.ok()) {
    std::fprintf(stderr, "call failed: %s\n", status.error_message().c_str());
    return 1;
  }
  const char* expected[] = {"a", "b", "c"};
  std::printf("routed customer-42 to %s (owner %s)\n",
              reply.backend_id().c_str(), expected[owner]);
  // Clients' ORCA streams would hold a Shutdown() without a deadline.
  for (auto& report : reports) report->EndStreams();
  for (auto& server : servers) server->Shutdown();
  for (const int fd : held) close(fd);
  return reply.backend_id() == expected[owner] ? 0 : 1;
}
