// Internal: the policies' registration hook.
#ifndef POISE_SRC_GRPC_REGISTRATION_H_
#define POISE_SRC_GRPC_REGISTRATION_H_

#include "src/grpc/require_undebug.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "src/core/lib/config/core_configuration.h"

namespace poise::grpc_lb {

// Adds the weighted_rendezvous and bounded_load_rendezvous factories.
void RegisterRendezvousLbPolicies(
    grpc_core::CoreConfiguration::Builder* builder);

// The policies use gRPC's internal API and object layouts, which change in
// every release: only the exact gRPC this library was compiled against (C++
// and core versions) is safe. Fails with FailedPrecondition otherwise.
absl::Status CheckGrpcVersion(absl::string_view runtime_cpp,
                              absl::string_view runtime_core);

}  // namespace poise::grpc_lb

#endif  // POISE_SRC_GRPC_REGISTRATION_H_
