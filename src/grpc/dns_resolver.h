// Internal: the poise-dns and poise-srv resolvers, which give each address
// the identity of the DNS name it came from (kIdentityAddressArg).
#ifndef POISE_SRC_GRPC_DNS_RESOLVER_H_
#define POISE_SRC_GRPC_DNS_RESOLVER_H_

#include "src/grpc/require_undebug.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include "src/core/lib/config/core_configuration.h"

namespace poise::grpc_lb {

// Adds the poise-dns and poise-srv resolver factories.
void RegisterPoiseResolvers(grpc_core::CoreConfiguration::Builder* builder);

}  // namespace poise::grpc_lb

#endif  // POISE_SRC_GRPC_DNS_RESOLVER_H_
