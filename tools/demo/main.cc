// poise-demo: the whole idea on localhost, from real RPCs.
//
// Starts N echo backends with weights, then drives the same key workload
// (Zipf-like popularity plus one hot key, with concurrency and a small
// server-side delay so in-flight counts are real) through one channel per
// policy: bounded_load_rendezvous, weighted_rendezvous and gRPC's round_robin.
// For the two rendezvous channels it then stops one backend while the traffic
// keeps flowing and reports which keys moved and where to, and how many
// calls the stop lost without a retryPolicy and with the recommended one
// (examples/retry_service_config.json; README "Drains, crashes and retries").
//
//   poise-demo [--backends N] [--weights a,b,...] [--factor PCT]
//              [--duration SECONDS] [--keys N] [--concurrency N]
//              [--delay-ms MS] [--stop INDEX] [--json]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backends.h"
#include "options.h"
#include "poise/grpc_lb.h"
#include "policies.h"
#include "report.h"
#include "runner.h"
#include "workload.h"

namespace poise_demo {
namespace {

int Run(const Options& opt) {
  const auto start = Clock::now();

  // Before the first channel or server exists.
  if (absl::Status s = poise::grpc_lb::RegisterPolicies(); !s.ok()) {
    std::fprintf(stderr, "poise-demo: RegisterPolicies: %s\n",
                 s.ToString().c_str());
    return 1;
  }

  BackendSet set;
  if (absl::Status s = StartBackends(opt.backends, &set); !s.ok()) {
    std::fprintf(stderr, "poise-demo: starting backends: %s\n",
                 s.ToString().c_str());
    return 1;
  }
  const std::vector<uint32_t> sequence = MakeSequence(opt.keys);
  Runner runner(opt, &set, &sequence);

  std::vector<PolicyReport> reports;
  for (Policy policy :
       {Policy::kBounded, Policy::kWeighted, Policy::kRoundRobin}) {
    const std::string config = ServiceConfig(policy, opt, set);
    if (absl::Status s = poise::grpc_lb::ValidateServiceConfig(config);
        !s.ok()) {
      std::fprintf(stderr, "poise-demo: service config for %s: %s\n%s\n",
                   PolicyName(policy), s.ToString().c_str(), config.c_str());
      return 1;
    }
    reports.push_back(runner.Run(policy, config));
  }
  set.StopAll();

  if (opt.json) {
    PrintJson(opt, set, reports);
  } else {
    PrintText(opt, set, reports);
    std::printf("\n(%.1f s in all)\n",
                std::chrono::duration<double>(Clock::now() - start).count());
  }
  return 0;
}

}  // namespace
}  // namespace poise_demo

int main(int argc, char** argv) {
  poise_demo::Options opt;
  if (int rc = poise_demo::ParseOptions(argc, argv, &opt); rc != 0) return rc;
  return poise_demo::Run(opt);
}
