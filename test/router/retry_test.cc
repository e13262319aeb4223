// The picker's P6: a retry goes to the key's next choice (the core's
// k-th choice), SAME_OWNER keeps the first attempt's routing, the bounded
// policy's retry takes the next choice with room, the hard limit still
// holds, and the header's value is parsed strictly.
#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "poise/rendezvous.h"
#include "src/router/picker.h"
#include "test/router/picker_fixture.h"
#include "test/router/router_test_util.h"

namespace poise::router {
namespace {

using test::CandidatesOf;
using test::States;
using test::ValidConfig;

class RetryTest : public test::PickerFixture {
 protected:
  PickOutcome Pick(std::string_view key, uint32_t previous_attempts) const {
    PickRequest request;
    request.key = key;
    request.previous_attempts = previous_attempts;
    return picker_->Pick(request);
  }
  int PickBackend(std::string_view key, uint32_t previous_attempts) const {
    const PickOutcome outcome = Pick(key, previous_attempts);
    const auto* c = std::get_if<PickOutcome::Complete>(&outcome.result);
    return c != nullptr ? static_cast<int>(c->backend) : -1;
  }
  // The core's full order of the key over the READY backends.
  std::vector<size_t> ReadyOrder(std::string_view key) const {
    const auto ranking = WeightedRendezvous::Ranking(
        key, CandidatesOf(set_.backends(), states_));
    std::vector<size_t> out;
    for (const Rank& r : ranking.value()) out.push_back(r.index);
    return out;
  }
};

TEST(RetryRouting, Spellings) {
  EXPECT_EQ(ParseRetryRouting("NEXT_CHOICE"), RetryRouting::kNextChoice);
  EXPECT_EQ(ParseRetryRouting("SAME_OWNER"), RetryRouting::kSameOwner);
  EXPECT_EQ(ParseRetryRouting("next_choice"), std::nullopt);
  EXPECT_EQ(ParseRetryRouting(""), std::nullopt);
  EXPECT_STREQ(kRetryRoutingRule, R"(must be "NEXT_CHOICE" or "SAME_OWNER")");
  EXPECT_EQ(Config().retry_routing, RetryRouting::kNextChoice);  // default
}

TEST(RetryRouting, PreviousAttemptsIsParsedStrictly) {
  EXPECT_EQ(ParsePreviousAttempts("0"), 0u);
  EXPECT_EQ(ParsePreviousAttempts("1"), 1u);
  EXPECT_EQ(ParsePreviousAttempts("2"), 2u);
  EXPECT_EQ(ParsePreviousAttempts("007"), 7u);
  EXPECT_EQ(ParsePreviousAttempts("4294967295"), 4294967295u);
  for (const char* bad : {"", "-1", "+1", " 1", "1 ", "1x", "0x1", "1.0",
                          "4294967296", "99999999999", "abc"}) {
    EXPECT_EQ(ParsePreviousAttempts(bad), 0u) << '"' << bad << '"';
  }
}

TEST_F(RetryTest, AttemptKPlusOneGoesToTheKeysKPlusOnethChoiceWrapping) {
  for (const std::vector<uint32_t>& weights :
       {std::vector<uint32_t>{1, 1, 1, 1}, std::vector<uint32_t>{1, 2, 3, 5}}) {
    // Backend 1 failed: it takes no part in any attempt.
    std::vector<BackendState> states =
        States(weights.size(), RoutingState::kReady);
    states[1].routing = RoutingState::kFailed;
    Build(ValidConfig(), weights, std::move(states));
    for (int k = 0; k < 200; ++k) {
      const std::string key = "user-" + std::to_string(k);
      const std::vector<size_t> order = ReadyOrder(key);
      ASSERT_EQ(order.size(), weights.size() - 1);
      for (uint32_t attempts = 0; attempts < 8; ++attempts) {
        ASSERT_EQ(PickBackend(key, attempts),
                  static_cast<int>(order[attempts % order.size()]))
            << key << " after " << attempts;
      }
    }
  }
  EXPECT_EQ(stats_->retries.load(), 2u * 200u * 7u);  // two lists
  EXPECT_EQ(stats_->picks.load(), 2u * 200u * 8u);
  EXPECT_EQ(stats_->spills.load(), 0u);
  uint64_t retried_in = 0;
  for (const ListedBackend& b : set_.backends()) {
    retried_in += b.cell->counts.Get().retried_in.load();
  }
  EXPECT_EQ(retried_in, 2u * 200u * 7u);  // the cells outlive a list
}

TEST_F(RetryTest, SameOwnerRoutesARetryLikeTheFirstAttempt) {
  for (const bool bounded : {false, true}) {
    Config config = ValidConfig(bounded);
    config.retry_routing = RetryRouting::kSameOwner;
    Build(config, {1, 1, 1, 1}, States(4, RoutingState::kReady));
    for (int k = 0; k < 100; ++k) {
      const std::string key = "user-" + std::to_string(k);
      const int first = PickBackend(key, 0);
      EXPECT_EQ(PickBackend(key, 1), first);
      EXPECT_EQ(PickBackend(key, 3), first);
    }
    EXPECT_EQ(stats_->retries.load(), 200u * (bounded ? 2 : 1));
  }
}

TEST_F(RetryTest, ARetryDoesNotQueueForAPendingOwner) {
  std::vector<BackendState> states = States(4, RoutingState::kReady);
  states[2].routing = RoutingState::kPending;
  Build(ValidConfig(), {1, 1, 1, 1}, std::move(states));
  for (int k = 0; k < 200; ++k) {
    const std::string key = "user-" + std::to_string(k);
    const std::vector<size_t> order = ReadyOrder(key);
    EXPECT_EQ(PickBackend(key, 1), static_cast<int>(order[1]));
  }
}

// The bounded retry: the (k + 1)-th choice among the backends with room, so
// never a backend at its bound while another has room.
TEST_F(RetryTest, ABoundedRetryTakesTheNextChoiceWithRoom) {
  Build(ValidConfig(/*bounded=*/true), {1, 1, 1, 1},
        States(4, RoutingState::kReady));
  // Load: 0 and 1 hold 3 calls each, 2 and 3 none: L = 6, capacity
  // ceil(1.5 * 7 / 4) = 3, so 0 and 1 are at their bound.
  std::vector<PickOutcome> held;
  for (size_t b : {0u, 1u}) {
    for (int n = 0; n < 3; ++n) {
      InFlightGuard g = InFlightGuard::TryAcquireWithin(
          SharedCounter(set_.backends()[b].cell), 0);
      held.push_back(
          PickOutcome{PickOutcome::Complete{b, false, std::move(g)}});
    }
  }
  for (int k = 0; k < 200; ++k) {
    const std::string key = "user-" + std::to_string(k);
    std::vector<size_t> with_room;
    for (size_t i : ReadyOrder(key)) {
      if (i >= 2) with_room.push_back(i);
    }
    for (uint32_t attempts = 1; attempts < 5; ++attempts) {
      const int got = PickBackend(key, attempts);  // slot released at once
      ASSERT_EQ(got, static_cast<int>(with_room[attempts % 2]))
          << key << " after " << attempts;
    }
  }
  held.clear();
  for (size_t b = 0; b < 4; ++b) EXPECT_EQ(InFlight(b), 0u);
}

TEST_F(RetryTest, ARetryRespectsTheHardLimit) {
  for (const bool bounded : {false, true}) {
    Config config = ValidConfig(bounded);
    config.max_in_flight_per_backend = 1;
    Build(config, {1, 1, 1}, States(3, RoutingState::kReady));
    const std::string key = "k";
    const std::vector<size_t> order = ReadyOrder(key);
    // The key's second choice is full: the retry takes the next one left.
    std::vector<PickOutcome> held;
    {
      InFlightGuard g = InFlightGuard::TryAcquireWithin(
          SharedCounter(set_.backends()[order[1]].cell), 1);
      ASSERT_TRUE(g.held());
      held.push_back(
          PickOutcome{PickOutcome::Complete{order[1], false, std::move(g)}});
    }
    PickOutcome retry = Pick(key, 1);
    const auto* c = std::get_if<PickOutcome::Complete>(&retry.result);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->backend, order[2]);  // the 2nd choice among the others
    EXPECT_TRUE(c->slot.held());
    // Everything full: RESOURCE_EXHAUSTED, never a wait.
    PickOutcome second = Pick(key, 2);  // only order[0] has a slot left
    ASSERT_NE(std::get_if<PickOutcome::Complete>(&second.result), nullptr);
    EXPECT_EQ(std::get_if<PickOutcome::Complete>(&second.result)->backend,
              order[0]);
    PickOutcome third = Pick(key, 1);
    const auto* fail = std::get_if<PickOutcome::Fail>(&third.result);
    ASSERT_NE(fail, nullptr);
    EXPECT_EQ(fail->status.code(), absl::StatusCode::kResourceExhausted);
    retry = PickOutcome{};
    second = PickOutcome{};
    held.clear();
    for (size_t b = 0; b < 3; ++b) EXPECT_EQ(InFlight(b), 0u);
  }
}

}  // namespace
}  // namespace poise::router
