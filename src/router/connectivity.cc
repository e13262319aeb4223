#include "src/router/connectivity.h"

#include "absl/strings/str_cat.h"

namespace poise::router {

const char* ToString(Connectivity state) {
  switch (state) {
    case Connectivity::kIdle:
      return "IDLE";
    case Connectivity::kConnecting:
      return "CONNECTING";
    case Connectivity::kReady:
      return "READY";
    case Connectivity::kTransientFailure:
      return "TRANSIENT_FAILURE";
    case Connectivity::kShutdown:
      return "SHUTDOWN";
  }
  return "UNKNOWN";
}

const char* ToString(RoutingState state) {
  switch (state) {
    case RoutingState::kPending:
      return "pending";
    case RoutingState::kReady:
      return "ready";
    case RoutingState::kFailed:
      return "failed";
  }
  return "unknown";
}

RoutingState NextRoutingState(RoutingState current, Connectivity reported) {
  switch (reported) {
    case Connectivity::kReady:
      return RoutingState::kReady;
    case Connectivity::kTransientFailure:
      return RoutingState::kFailed;
    case Connectivity::kIdle:
    case Connectivity::kConnecting:
    case Connectivity::kShutdown:
      // Not READY: a backend that was READY (or failed since) is failed
      // until READY again; only a never-READY one is pending.
      return current == RoutingState::kPending ? RoutingState::kPending
                                               : RoutingState::kFailed;
  }
  return current;
}

bool BackendState::Apply(Connectivity reported, const absl::Status& status) {
  const RoutingState before = routing;
  routing = NextRoutingState(routing, reported);
  if (reported == Connectivity::kTransientFailure) {
    last_failure = status;
    reconnecting = false;
  } else if (reported == Connectivity::kReady) {
    reconnecting = false;
  } else if (before == RoutingState::kReady) {
    last_failure = absl::UnavailableError(
        absl::StrCat("connection lost (READY -> ", ToString(reported), ")"));
    reconnecting = true;
  }
  return routing != before;
}

ChannelState AggregateState(const std::vector<BackendState>& backends,
                            const absl::Status& address_error,
                            std::string_view resolution_note) {
  // S4 first: it is the only rule that applies to an empty list.
  if (backends.empty()) {
    if (!address_error.ok()) {
      return {Connectivity::kTransientFailure, address_error};
    }
    return {Connectivity::kTransientFailure,
            absl::UnavailableError(
                absl::StrCat("empty address list: ",
                             absl::string_view(resolution_note.data(),
                                               resolution_note.size())))};
  }
  bool any_pending = false;
  const absl::Status* last_failure = nullptr;
  for (const BackendState& b : backends) {
    switch (b.routing) {
      case RoutingState::kReady:
        return {Connectivity::kReady, absl::OkStatus()};  // S1
      case RoutingState::kPending:
        any_pending = true;
        break;
      case RoutingState::kFailed:
        any_pending |= b.reconnecting;
        last_failure = &b.last_failure;
        break;
    }
  }
  if (any_pending) return {Connectivity::kConnecting, absl::OkStatus()};
  return {Connectivity::kTransientFailure,  // S3
          absl::UnavailableError(absl::StrCat(
              "poise: connections to all ", backends.size(),
              " backends failing; last error: ", last_failure->ToString()))};
}

}  // namespace poise::router
