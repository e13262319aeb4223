// Internal: the policies' registration hook.
#ifndef POISE_SRC_GRPC_REGISTRATION_H_
#define POISE_SRC_GRPC_REGISTRATION_H_

#include "src/grpc/internal_guard.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include "src/core/lib/config/core_configuration.h"

namespace poise::grpc_lb {

// Adds the weighted_rendezvous and bounded_load_rendezvous factories.
void RegisterRendezvousLbPolicies(
    grpc_core::CoreConfiguration::Builder* builder);

}  // namespace poise::grpc_lb

#endif  // POISE_SRC_GRPC_REGISTRATION_H_
