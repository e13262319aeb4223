// The public entry points: RegisterPolicies(), ValidateServiceConfig() and
// StatsSnapshot().
#include "src/grpc/registration.h"

#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/version_info.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "poise/grpc_lb.h"
#include "src/core/lib/channel/channel_args.h"
#include "src/core/lib/config/core_configuration.h"
#include "src/core/lib/iomgr/exec_ctx.h"
#include "src/core/lib/service_config/service_config_impl.h"
#include "src/core/lib/uri/uri_parser.h"
#include "src/dns/target.h"
#include "src/grpc/dns_resolver.h"
#include "src/router/connectivity.h"
#include "src/router/explain.h"
#include "src/router/picker.h"
#include "src/router/prometheus_text.h"
#include "src/router/stats_registry.h"

#ifndef POISE_GRPC_CORE_VERSION
#error "POISE_GRPC_CORE_VERSION must name the core version of the gRPC headers"
#endif

namespace poise::grpc_lb {
namespace {

// Whether gRPC has built its core configuration, after which registering a
// builder aborts the process (core_configuration.cc). gRPC 1.51 keeps the
// built configuration in a private static and offers no way to ask;
// an explicit template instantiation may name a private member (access
// checking does not apply to it, [temp.spec.general]), and hands its address
// to the friend function below.
struct BuiltConfiguration {
  using Pointer = std::atomic<grpc_core::CoreConfiguration*>*;
  friend Pointer AddressOf(BuiltConfiguration tag);
};
template <typename Tag, typename Tag::Pointer kAddress>
struct RevealAddress {
  friend typename Tag::Pointer AddressOf(Tag /*tag*/) { return kAddress; }
};
template struct RevealAddress<BuiltConfiguration,
                              &grpc_core::CoreConfiguration::config_>;

bool CoreConfigurationIsBuilt() {
  return AddressOf(BuiltConfiguration{})->load(std::memory_order_acquire) !=
         nullptr;
}

absl::Status Register() {
  absl::Status version =
      CheckGrpcVersion(grpc::Version(), grpc_version_string());
  if (!version.ok()) return version;
  // Only when code ran gRPC during the process's static initialization,
  // before this library's (RegisteredWhenLoaded below).
  if (CoreConfigurationIsBuilt()) {
    return absl::FailedPreconditionError(
        "poise: the policies were not registered: gRPC's core configuration "
        "was already built when this library was loaded (a channel, a server "
        "or grpc_init() ran during static initialization, before it), and "
        "registering then would abort the process");
  }
  grpc_core::CoreConfiguration::RegisterBuilder(
      [](grpc_core::CoreConfiguration::Builder* builder) {
        RegisterRendezvousLbPolicies(builder);
        RegisterPoiseResolvers(builder);
      });
  return absl::OkStatus();
}

// The registration's result, made once: when the library is loaded.
const absl::Status& Registration() {
  static const absl::Status* const result = new absl::Status(Register());
  return *result;
}

// Every public entry point is in this file, so any program that uses one
// links it, and registers here, during static initialization: before main(),
// so before anything can build gRPC's configuration, whatever the order of
// the calls that follow (ValidateServiceConfig, channels, servers,
// RegisterPolicies).
[[maybe_unused]] const bool registered_when_loaded = (Registration(), true);

}  // namespace

absl::Status CheckGrpcVersion(absl::string_view runtime_cpp,
                              absl::string_view runtime_core) {
  if (runtime_cpp != GRPC_CPP_VERSION_STRING ||
      runtime_core != POISE_GRPC_CORE_VERSION) {
    return absl::FailedPreconditionError(absl::StrCat(
        "poise: compiled against gRPC ", GRPC_CPP_VERSION_STRING, " (core ",
        POISE_GRPC_CORE_VERSION, ") but running with gRPC ", runtime_cpp,
        " (core ", runtime_core,
        "); the policies depend on that exact version's internal ABI and "
        "were not registered"));
  }
  return absl::OkStatus();
}

absl::Status RegisterPolicies() { return Registration(); }

absl::Status ValidateTarget(std::string_view target) {
  const absl::string_view text(target.data(), target.size());
  // What the channel does: gRPC's URI parser, then the scheme's resolver
  // (ours check the parts as CreateResolver does).
  const absl::StatusOr<grpc_core::URI> uri = grpc_core::URI::Parse(text);
  if (uri.ok()) {
    for (const dns::Scheme scheme : {dns::Scheme::kDns, dns::Scheme::kSrv}) {
      const std::string_view name = dns::SchemeName(scheme);
      if (uri->scheme() != absl::string_view(name.data(), name.size())) {
        continue;
      }
      return dns::ParseTargetParts(scheme, uri->authority(), uri->path(),
                                   target)
          .status();
    }
  }
  if (grpc_core::CoreConfiguration::Get().resolver_registry().IsValidTarget(
          text)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "target \"", text, "\": no resolver of gRPC accepts it (scheme ",
      uri.ok()
          ? absl::StrCat("\"", uri->scheme(), "\"")
          : std::string("unreadable: ") + std::string(uri.status().message()),
      ")"));
}

