// A client of three echo servers that routes each call by its session key.
//
//   poise-example-server --port 50051 --id a &   # and 50052 b, 50053 c
//   poise-example-client [--target ipv4:127.0.0.1:50051,...] [--config FILE]
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "echo.grpc.pb.h"
#include "poise/grpc_lb.h"

#ifndef POISE_EXAMPLE_SERVICE_CONFIG
#define POISE_EXAMPLE_SERVICE_CONFIG "service_config.json"
#endif

int main(int argc, char** argv) {
  std::string target = "ipv4:127.0.0.1:50051,127.0.0.1:50052,127.0.0.1:50053";
  std::string config_path = POISE_EXAMPLE_SERVICE_CONFIG;
  for (int i = 1; i < argc; i += 2) {
    const std::string arg = argv[i];
    if (i + 1 < argc && arg == "--target") {
      target = argv[i + 1];
    } else if (i + 1 < argc && arg == "--config") {
      config_path = argv[i + 1];
    } else {
      std::fprintf(stderr,
                   "usage: poise-example-client [--target T] [--config F]\n");
      return 2;
    }
  }

  // 1. Once, at start-up, before any channel or server exists.
  if (absl::Status s = poise::grpc_lb::RegisterPolicies(); !s.ok()) {
    std::fprintf(stderr, "RegisterPolicies: %s\n", s.ToString().c_str());
    return 1;
  }

  // 2. The service config selects the policy; validate it first, because a
  //    channel with a bad config fails every call and only logs why.
  std::ifstream file(config_path);
  std::stringstream json;
  json << file.rdbuf();
  if (!file) {
    std::fprintf(stderr, "cannot read %s\n", config_path.c_str());
    return 1;
  }
  if (absl::Status s = poise::grpc_lb::ValidateServiceConfig(json.str());
      !s.ok()) {
    std::fprintf(stderr, "bad service config: %s\n", s.ToString().c_str());
    return 1;
  }
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(json.str());
  auto channel = grpc::CreateCustomChannel(
      target, grpc::InsecureChannelCredentials(), args);
  auto stub = poise::example::Echo::NewStub(channel);

  // 3. Every call carries its key in the header named by "hashHeader".
  for (const char* key : {"customer-1", "customer-2", "customer-3",
                          "customer-42", "customer-7"}) {
    for (int attempt = 0; attempt < 3; ++attempt) {
      grpc::ClientContext context;
      context.AddMetadata("x-session-id", key);
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(5));
      poise::example::EchoRequest request;
      request.set_payload(key);
      poise::example::EchoReply reply;
      grpc::Status status = stub->Echo(&context, request, &reply);
      if (status.ok()) {
        std::printf("%-12s -> backend %s\n", key, reply.backend_id().c_str());
      } else {
        std::printf("%-12s -> error %d: %s\n", key, status.error_code(),
                    status.error_message().c_str());
      }
    }
  }
  return 0;
}
