// Bad input: odd header values (fake subchannels and a real channel), bad
// service configs (each rejected with the field named), and an adversarial
// flood of one key through one real channel (no backend above its bound).
// First: it includes src/grpc/require_undebug.h, then port_platform.h.
// clang-format off
#include "test/support/policy_fixture.h"
// clang-format on

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "poise/grpc_lb.h"
#include "poise/rendezvous.h"
#include "test/support/e2e_harness.h"

namespace poise::hardening {
namespace {

using grpc_core::Json;
// The shared e2e harness.
using test_support::Bound;
using test_support::CallOptions;
using test_support::CallOutcome;
using test_support::Client;
using test_support::kHeader;
using test_support::LbConfig;
using test_support::OwnerId;
using test_support::StatsFor;
using test_support::TotalInFlight;
using test_support::WaitFor;
using test_support::WarmUp;

// `body` as the config object of `policy`.
absl::Status ParseConfig(const std::string& policy, const std::string& body) {
  return test_support::ParseConfig(
      absl::StrCat(R"([{")", policy, R"(":)", body, "}]"));
}

// The exact "[field:X error:...]" entry for the field, or "" if absent.
std::string FieldError(const absl::Status& status, const std::string& field) {
  const std::string message(status.message());
  const std::string prefix = absl::StrCat("field:", field, " error:");
  size_t at = message.find(prefix);
  // Only a whole field name: preceded by '[' or ' '.
  while (at != std::string::npos && at > 0 && message[at - 1] != '[' &&
         message[at - 1] != ' ') {
    at = message.find(prefix, at + 1);
  }
  if (at == std::string::npos) return "";
  size_t end = message.find("; field:", at);
  if (end == std::string::npos) end = message.rfind(']');
  return message.substr(at, end - at);
}

// ---------------------------------------------------------------------------
// Config

TEST(BadConfig, BalanceFactorBounds) {
  const std::string p = "bounded_load_rendezvous";
  absl::Status s =
      ParseConfig(p, R"({"hashHeader":"k","balanceFactorPercent":99})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FieldError(s, "balanceFactorPercent"),
            "field:balanceFactorPercent error:must be at least 100 (a smaller "
            "factor can leave no backend with room)")
      << s;
  EXPECT_TRUE(
      ParseConfig(p, R"({"hashHeader":"k","balanceFactorPercent":100})").ok());
  EXPECT_TRUE(
      ParseConfig(p, R"({"hashHeader":"k","balanceFactorPercent":4294967295})")
          .ok());
  s = ParseConfig(p, R"({"hashHeader":"k","balanceFactorPercent":4294967296})");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(FieldError(s, "balanceFactorPercent"), "") << s;
  s = ParseConfig(p, R"({"hashHeader":"k","balanceFactorPercent":-1})");
  EXPECT_NE(FieldError(s, "balanceFactorPercent"), "") << s;
  s = ParseConfig(p, R"({"hashHeader":"k","balanceFactorPercent":1.5e300})");
  EXPECT_NE(FieldError(s, "balanceFactorPercent"), "") << s;
}

TEST(BadConfig, ZeroWeights) {
  for (const char* p : {"weighted_rendezvous", "bounded_load_rendezvous"}) {
    absl::Status s = ParseConfig(
        p,
        R"({"hashHeader":"k","endpoints":[{"address":"10.0.0.1:80","weight":0}]})");
    EXPECT_EQ(FieldError(s, "endpoints[0].weight"),
              "field:endpoints[0].weight error:must be at least 1")
        << s;
    s = ParseConfig(p, R"({"hashHeader":"k","defaultWeight":0})");
    EXPECT_EQ(FieldError(s, "defaultWeight"),
              "field:defaultWeight error:must be at least 1")
        << s;
  }
}

TEST(BadConfig, WeightsSummingPast32BitsAcrossManyEndpoints) {
  // 300 endpoints of weight 15,000,000 sum to 4,500,000,000 > 2^32 - 1; no
  // single weight is out of range. Accepted: the core sums eligible weights
  // in 64 bits, which fewer than 2^32 weights of 32 bits cannot overflow.
  std::string endpoints;
  for (int i = 0; i < 300; ++i) {
    absl::StrAppend(&endpoints, i ? "," : "", R"({"address":"10.0.)", i / 250,
                    ".", i % 250 + 1, R"(:80","weight":15000000})");
  }
  const absl::Status s = ParseConfig(
      "bounded_load_rendezvous",
      absl::StrCat(R"({"hashHeader":"k","endpoints":[)", endpoints, "]}"));
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(
      ParseConfig(
          "bounded_load_rendezvous",
          R"({"hashHeader":"k","endpoints":[{"address":"10.0.0.1:80","weight":4294967295},{"address":"10.0.0.2:80","weight":4294967295}]})")
          .ok());
}