absl::Status ValidateServiceConfig(std::string_view service_config_json) {
  grpc_init();
  absl::Status status;
  {
    grpc_core::ExecCtx exec_ctx;
    auto config = grpc_core::ServiceConfigImpl::Create(
        grpc_core::ChannelArgs(),
        absl::string_view(service_config_json.data(),
                          service_config_json.size()));
    status = config.status();
  }
  grpc_shutdown();
  return status;
}

std::vector<ChannelStats> StatsSnapshot() {
  return router::SnapshotAllPolicies();
}

namespace {

// ExplainJson's object for `channel`, with its "channel", "policy",
// "not_ready" and "connectivity" members.
absl::StatusOr<std::string> ExplainForChannel(
    const router::PolicyStats& channel, std::string_view key,
    uint32_t factor_percent,
    const std::vector<router::ExplainedBackend>& ranked,
    const std::vector<std::string>& not_ready,
    const std::optional<std::string>& local_zone = std::nullopt,
    bool zone_listed = false) {
  const bool bounded = channel.policy() == kBoundedLoadRendezvousPolicy;
  std::string extra = router::ExplainChannelMembers(
      channel.label(), channel.policy(), not_ready);
  absl::StrAppend(&extra, ",\"connectivity\":",
                  router::JsonString(router::ToString(
                      channel.connectivity.load(std::memory_order_relaxed))));
  if (local_zone.has_value()) {  // P8: the zone's order and rule
    absl::StrAppend(
        &extra, ",",
        router::ExplainZoneMembers(key, factor_percent, ranked, *local_zone,
                                   zone_listed, bounded));
  }
  return router::ExplainJson(key, factor_percent, ranked, bounded, extra);
}

}  // namespace

absl::StatusOr<std::string> ExplainKey(std::string_view label,
                                       std::string_view key) {
  const absl::string_view quoted(label.data(), label.size());
  const std::vector<std::shared_ptr<router::PolicyStats>> channels =
      router::PoliciesLabelled(label);
  if (channels.empty()) {
    return absl::NotFoundError(
        absl::StrCat("no live channel has the stats label \"", quoted, "\""));
  }
  // A channel that routes now answers as its picker weighs the key.
  for (const std::shared_ptr<router::PolicyStats>& channel : channels) {
    const std::shared_ptr<const router::Picker> picker = channel->picker();
    if (picker == nullptr) continue;
    const router::Picker::Inputs inputs = picker->InputsNow();
    if (inputs.ready.empty()) continue;
    return ExplainForChannel(*channel, key, picker->factor_percent(),
                             inputs.ready, inputs.not_ready, inputs.local_zone,
                             inputs.zone_listed);
  }
  // Else none of its backends is READY (connecting, failed, or a new list
  // during churn): the key over every backend the stats list, the order its
  // calls take once they are READY, each of them named not READY.
  for (const std::shared_ptr<router::PolicyStats>& channel : channels) {
    const router::PolicyStats::Listed listed = channel->ListedNow();
    if (listed.backends == nullptr || listed.backends->backends.empty()) {
      continue;
    }
    std::vector<router::ExplainedBackend> ranked;
    std::vector<std::string> not_ready;
    ranked.reserve(listed.backends->backends.size());
    for (size_t i = 0; i < listed.backends->backends.size(); ++i) {
      const router::ListedBackend& b = listed.backends->backends[i];
      ranked.push_back({std::string(b.identity), listed.weights[i],
                        b.cell->in_flight->Load()});
      // By the state the stats show (one may turn READY before its picker
      // is published).
      if (b.cell->connectivity.load(std::memory_order_relaxed) !=
          router::Connectivity::kReady) {
        not_ready.emplace_back(b.identity);
      }
    }
    return ExplainForChannel(*channel, key, listed.balance_factor_percent,
                             ranked, not_ready);
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "channel \"", quoted,
      "\" lists no backend: its resolver has given no address list yet, or "
      "an empty one"));
}

std::string PrometheusText() {
  return router::PrometheusText(router::SnapshotForMetrics());
}

}  // namespace poise::grpc_lb
