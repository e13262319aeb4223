// main() of poise_server_test: registers gRPC's two test LB policies that
// show what gRPC's own client reads of the load reports (lb_sinks.h), before
// gRPC initialises and freezes its configuration.
// clang-format off
#include "src/grpc/require_undebug.h"
#include <grpc/support/port_platform.h>
// clang-format on

#include <grpc/grpc.h>
#include <gtest/gtest.h>

#include <string>

#include "src/core/lib/config/core_configuration.h"
#include "test/core/util/test_lb_policies.h"
#include "test/server/lb_sinks.h"

namespace poise::test_support {

ReportSink& Sink() {
  static auto* sink = new ReportSink();
  return *sink;
}

namespace {

Utilization Copy(const grpc_core::BackendMetricData& data) {
  Utilization out;
  for (const auto& [name, value] : data.utilization) {
    out.emplace(name, value);
  }
  return out;
}

}  // namespace
}  // namespace poise::test_support

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  using poise::test_support::Sink;
  grpc_core::CoreConfiguration::RegisterBuilder(
      [](grpc_core::CoreConfiguration::Builder* builder) {
        grpc_core::RegisterInterceptRecvTrailingMetadataLoadBalancingPolicy(
            builder, [](const grpc_core::TrailingMetadataArgsSeen& seen) {
              std::string id;
              for (const auto& [key, value] : seen.metadata) {
                if (key == poise::test_support::kCallIdKey) id = value;
              }
              if (id.empty()) return;
              std::optional<poise::test_support::Utilization> report;
              if (seen.backend_metric_data != nullptr) {
                report = poise::test_support::Copy(*seen.backend_metric_data);
              }
              Sink().AddCall(id, std::move(report));
            });
        grpc_core::RegisterOobBackendMetricTestLoadBalancingPolicy(
            builder, [](const grpc_core::ServerAddress& /*address*/,
                        const grpc_core::BackendMetricData& data) {
              Sink().AddOob(poise::test_support::Copy(data));
            });
      });
  grpc_init();
  const int ret = RUN_ALL_TESTS();
  grpc_shutdown();
  return ret;
}