TEST(BadConfig, DuplicateEndpoints) {
  // The same address spelt two ways is still a duplicate (normalised).
  const absl::Status s = ParseConfig(
      "weighted_rendezvous",
      R"({"hashHeader":"k","endpoints":[{"address":"[::1]:80"},{"address":"[0:0::1]:80"}]})");
  EXPECT_EQ(FieldError(s, "endpoints[1].address"),
            "field:endpoints[1].address error:duplicate of endpoints[0]")
      << s;
}

TEST(BadConfig, UnknownFieldsAreNamed) {
  absl::Status s = ParseConfig("bounded_load_rendezvous",
                               R"({"hashHeader":"k","hashheader":"k"})");
  EXPECT_NE(FieldError(s, "hashheader").find("error:unknown field"),
            std::string::npos)
      << s;
  s = ParseConfig(
      "weighted_rendezvous",
      R"({"hashHeader":"k","endpoints":[{"address":"10.0.0.1:80","wieght":2}]})");
  EXPECT_NE(FieldError(s, "endpoints[0].wieght").find("error:unknown field"),
            std::string::npos)
      << s;
}

TEST(BadConfig, HeaderNames) {
  const std::vector<std::string> bad = {
      "X-Session-Id", "x session", "x:session", "",
      "x-\xc3\xa9",   "x/y",       "grpc-foo"};
  for (const std::string& name : bad) {
    const absl::Status s =
        ParseConfig("bounded_load_rendezvous",
                    absl::StrCat(R"({"hashHeader":)", Json(name).Dump(), "}"));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(FieldError(s, "hashHeader"), "") << name << ": " << s;
  }
  const absl::Status missing =
      ParseConfig("weighted_rendezvous", R"({"defaultWeight":2})");
  EXPECT_EQ(FieldError(missing, "hashHeader"),
            "field:hashHeader error:field not present")
      << missing;
  const absl::Status wrong_type =
      ParseConfig("weighted_rendezvous", R"({"hashHeader":7})");
  EXPECT_NE(FieldError(wrong_type, "hashHeader"), "") << wrong_type;
}

TEST(BadConfig, ValidateServiceConfigNamesTheFieldToo) {
  const absl::Status s = grpc_lb::ValidateServiceConfig(
      R"({"loadBalancingConfig":[{"bounded_load_rendezvous":{"hashHeader":"k","balanceFactorPercent":4294967296}}]})");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(std::string(s.message()).find("field:balanceFactorPercent"),
            std::string::npos)
      << s;
  EXPECT_FALSE(grpc_lb::ValidateServiceConfig(std::string(1, '\0')).ok());
  EXPECT_FALSE(grpc_lb::ValidateServiceConfig("").ok());
}

// ---------------------------------------------------------------------------
// Header values with fake subchannels

class HeaderValueTest : public test_support::PolicyFixture {
 protected:
  HeaderValueTest() : PolicyFixture(541) {}

  // Starts `name` over every backend, all READY; keeps the update's status.
  void Start(const std::string& name, const std::string& body) {
    ASSERT_NO_FATAL_FAILURE(MakePolicy(name));
    update_status_ = Update(Config(name, body), uris_);
    for (int i = 0; i < kBackends; ++i) SetState(i, GRPC_CHANNEL_READY);
    Drain();
  }

