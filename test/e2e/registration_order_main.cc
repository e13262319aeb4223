// RegisterPolicies() in every order a program may call things, each in a
// fresh process (gRPC's configuration is built once per process): the
// policies register when the library is loaded, so no order aborts and the
// bounded policy then serves a real call.
//   poise_registration_order MODE
// MODE: validate-first, channel-first, server-first, twice, threads.
// Exit 0: RegisterPolicies() and ValidateServiceConfig() returned OK and a
// call through bounded_load_rendezvous succeeded; else 1 with the reason.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "backend.h"
#include "echo.grpc.pb.h"
#include "poise/grpc_lb.h"

namespace {

constexpr char kConfig[] =
    R"({"loadBalancingConfig":[{"bounded_load_rendezvous":{"hashHeader":"x-key"}}]})";

bool Fail(const std::string& why) {
  std::fprintf(stderr, "registration order: %s\n", why.c_str());
  return false;
}

bool Ok(const absl::Status& status, const char* what) {
  return status.ok() || Fail(std::string(what) + ": " + status.ToString());
}

// What ran first, by mode: each builds gRPC's configuration for good.
bool RunFirst(std::string_view mode) {
  if (mode == "validate-first") {
    return Ok(poise::grpc_lb::ValidateServiceConfig(kConfig),
              "ValidateServiceConfig before RegisterPolicies");
  }
  if (mode == "channel-first") {
    // Created and destroyed: gRPC is shut down again afterwards.
    auto channel = grpc::CreateChannel("ipv4:127.0.0.1:1",
                                       grpc::InsecureChannelCredentials());
    channel.reset();
    return true;
  }
  if (mode == "server-first") {
    // Started and stopped (an echo server on 127.0.0.1, port 0).
    poise::example::BackendSet server;
    return Ok(server.Start(1), "server");
  }
  if (mode == "twice") {
    return Ok(poise::grpc_lb::RegisterPolicies(), "first RegisterPolicies");
  }
  if (mode == "threads") {
    std::vector<absl::Status> results(8);
    std::vector<std::thread> threads;
    threads.reserve(results.size());
    for (absl::Status& r : results) {
      threads.emplace_back([&r] { r = poise::grpc_lb::RegisterPolicies(); });
    }
    for (std::thread& t : threads) t.join();
    return std::all_of(results.begin(), results.end(),
                       [](const absl::Status& r) {
                         return Ok(r, "RegisterPolicies on a thread");
                       });
  }
  return Fail("unknown mode " + std::string(mode));
}

// The bounded policy serves a call on a real local backend.
bool CallThroughThePolicy() {
  poise::example::BackendSet backends;
  if (!Ok(backends.Start(2, "x-key"), "backends")) return false;
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(kConfig);
  auto channel = grpc::CreateCustomChannel(
      backends.target(), grpc::InsecureChannelCredentials(), args);
  auto stub = poise::example::Echo::NewStub(channel);
  grpc::ClientContext context;
  context.AddMetadata("x-key", "user-1");
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(20));
  poise::example::EchoRequest request;
  poise::example::EchoReply reply;
  const grpc::Status status = stub->Echo(&context, request, &reply);
  if (!status.ok()) return Fail("call: " + status.error_message());
  const std::string policy =
      poise::grpc_lb::StatsSnapshot().empty()
          ? ""
          : poise::grpc_lb::StatsSnapshot().front().policy;
  return policy == "bounded_load_rendezvous" ||
         Fail("the call did not go through the policy");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fputs("usage: poise_registration_order MODE\n", stderr);
    return 2;
  }
  const bool ok = RunFirst(argv[1]) &&
                  Ok(poise::grpc_lb::RegisterPolicies(), "RegisterPolicies") &&
                  Ok(poise::grpc_lb::ValidateServiceConfig(kConfig),
                     "ValidateServiceConfig") &&
                  CallThroughThePolicy();
  return ok ? 0 : 1;
}
