// Connectivity as routing sees it: each backend's routing state, and the
// channel's state from all of them.
#ifndef POISE_SRC_ROUTER_CONNECTIVITY_H_
#define POISE_SRC_ROUTER_CONNECTIVITY_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace poise::router {

// gRPC's connectivity states with grpc_connectivity_state's values (src/grpc
// converts by a cast, checked by a static_assert there).
enum class Connectivity : uint8_t {
  kIdle = 0,
  kConnecting = 1,
  kReady = 2,
  kTransientFailure = 3,
  kShutdown = 4,
};

// gRPC's name of the state ("IDLE", "TRANSIENT_FAILURE", ...).
const char* ToString(Connectivity state);

// ---------------------------------------------------------------------------
// A backend's routing state
//
// What a backend does with the keys it owns:
//   - READY serves them;
//   - pending (never READY yet: IDLE or CONNECTING since it was listed)
//     holds them: their calls wait, because the backend is about to be
//     READY and they would otherwise land on whichever backend connected
//     first, and move again a moment later;
//   - failed (TRANSIENT_FAILURE, or leaving READY for anything else: a
//     GOAWAY or a lost connection reports IDLE) passes them to their next
//     READY choice. A backend that was READY is never pending again: a
//     draining or crashed server's reconnect may take up to gRPC's 20 s
//     connect timeout (an address that accepts TCP but never speaks
//     HTTP/2), and its keys must not wait for it. Failed is sticky until
//     READY again: a reconnect attempt's CONNECTING or IDLE does not make
//     its keys wait again.
enum class RoutingState : uint8_t { kPending, kReady, kFailed };

const char* ToString(RoutingState state);

// The routing state after the backend reports `reported` in `current`.
// SHUTDOWN changes nothing but readiness, like IDLE (gRPC 1.51 does not
// report it to policies).
RoutingState NextRoutingState(RoutingState current, Connectivity reported);

// A backend's routing state and the status of its last failure.
struct BackendState {
  // Set by each TRANSIENT_FAILURE report, and to UNAVAILABLE "connection
  // lost" when the backend leaves READY for IDLE or CONNECTING. First: the
  // two flags then share its last word, which keeps the struct a word
  // smaller per backend and channel.
  absl::Status last_failure;
  RoutingState routing = RoutingState::kPending;
  // Failed by leaving READY, with no TRANSIENT_FAILURE since: reconnecting.
  bool reconnecting = false;

  // Applies one connectivity report; returns whether `routing` changed.
  bool Apply(Connectivity reported, const absl::Status& status);
};

// ---------------------------------------------------------------------------
// The channel's state

struct ChannelState {
  Connectivity state;
  absl::Status status;  // OK unless state is kTransientFailure
};

// The channel's state, as gRPC's own policies compute it (with their tests:
// docs/rules.md):
//   S1. any backend READY -> READY;
//   S2. else any backend pending, or failed but reconnecting after it lost
//       its READY connection (no TRANSIENT_FAILURE since) -> CONNECTING:
//       calls wait;
//   S3. else TRANSIENT_FAILURE with the last failure in list order,
//       "poise: connections to all N backends failing; last error: ...";
//   S4. no backends at all -> TRANSIENT_FAILURE with `address_error` when
//       the resolver reported one, else "empty address list: <note>".
ChannelState AggregateState(const std::vector<BackendState>& backends,
                            const absl::Status& address_error,
                            std::string_view resolution_note);

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_CONNECTIVITY_H_
