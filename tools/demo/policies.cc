#include "policies.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "poise/grpc_lb.h"
#include "workload.h"

namespace poise_demo {
namespace {

// Far above any --concurrency, so never reached: with it weighted_rendezvous
// counts in-flight calls too, and the statistics show its peaks.
constexpr int kMaxInFlight = 1000;

// The recommended retryPolicy of examples/retry_service_config.json, for the
// demo's service (README "Drains, crashes and retries" gives the reasons).
constexpr char kRetryMethodConfig[] =
    R"("methodConfig":[{"name":[{"service":"poise.example.Echo"}],)"
    R"("retryPolicy":{"maxAttempts":4,"initialBackoff":"0.01s",)"
    R"("maxBackoff":"0.1s","backoffMultiplier":2,)"
    R"("retryableStatusCodes":["UNAVAILABLE","CANCELLED"]}}])";

}  // namespace

const char* PolicyName(Policy p) {
  switch (p) {
    case Policy::kBounded:
      return "bounded_load_rendezvous";
    case Policy::kWeighted:
      return "weighted_rendezvous";
    case Policy::kRoundRobin:
      return "round_robin";
  }
  return "?";
}

bool IsPoise(Policy p) { return p != Policy::kRoundRobin; }

std::string ServiceConfig(Policy policy, const Options& opt,
                          const BackendSet& set) {
  if (!IsPoise(policy)) {
    return R"({"loadBalancingConfig":[{"round_robin":{}}]})";
  }
  std::vector<std::string> endpoints;
  for (size_t i = 0; i < set.size(); ++i) {
    endpoints.push_back(absl::StrFormat(
        R"({"address":"%s","weight":%d,"identity":"%s"})",
        set.backend(i).address(), opt.weights[i], set.backend(i).id()));
  }
  std::string fields = absl::StrCat(R"("hashHeader":")", kHashHeader, R"(")");
  if (policy == Policy::kBounded) {
    absl::StrAppend(&fields, R"(,"balanceFactorPercent":)", opt.factor);
  }
  absl::StrAppend(&fields, R"(,"endpoints":[)", absl::StrJoin(endpoints, ","),
                  R"(],"defaultWeight":1,"missingKey":"RANDOM")",
                  R"(,"maxInFlightPerBackend":)", kMaxInFlight);
  return absl::StrCat(R"({"loadBalancingConfig":[{")", PolicyName(policy),
                      R"(":{)", fields, "}}]}");
}

std::string WithRetryPolicy(const std::string& config) {
  return absl::StrCat(config.substr(0, config.rfind('}')), ",",
                      kRetryMethodConfig, "}");
}

std::unique_ptr<poise::example::Echo::Stub> NewStub(
    const BackendSet& set, const std::string& service_config,
    const std::string& label) {
  grpc::ChannelArguments args;
  args.SetServiceConfigJSON(service_config);
  args.SetString(poise::grpc_lb::kStatsLabelArg, label);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel = grpc::CreateCustomChannel(
      set.target(), grpc::InsecureChannelCredentials(), args);
  return poise::example::Echo::NewStub(channel);
}

PoiseStats Snapshot(const std::string& label, const BackendSet& set) {
  PoiseStats out;
  out.picks_by_backend.assign(set.size(), 0);
  out.spilled_in.assign(set.size(), 0);
  out.peak_in_flight.assign(set.size(), 0);
  for (const auto& channel : poise::grpc_lb::StatsSnapshot()) {
    if (channel.label != label) continue;
    out.found = true;
    out.picks = channel.picks;
    out.spills = channel.spills;
    out.missing_key = channel.missing_key;
    out.failed_picks = channel.failed_picks;
    for (const auto& b : channel.backends) {
      const int index = FindBackend(set, b.identity, b.address);
      if (index < 0) continue;
      const auto i = static_cast<size_t>(index);
      out.picks_by_backend[i] = b.picks;
      out.spilled_in[i] = b.spilled_in;
      out.peak_in_flight[i] = b.peak_in_flight;
    }
  }
  return out;
}

}  // namespace poise_demo
