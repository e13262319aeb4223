// The public entry points: RegisterPolicies(), ValidateServiceConfig() and
// StatsSnapshot().
#include "src/grpc/registration.h"

#include <grpc/grpc.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/version_info.h>

#include <mutex>
#include <string>

#include "absl/strings/str_cat.h"
#include "poise/grpc_lb.h"
#include "src/core/lib/channel/channel_args.h"
#include "src/core/lib/iomgr/exec_ctx.h"
#include "src/core/lib/service_config/service_config_impl.h"
#include "src/dns/target.h"
#include "src/grpc/dns_resolver.h"
#include "src/router/stats_registry.h"

#ifndef POISE_GRPC_CORE_VERSION
#error "POISE_GRPC_CORE_VERSION must name the core version of the gRPC headers"
#endif

namespace poise::grpc_lb {
namespace {

absl::Status Register() {
  absl::Status version =
      CheckGrpcVersion(grpc::Version(), grpc_version_string());
  if (!version.ok()) return version;
  // gRPC aborts when a builder is registered after its configuration was
  // built, which happens when gRPC is first initialised (the first channel
  // or server). Only that it is initialised now can be checked.
  if (grpc_is_initialized() != 0) {
    return absl::FailedPreconditionError(
        "poise: RegisterPolicies() must run before the first gRPC channel or "
        "server is created (gRPC is already initialised; registering now "
        "would abort the process)");
  }
  grpc_core::CoreConfiguration::RegisterBuilder(
      [](grpc_core::CoreConfiguration::Builder* builder) {
        RegisterRendezvousLbPolicies(builder);
        RegisterPoiseResolvers(builder);
      });
  return absl::OkStatus();
}

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

absl::Status RegisterPolicies() {
  static std::once_flag once;
  static absl::Status* result = nullptr;
  std::call_once(once, [] { result = new absl::Status(Register()); });
  return *result;
}

absl::Status ValidateTarget(std::string_view target) {
  return dns::ValidateTarget(target);
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

}  // namespace poise::grpc_lb
