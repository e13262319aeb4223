// A user's program built without CMake: compiled and linked with nothing but
// `pkg-config --cflags --libs poise` against an installed tree
// (test/consumer/run.sh pkgconfig).
#include <cstdio>
#include <vector>

#include "poise/grpc_lb.h"
#include "poise/load_reports.h"
#include "poise/rendezvous.h"

int main() {
  if (absl::Status s = poise::grpc_lb::RegisterPolicies(); !s.ok()) {
    std::fprintf(stderr, "RegisterPolicies: %s\n", s.ToString().c_str());
    return 1;
  }
  const absl::Status valid = poise::grpc_lb::ValidateServiceConfig(
      R"({"loadBalancingConfig":[{"weighted_rendezvous":{"hashHeader":"k"}}]})");
  const absl::Status invalid = poise::grpc_lb::ValidateServiceConfig(
      R"({"loadBalancingConfig":[{"weighted_rendezvous":{}}]})");
  if (!valid.ok() || invalid.ok()) {
    std::fprintf(stderr, "ValidateServiceConfig: %s / %s\n",
                 valid.ToString().c_str(), invalid.ToString().c_str());
    return 1;
  }
  // The published vector: customer-42 belongs to b among a=1, b=3, c=6.
  const std::vector<poise::Candidate> backends = {{"a", 1}, {"b", 3}, {"c", 6}};
  const poise::Result<size_t> owner =
      poise::WeightedRendezvous::Pick("customer-42", backends);
  if (!owner.ok() || owner.value() != 1) {
    std::fprintf(stderr, "Pick: expected b\n");
    return 1;
  }
  // poise::server: options are checked (an empty metric name is refused).
  grpc::ServerBuilder builder;
  poise::LoadReportOptions options;
  options.metric_name.clear();
  if (poise::EnableLoadReports(builder, options).ok() ||
      poise::EnableLoadReports(builder) == nullptr) {
    std::fprintf(stderr, "EnableLoadReports: unexpected result\n");
    return 1;
  }
  std::printf("pkg-config consumer: ok\n");
  return 0;
}
