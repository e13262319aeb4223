// A backend's routing state as a transition function, and the channel's
// state by each of its rules S1-S4 (src/router/connectivity.h; README
// "Behaviour").
#include "src/router/connectivity.h"

#include <gtest/gtest.h>

#include <vector>

#include "test/router/router_test_util.h"

namespace poise::router {
namespace {

using test::States;

constexpr Connectivity kAll[] = {
    Connectivity::kIdle, Connectivity::kConnecting, Connectivity::kReady,
    Connectivity::kTransientFailure, Connectivity::kShutdown};

TEST(RoutingState, Transitions) {
  for (const RoutingState from :
       {RoutingState::kPending, RoutingState::kReady, RoutingState::kFailed}) {
    EXPECT_EQ(NextRoutingState(from, Connectivity::kReady),
              RoutingState::kReady);
    EXPECT_EQ(NextRoutingState(from, Connectivity::kTransientFailure),
              RoutingState::kFailed);
    for (const Connectivity c : {Connectivity::kIdle, Connectivity::kConnecting,
                                 Connectivity::kShutdown}) {
      // Only a never-READY backend is pending; one that leaves READY (a
      // GOAWAY's IDLE, a lost connection) is failed, and failed stays
      // failed until READY.
      EXPECT_EQ(NextRoutingState(from, c), from == RoutingState::kPending
                                               ? RoutingState::kPending
                                               : RoutingState::kFailed)
          << ToString(from) << " + " << ToString(c);
    }
  }
}

TEST(RoutingState, ApplyReportsChangesAndKeepsTheLastFailure) {
  BackendState b;
  EXPECT_EQ(b.routing, RoutingState::kPending);  // never READY yet
  EXPECT_FALSE(b.Apply(Connectivity::kConnecting, absl::OkStatus()));
  EXPECT_TRUE(b.Apply(Connectivity::kReady, absl::OkStatus()));
  EXPECT_TRUE(b.Apply(Connectivity::kTransientFailure,
                      absl::UnavailableError("refused")));
  EXPECT_EQ(b.last_failure, absl::UnavailableError("refused"));
  // A reconnect attempt: still failed, nothing changed.
  EXPECT_FALSE(b.Apply(Connectivity::kConnecting, absl::OkStatus()));
  EXPECT_FALSE(b.Apply(Connectivity::kTransientFailure,
                       absl::UnavailableError("refused again")));
  EXPECT_EQ(b.last_failure, absl::UnavailableError("refused again"));
  EXPECT_TRUE(b.Apply(Connectivity::kReady, absl::OkStatus()));
  EXPECT_FALSE(b.reconnecting);
}

// A backend leaving READY without a TRANSIENT_FAILURE (GOAWAY, a drained or
// crashed server) passes its keys on at once, and is "reconnecting" for the
// channel's state until it fails or is READY again.
TEST(RoutingState, LeavingReadyIsFailedAndReconnecting) {
  for (const Connectivity c : {Connectivity::kIdle, Connectivity::kConnecting,
                               Connectivity::kShutdown}) {
    BackendState b;
    EXPECT_TRUE(b.Apply(Connectivity::kReady, absl::OkStatus()));
    EXPECT_TRUE(b.Apply(c, absl::OkStatus()));
    EXPECT_EQ(b.routing, RoutingState::kFailed) << ToString(c);
    EXPECT_TRUE(b.reconnecting);
    EXPECT_EQ(b.last_failure.code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(b.last_failure.message().find(ToString(c)),
              std::string_view::npos);
    // Its reconnect attempt changes nothing; a refusal ends "reconnecting".
    EXPECT_FALSE(b.Apply(Connectivity::kConnecting, absl::OkStatus()));
    EXPECT_TRUE(b.reconnecting);
    EXPECT_FALSE(b.Apply(Connectivity::kTransientFailure,
                         absl::UnavailableError("refused")));
    EXPECT_FALSE(b.reconnecting);
    EXPECT_FALSE(b.Apply(Connectivity::kIdle, absl::OkStatus()));
    EXPECT_FALSE(b.reconnecting);  // failed already: still a failure
    EXPECT_EQ(b.last_failure, absl::UnavailableError("refused"));
    EXPECT_TRUE(b.Apply(Connectivity::kReady, absl::OkStatus()));
    EXPECT_FALSE(b.reconnecting);
  }
}

TEST(Connectivity, NamesAreGrpcs) {
  const char* const names[] = {"IDLE", "CONNECTING", "READY",
                               "TRANSIENT_FAILURE", "SHUTDOWN"};
  for (size_t i = 0; i < 5; ++i) EXPECT_STREQ(ToString(kAll[i]), names[i]);
}

// S1: any backend READY -> READY, whatever the others.
TEST(AggregateState, Rule1AnyReadyIsReady) {
  std::vector<BackendState> states = States(3, RoutingState::kFailed);
  states[2].routing = RoutingState::kReady;
  states[0].routing = RoutingState::kPending;
  const ChannelState channel = AggregateState(states, absl::OkStatus(), "");
  EXPECT_EQ(channel.state, Connectivity::kReady);
  EXPECT_TRUE(channel.status.ok());
  // An address error does not matter while there are backends.
  EXPECT_EQ(AggregateState(states, absl::UnavailableError("dns"), "").state,
            Connectivity::kReady);
}

// S2: else any pending -> CONNECTING (calls wait).
TEST(AggregateState, Rule2AnyPendingIsConnecting) {
  std::vector<BackendState> states = States(3, RoutingState::kFailed);
  states[1].routing = RoutingState::kPending;
  const ChannelState channel = AggregateState(states, absl::OkStatus(), "");
  EXPECT_EQ(channel.state, Connectivity::kConnecting);
  EXPECT_TRUE(channel.status.ok());
  EXPECT_EQ(
      AggregateState(States(2, RoutingState::kPending), absl::OkStatus(), "")
          .state,
      Connectivity::kConnecting);
}

// S2 also holds the channel's calls while every backend lost its READY
// connection and none has failed to reconnect yet (a GOAWAY everywhere).
TEST(AggregateState, Rule2ReconnectingAfterReadyIsConnecting) {
  std::vector<BackendState> states(2);
  for (BackendState& b : states) {
    b.Apply(Connectivity::kReady, absl::OkStatus());
    b.Apply(Connectivity::kIdle, absl::OkStatus());
  }
  EXPECT_EQ(AggregateState(states, absl::OkStatus(), "").state,
            Connectivity::kConnecting);
  states[0].Apply(Connectivity::kTransientFailure, absl::UnavailableError("x"));
  EXPECT_EQ(AggregateState(states, absl::OkStatus(), "").state,
            Connectivity::kConnecting);
  states[1].Apply(Connectivity::kTransientFailure, absl::UnavailableError("y"));
  const ChannelState channel = AggregateState(states, absl::OkStatus(), "");
  EXPECT_EQ(channel.state, Connectivity::kTransientFailure);
  EXPECT_EQ(channel.status,
            absl::UnavailableError("poise: connections to all 2 backends "
                                   "failing; last error: UNAVAILABLE: y"));
}

// S3: else TRANSIENT_FAILURE with the last failure in list order.
TEST(AggregateState, Rule3AllFailedIsTransientFailureWithTheLastError) {
  std::vector<BackendState> states = States(3, RoutingState::kFailed);
  states[0].last_failure = absl::UnavailableError("refused 0");
  states[1].last_failure = absl::UnavailableError("refused 1");
  states[2].last_failure = absl::UnavailableError("refused 2");
  const ChannelState channel = AggregateState(states, absl::OkStatus(), "");
  EXPECT_EQ(channel.state, Connectivity::kTransientFailure);
  EXPECT_EQ(channel.status,
            absl::UnavailableError("poise: connections to all 3 backends "
                                   "failing; last error: UNAVAILABLE: "
                                   "refused 2"));
}

// S4: no backends -> TRANSIENT_FAILURE with the resolver's note, or its
// error when it reported one.
TEST(AggregateState, Rule4EmptyListCarriesTheNoteOrTheAddressError) {
  ChannelState channel = AggregateState({}, absl::OkStatus(), "no endpoints");
  EXPECT_EQ(channel.state, Connectivity::kTransientFailure);
  EXPECT_EQ(channel.status,
            absl::UnavailableError("empty address list: no endpoints"));
  channel = AggregateState({}, absl::UnavailableError("dns: NXDOMAIN"), "n");
  EXPECT_EQ(channel.state, Connectivity::kTransientFailure);
  EXPECT_EQ(channel.status, absl::UnavailableError("dns: NXDOMAIN"));
}

}  // namespace
}  // namespace poise::router
