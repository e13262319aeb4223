// GRPC_TRACE=poise_rendezvous: the rendezvous policies' trace flag and the
// macro their files log with (rendezvous_lb.cc defines the flag).
#ifndef POISE_SRC_GRPC_RENDEZVOUS_TRACE_H_
#define POISE_SRC_GRPC_RENDEZVOUS_TRACE_H_

#include "src/grpc/require_undebug.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include <grpc/support/log.h>

#include "src/core/lib/debug/trace.h"

namespace poise::grpc_lb {

// GRPC_TRACE=poise_rendezvous logs decisions and state changes.
extern grpc_core::TraceFlag poise_rendezvous_trace;

}  // namespace poise::grpc_lb

#define POISE_TRACE(...)                                                     \
  do {                                                                       \
    if (GRPC_TRACE_FLAG_ENABLED(::poise::grpc_lb::poise_rendezvous_trace)) { \
      gpr_log(GPR_INFO, __VA_ARGS__);                                        \
    }                                                                        \
  } while (0)

#endif  // POISE_SRC_GRPC_RENDEZVOUS_TRACE_H_
