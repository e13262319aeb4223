// One routed call through bounded_load_rendezvous, from a user's project,
// to servers that report their calls in flight (poise::server).
#include <grpcpp/grpcpp.h>

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
  const std::string config =
      R"({"loadBalancingConfig":[{"bounded_load_rendezvous":{"hashHeader":"x-session-id"}}]})";
  if (!poise::grpc_lb::ValidateServiceConfig(config).ok()) return 1;
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(config);
  auto channel = grpc::CreateCustomChannel(
      "ipv4:" + addresses[0] + "," + addresses[1] + "," + addresses[2],
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
  std::vector<poise::Candidate> candidates;
  candidates.reserve(addresses.size());
  for (const auto& a : addresses) candidates.push_back({a, 1, true});
  const size_t owner =
      poise::WeightedRendezvous::Pick("customer-42", candidates).value();
  const char* expected[] = {"a", "b", "c"};
  std::printf("routed customer-42 to %s (owner %s)\n",
              reply.backend_id().c_str(), expected[owner]);
  // Clients' ORCA streams would hold a Shutdown() without a deadline.
  for (auto& report : reports) report->EndStreams();
  for (auto& server : servers) server->Shutdown();
  return reply.backend_id() == expected[owner] ? 0 : 1;
}
