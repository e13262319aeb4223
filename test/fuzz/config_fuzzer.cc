// libFuzzer: the service-config parser and validator of both policies.
// The input's first byte picks the policy and the path; the rest is the
// policy's config value (JSON text). Invariants: no crash or sanitizer report;
// an accepted config satisfies every documented rule; a rejected one says
// which policy and names a field; the channel's parse (the LB registry, as
// ValidateServiceConfig uses) agrees with the policy's own.
#include "src/grpc/require_undebug.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include <grpc/grpc.h>
#include <grpc/support/log.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "poise/grpc_lb.h"
#include "src/core/lib/config/core_configuration.h"
#include "src/core/lib/json/json.h"
#include "src/core/lib/load_balancing/lb_policy_registry.h"
#include "src/grpc/rendezvous_config.h"
#include "src/router/config.h"
#include "test/fuzz/fuzz_check.h"

namespace {
void NoLog(gpr_log_func_args* /*args*/) {}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  gpr_set_log_function(NoLog);
  if (!poise::grpc_lb::RegisterPolicies().ok()) std::abort();
  grpc_init();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool bounded = (data[0] & 1) != 0;
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  auto json = grpc_core::Json::Parse(body);
  if (!json.ok()) return 0;
  const auto parsed = poise::grpc_lb::ParseRendezvousConfig(*json, bounded);
  const char* name =
      bounded ? "bounded_load_rendezvous" : "weighted_rendezvous";
  // The registry path the channel takes.
  auto wrapped =
      grpc_core::Json::Parse(absl::StrCat("[{\"", name, "\":", body, "}]"));
  if (wrapped.ok()) {
    const auto registry = grpc_core::CoreConfiguration::Get()
                              .lb_policy_registry()
                              .ParseLoadBalancingConfig(*wrapped);
    FUZZ_CHECK(registry.ok() == parsed.ok());
  }
  if (!parsed.ok()) {
    const std::string message(parsed.status().message());
    FUZZ_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StartsWith(
        message,
        absl::StrCat("errors validating ", name, " LB policy config")));
    FUZZ_CHECK(absl::StrContains(message, "field:"));
    return 0;
  }
  const poise::router::Config& c = *parsed;
  FUZZ_CHECK(c.bounded == bounded);
  FUZZ_CHECK(!c.hash_header.empty());
  for (char ch : c.hash_header) {
    FUZZ_CHECK((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
               ch == '-' || ch == '_' || ch == '.');
  }
  FUZZ_CHECK(!absl::StartsWith(c.hash_header, "grpc-"));
  FUZZ_CHECK(c.balance_factor_percent >= 100);
  FUZZ_CHECK(c.default_weight >= 1);
  FUZZ_CHECK(!c.max_in_flight_per_backend.has_value() ||
             *c.max_in_flight_per_backend >= 1);
  for (const auto& e : c.endpoints) {
    // Matched by address, identity or both; an address is normalised:
    // printing it again changes nothing.
    FUZZ_CHECK(e.address.has_value() || e.identity.has_value());
    FUZZ_CHECK(!e.address.has_value() ||
               poise::router::NormalizeAddress(*e.address) == e.address);
    FUZZ_CHECK(!e.weight.has_value() || *e.weight >= 1);
    FUZZ_CHECK(!e.identity.has_value() || !e.identity->empty());
  }
  if (c.server_load.has_value()) {
    using poise::router::ServerLoadConfig;
    const ServerLoadConfig& load = *c.server_load;
    FUZZ_CHECK(c.bounded);
    FUZZ_CHECK(!load.metric.empty() &&
               load.metric.size() <= ServerLoadConfig::kMaxMetricLength);
    for (char ch : load.metric) FUZZ_CHECK(ch > ' ' && ch <= '~');
    const absl::Duration interval = load.out_of_band_interval;
    FUZZ_CHECK(interval == absl::ZeroDuration() ||
               (interval >= ServerLoadConfig::kMinOutOfBandInterval &&
                interval <= ServerLoadConfig::kMaxDuration));
    FUZZ_CHECK(load.max_report_age > absl::ZeroDuration() &&
               load.max_report_age <= ServerLoadConfig::kMaxDuration);
    FUZZ_CHECK(interval == absl::ZeroDuration() ||
               load.max_report_age > interval);
  }
  // The router's own validation agrees: nothing left to report.
  poise::router::Config again = c;
  FUZZ_CHECK(poise::router::NormalizeAndValidate(again).empty());
  return 0;
}
