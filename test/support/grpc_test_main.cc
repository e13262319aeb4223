// main() of the test binaries that exercise the policies. The policies are
// registered before gRPC initialises, because gRPC freezes its configuration
// then; gRPC stays initialised while the tests run, as the fake-subchannel
// tests need (real channels and servers hold it anyway).
#include <grpc/grpc.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "poise/grpc_lb.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const absl::Status registered = poise::grpc_lb::RegisterPolicies();
  if (!registered.ok()) {
    std::fprintf(stderr, "%s\n", registered.ToString().c_str());
    return 1;
  }
  grpc_init();
  const int ret = RUN_ALL_TESTS();
  grpc_shutdown();
  return ret;
}
