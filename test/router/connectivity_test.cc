// A backend's routing state as a transition function, and the channel's
// state by each of the four rules (README "Connectivity and failure
// behaviour").
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
      // Pending or READY becomes pending (IDLE after a clean disconnect
      // holds its keys); failed stays failed until READY.
      EXPECT_EQ(NextRoutingState(from, c), from == RoutingState::kFailed
                                               ? RoutingState::kFailed
                                               : RoutingState::kPending)
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
  EXPECT_TRUE(b.Apply(Connectivity::kIdle, absl::OkStatus()));
  EXPECT_EQ(b.routing, RoutingState::kPending);
}

TEST(Connectivity, NamesAreGrpcs) {
  const char* const names[] = {"IDLE", "CONNECTING", "READY",
                               "TRANSIENT_FAILURE", "SHUTDOWN"};
  for (size_t i = 0; i < 5; ++i) EXPECT_STREQ(ToString(kAll[i]), names[i]);
}

// Rule 1: any backend READY -> READY, whatever the others.
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

// Rule 2: else any pending -> CONNECTING (calls wait).
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

// Rule 3: else TRANSIENT_FAILURE with the last failure in list order.
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

// Rule 4: no backends -> TRANSIENT_FAILURE with the resolver's note, or its
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