  uint64_t TotalInFlightHere() { return TotalInFlight(label_); }

  absl::Status update_status_;
};

// Run once per policy.
class HeaderValuePolicyTest
    : public HeaderValueTest,
      public ::testing::WithParamInterface<const char*> {};

INSTANTIATE_TEST_SUITE_P(
    Policies, HeaderValuePolicyTest,
    ::testing::Values("weighted_rendezvous", "bounded_load_rendezvous"),
    [](const ::testing::TestParamInfo<const char*>& policy) {
      return std::string(policy.param);
    });

TEST_P(HeaderValuePolicyTest, OddValuesRouteDeterministicallyToTheCoresOwner) {
  std::string non_utf8;
  for (int b = 0; b < 256; ++b) non_utf8.push_back(static_cast<char>(b));
  const std::vector<std::string> keys = {
      "",                                   // empty: a key like any other
      std::string(size_t{64} * 1024, 'k'),  // 64 KiB
      std::string(size_t{64} * 1024, '\xff'),
      non_utf8,
      "\xc3\x28\xa0\xa1",  // invalid UTF-8 sequences
      std::string("a\0b", 3),
      "a,b",  // what a repeated header looks like after joining
  };
  Start(GetParam(), "");
  ASSERT_EQ(state_, GRPC_CHANNEL_READY);
  for (const std::string& key : keys) {
    for (int repeat = 0; repeat < 3; ++repeat) {
      Picked p = Pick(key);
      ASSERT_EQ(p.backend, Owner(key)) << "key size " << key.size();
      if (p.tracker != nullptr) {
        p.tracker->Start();
        p.tracker->Finish({absl::OkStatus(), nullptr, nullptr});
      }
    }
  }
  const grpc_lb::ChannelStats stats = StatsFor(label_);
  EXPECT_EQ(stats.picks, keys.size() * 3);
  EXPECT_EQ(stats.missing_key, 0u);  // empty is present, not missing
  EXPECT_EQ(TotalInFlightHere(), 0u);
}

// A defaultWeight that is valid alone but whose sum over the resolver's
// addresses passes 2^32 - 1 (541 backends of weight 2^31). Eligible weights
// are summed in 64 bits, as poise-core does, so this is no error at all: the
// channel is READY and every key goes to its owner (equal weights: the same
// owner as with weight 1), bounded capacities included.
TEST_P(HeaderValuePolicyTest, DefaultWeightsSummingPast32BitsRouteToTheOwner) {
  Start(GetParam(), R"("defaultWeight":2147483648)");
  ASSERT_TRUE(update_status_.ok()) << update_status_;
  ASSERT_EQ(state_, GRPC_CHANNEL_READY);
  for (int k = 0; k < 50; ++k) {
    const std::string key = absl::StrCat("key-", k);
    Picked p = Pick(key);
    ASSERT_EQ(p.backend, Owner(key)) << key;
    if (p.tracker != nullptr) {
      p.tracker->Start();
      p.tracker->Finish({absl::OkStatus(), nullptr, nullptr});
    }
  }
  EXPECT_EQ(StatsFor(label_).failed_picks, 0u);
  EXPECT_EQ(TotalInFlightHere(), 0u);
}

// ---------------------------------------------------------------------------
// Real channel

class RealChannelTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(set_.Start(3, kHeader).ok()); }
  example::BackendSet set_;
};

TEST_F(RealChannelTest, RepeatedHeaderRoutesAsTheJoinedValue) {
  Client c(set_.target(), LbConfig("bounded_load_rendezvous"), "repeated");
  for (int k = 0; k < 30; ++k) {
    const std::string first = absl::StrCat("a", k);
    const std::string second = absl::StrCat("b", k);
    CallOptions options;
    options.extra_metadata = {{kHeader, second}};
    const std::string joined = absl::StrCat(first, ",", second);
    for (int repeat = 0; repeat < 2; ++repeat) {
      const CallOutcome out = c.Call(first, options);
      ASSERT_TRUE(out.status.ok()) << out.status.error_message();
      EXPECT_EQ(out.backend_id, OwnerId(set_, joined)) << joined;
    }
  }
  EXPECT_TRUE(WaitFor([&] { return TotalInFlight("repeated") == 0; }));
}

