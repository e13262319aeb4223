// The service config of the rendezvous policies (schema:
// proto/poise_config.proto): JSON in, router::Config out. The rules and
// their messages are the router's (src/router/config.h); this adds what is
// about JSON: the loader, the unknown-field rejection and gRPC's error form.
#ifndef POISE_SRC_GRPC_RENDEZVOUS_CONFIG_H_
#define POISE_SRC_GRPC_RENDEZVOUS_CONFIG_H_

#include "src/grpc/require_undebug.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include "absl/status/statusor.h"
#include "src/core/lib/json/json.h"
#include "src/router/config.h"

namespace poise::grpc_lb {

// Parses one policy's config object (the value under the policy name).
// Errors read like "errors validating bounded_load_rendezvous LB policy
// config: [field:hashHeader error:field not present]".
absl::StatusOr<router::Config> ParseRendezvousConfig(
    const grpc_core::Json& json, bool bounded);

}  // namespace poise::grpc_lb

#endif  // POISE_SRC_GRPC_RENDEZVOUS_CONFIG_H_