TEST_F(RealChannelTest, EmptyAndLargeValuesEndWithAStatusAndNoLeak) {
  Client c(set_.target(), LbConfig("bounded_load_rendezvous"), "large");
  const CallOutcome empty = c.Call("");
  ASSERT_TRUE(empty.status.ok()) << empty.status.error_message();
  EXPECT_EQ(empty.backend_id, OwnerId(set_, ""));
  EXPECT_EQ(c.Call("").backend_id, empty.backend_id);
  // 64 KiB exceeds gRPC's default 16 KiB metadata limit: the call must end
  // promptly with a status (the server's transport refuses it with
  // RESOURCE_EXHAUSTED and closes that connection, so the next call may
  // race the close and see UNAVAILABLE), never hang, and its in-flight slot
  // must come back.
  const std::string big(size_t{64} * 1024, 'k');
  CallOptions options;
  options.deadline = std::chrono::seconds(10);
  const CallOutcome first = c.Call(big, options);
  const CallOutcome second = c.Call(big, options);
  int refused = 0;
  for (const CallOutcome* outcome : {&first, &second}) {
    EXPECT_TRUE(outcome->ended_in_time);
    const grpc::StatusCode code = outcome->status.error_code();
    EXPECT_TRUE(code == grpc::StatusCode::RESOURCE_EXHAUSTED ||
                code == grpc::StatusCode::UNAVAILABLE)
        << code << " " << outcome->status.error_message();
    if (code == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++refused;
      // The transport's refusal, not the policy's limit.
      EXPECT_NE(
          outcome->status.error_message().find("metadata size exceeds limit"),
          std::string::npos)
          << outcome->status.error_message();
    }
  }
  EXPECT_GE(refused, 1);
  EXPECT_TRUE(WaitFor([&] { return TotalInFlight("large") == 0; }));
  // The server closes that connection ("Socket closed" may reach a call
  // racing with the close). A backend that leaves READY passes its keys to
  // their next READY choice until it reconnects, so "after" may be served
  // elsewhere for a moment; once the channel has reconnected it is home.
  EXPECT_TRUE(WaitFor([&] {
    const CallOutcome after = c.Call("after");
    return after.status.ok() && after.backend_id == OwnerId(set_, "after");
  }));
}

TEST_F(RealChannelTest, FloodOfOneKeyFromEightThreadsStaysWithinTheBound) {
  constexpr uint64_t kFactor = 125;
  constexpr int kThreads = 8;  // one synchronous call each: C = 8
  Client c(set_.target(),
           LbConfig("bounded_load_rendezvous",
                    absl::StrCat(R"("balanceFactorPercent":)", kFactor)),
           "flood");
  ASSERT_TRUE(WarmUp(c, set_));  // the bound below divides by all 3 weights
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      CallOptions options;
      options.delay_ms = 2;
      for (int i = 0; i < 60; ++i) {
        if (!c.Call("adversary", options).status.ok()) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  const uint64_t bound = Bound(kFactor, kThreads, 1, 3);  // ceil(1000/300) = 4
  ASSERT_TRUE(WaitFor([&] { return TotalInFlight("flood") == 0; }));
  const grpc_lb::ChannelStats stats = StatsFor("flood");
  ASSERT_EQ(stats.backends.size(), 3u);
  uint64_t served = 0;
  for (const grpc_lb::BackendStats& b : stats.backends) {
    EXPECT_LE(b.peak_in_flight, bound) << b.identity;
    EXPECT_EQ(b.in_flight, 0u) << b.identity;
    served += b.picks > 0;
  }
  EXPECT_GT(served, 1u);
  EXPECT_GT(stats.spills, 0u);
  // The backends saw it too (their own peak counts the server side).
  for (size_t i = 0; i < set_.size(); ++i) {
    EXPECT_LE(static_cast<uint64_t>(set_.backend(i).peak_in_flight()), bound);
  }
}

}  // namespace
}  // namespace poise::hardening
