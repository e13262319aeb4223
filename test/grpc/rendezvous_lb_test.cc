// The policies against gRPC 1.51's fake subchannels (lb_policy_test_lib.h):
// no network, exact connectivity states, exact loads.
// First: it includes src/grpc/require_undebug.h, then port_platform.h.
// clang-format off
#include "test/support/policy_fixture.h"
// clang-format on

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "poise/grpc_lb.h"
#include "poise/rendezvous.h"
#include "src/core/lib/address_utils/parse_address.h"
#include "src/core/lib/address_utils/sockaddr_utils.h"
#include "src/grpc/identity_attribute.h"
#include "src/grpc/registration.h"
#include "src/grpc/rendezvous_config.h"
#include "src/grpc/server_load.h"
#include "src/router/config.h"
#include "src/router/explain.h"

namespace poise::grpc_lb {
namespace {

using test_support::ParseConfig;

// ---------------------------------------------------------------------------
// Config

TEST(RendezvousConfig, ExactMessages) {
  EXPECT_EQ(ParseConfig(R"([{"bounded_load_rendezvous":{}}])").message(),
            "errors validating bounded_load_rendezvous LB policy config: "
            "[field:hashHeader error:field not present]");
  EXPECT_EQ(
      ParseConfig(
          R"([{"bounded_load_rendezvous":{"hashHeader":"k","balanceFactorPercent":99}}])")
          .message(),
      "errors validating bounded_load_rendezvous LB policy config: "
      "[field:balanceFactorPercent error:must be at least 100 (a smaller "
      "factor can leave no backend with room)]");
  EXPECT_EQ(
      ParseConfig(
          R"([{"weighted_rendezvous":{"hashHeader":"k","balanceFactorPercent":150}}])")
          .message(),
      "errors validating weighted_rendezvous LB policy config: "
      "[field:balanceFactorPercent error:unknown field (known: hashHeader, "
      "endpoints, defaultWeight, missingKey, maxInFlightPerBackend, "
      "retryRouting, slowStart, loadScope, keyCache, localZone, "
      "zoneByIdentitySuffix; "
      "balanceFactorPercent and serverLoad belong to "
      "bounded_load_rendezvous)]");
}

TEST(RendezvousConfig, EachRuleNamesItsField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"hashHeader":"X-Session"})",
       "field:hashHeader error:must be a lower-case"},
      {R"({"hashHeader":"grpc-timeout"})",
       "field:hashHeader error:keys starting with"},
      {R"({"hashHeader":""})", "field:hashHeader error:must be a lower-case"},
      {R"({"hashHeader":"k","balanceFactorPercent":4294967296})",
       "field:balanceFactorPercent error:failed to parse"},
      {R"({"hashHeader":"k","hashheader":"k"})",
       "field:hashheader error:unknown field"},
      {R"({"hashHeader":"k","defaultWeight":0})",
       "field:defaultWeight error:must be at least 1"},
      {R"({"hashHeader":"k","missingKey":"DROP"})",
       R"(field:missingKey error:must be "RANDOM" or "FAIL")"},
      {R"({"hashHeader":"k","retryRouting":"NEXT"})",
       R"(field:retryRouting error:must be "NEXT_CHOICE" or "SAME_OWNER")"},
      {R"({"hashHeader":"k","loadScope":"GLOBAL"})",
       R"(field:loadScope error:must be "CHANNEL" or "PROCESS")"},
      {R"({"hashHeader":"k","loadScope":1})",
       "field:loadScope error:is not a string"},
      {R"({"hashHeader":"k","maxInFlightPerBackend":0})",
       "field:maxInFlightPerBackend error:must be at least 1"},
      {R"({"hashHeader":"k","endpoints":[{"address":"10.0.0.1:80","weight":0}]})",
       "field:endpoints[0].weight error:must be at least 1"},
      {R"({"hashHeader":"k","endpoints":[{"address":"db.local:80"}]})",
       "field:endpoints[0].address error:must be an IP literal"},
      {R"({"hashHeader":"k","endpoints":[{"weight":2}]})",
       "field:endpoints[0].address error:missing: an entry needs an address"},
      {R"({"hashHeader":"k","endpoints":[{"address":"10.0.0.1:80","port":1}]})",
       "field:endpoints[0].port error:unknown field"},
      {R"({"hashHeader":"k","endpoints":[{"address":"10.0.0.1:80"},{"address":"10.0.0.1:80"}]})",
       "field:endpoints[1].address error:duplicate of endpoints[0]"},
      {R"({"hashHeader":"k","endpoints":[{"address":"10.0.0.1:80","identity":"a"},{"address":"10.0.0.2:80","identity":"a"}]})",
       "field:endpoints[1].identity error:identity \"a\" is also used by "
       "endpoints[0]"},
      {R"({"hashHeader":"k","endpoints":[{"address":"10.0.0.1:80"},{"address":"10.0.0.2:80","zone":""}]})",
       "field:endpoints[1].zone error:must be 1 to 64 printable ASCII"},
      {R"({"hashHeader":"k","zoneByIdentitySuffix":[{"suffix":"","zone":"a"}]})",
       "field:zoneByIdentitySuffix[0].suffix error:must not be empty"},
      {R"({"hashHeader":"k","zoneByIdentitySuffix":[{"suffix":".a:1"}]})",
       "field:zoneByIdentitySuffix[0].zone error:field not present"},
      {R"({"hashHeader":"k","localZone":"zone\u0007"})",
       "field:localZone error:must be 1 to 64 printable ASCII"},
  };
  for (const auto& [body, expected] : cases) {
    const absl::Status status = ParseConfig(
        absl::StrCat(R"([{"bounded_load_rendezvous":)", body, "}]"));
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << body;
    EXPECT_NE(status.message().find(expected), std::string::npos)
        << body << "\n  got: " << status.message();
  }
}

TEST(RendezvousConfig, AcceptsEveryField) {
  EXPECT_TRUE(ParseConfig(R"([{"bounded_load_rendezvous":{
      "hashHeader":"x-session-id","balanceFactorPercent":"125",
      "endpoints":[{"address":"10.0.0.1:80","weight":3,"identity":"a"},
                   {"address":"[2001:db8::1]:80"},
                   {"identity":"cache-0.cache.default.svc.cluster.local:50070",
                    "weight":3}],
      "defaultWeight":2,"missingKey":"FAIL","maxInFlightPerBackend":"100"}}])")
                  .ok());
  EXPECT_TRUE(
      ParseConfig(R"([{"weighted_rendezvous":{"hashHeader":"k-bin"}}])").ok());
  // No rule bounds the weights' sum any more: the core sums eligible weights
  // in 64 bits.
  EXPECT_TRUE(ParseConfig(R"([{"bounded_load_rendezvous":{"hashHeader":"k",
      "endpoints":[{"address":"10.0.0.1:80","weight":4294967295},
                   {"address":"10.0.0.2:80"}]}}])")
                  .ok());
}

// null is an optional field left out (as in the proto3 JSON mapping), at
// every level; a required field must be given a value.
TEST(RendezvousConfig, NullLeavesAnOptionalFieldOutAndBreaksARequiredOne) {
  auto parse = [](const std::string& text, bool bounded) {
    auto json = grpc_core::Json::Parse(text);
    EXPECT_TRUE(json.ok()) << text;
    return ParseRendezvousConfig(*json, bounded);
  };
  const auto all_null = parse(R"({"hashHeader":"k","balanceFactorPercent":null,
      "endpoints":null,"defaultWeight":null,"missingKey":null,
      "maxInFlightPerBackend":null,"retryRouting":null,"slowStart":null,
      "loadScope":null,"serverLoad":null,"keyCache":null})",
                              /*bounded=*/true);
  ASSERT_TRUE(all_null.ok()) << all_null.status();
  const router::Config defaults;
  EXPECT_EQ(all_null->balance_factor_percent, defaults.balance_factor_percent);
  EXPECT_TRUE(all_null->endpoints.empty());
  EXPECT_EQ(all_null->default_weight, defaults.default_weight);
  EXPECT_EQ(all_null->max_in_flight_per_backend, std::nullopt);
  EXPECT_EQ(all_null->slow_start, std::nullopt);
  EXPECT_EQ(all_null->server_load, std::nullopt);
  EXPECT_FALSE(all_null->key_cache.enabled);

  const auto nested = parse(
      R"({"hashHeader":"k","slowStart":{"window":"5s","minWeightPercent":null},
          "serverLoad":{"metric":null},
          "endpoints":[{"address":"10.0.0.1:80","weight":null}]})",
      true);
  ASSERT_TRUE(nested.ok()) << nested.status();
  EXPECT_EQ(nested->slow_start->window, absl::Seconds(5));
  EXPECT_EQ(nested->slow_start->min_weight_percent,
            router::SlowStartConfig::kDefaultMinWeightPercent);
  EXPECT_EQ(nested->server_load->metric, router::ServerLoadConfig().metric);
  ASSERT_EQ(nested->endpoints.size(), 1u);
  EXPECT_EQ(nested->endpoints[0].weight, std::nullopt);

  EXPECT_EQ(parse(R"({"hashHeader":null})", false).status().message(),
            "errors validating weighted_rendezvous LB policy config: "
            "[field:hashHeader error:is not a string]");
  EXPECT_EQ(parse(R"({"hashHeader":"k","slowStart":{"window":null}})", false)
                .status()
                .message(),
            "errors validating weighted_rendezvous LB policy config: "
            "[field:slowStart.window error:is not a string]");
}

// A field that fails to load gets its load error only: no rule is checked
// against the default left in its place.
TEST(RendezvousConfig, AFieldThatFailedToLoadGetsOnlyItsLoadError) {
  EXPECT_EQ(
      ParseConfig(R"([{"weighted_rendezvous":{"endpoints":[7,7]}}])").message(),
      "errors validating weighted_rendezvous LB policy config: "
      "[field:endpoints[0] error:is not an object; field:endpoints[1] "
      "error:is not an object; field:hashHeader error:field not "
      "present]");
  EXPECT_EQ(
      ParseConfig(
          R"([{"weighted_rendezvous":{"hashHeader":"k","endpoints":[{"address":7}]}}])")
          .message(),
      "errors validating weighted_rendezvous LB policy config: "
      "[field:endpoints[0].address error:is not a string]");
}

// The router normalises endpoints[].address itself (it has no gRPC); what it
// prints must be what gRPC prints for the resolver's address, or an endpoint
// would never match its backend.
TEST(RendezvousConfig, AddressNormalisationIsGrpcs) {
  const std::vector<std::string> literals = {"10.0.0.7:8443",
                                             "10.0.0.7:08443",
                                             "127.0.0.1:0",
                                             "255.255.255.255:65535",
                                             "0.0.0.0:1",
                                             "[::1]:80",
                                             "[0:0::1]:80",
                                             "[::]:80",
                                             "[2001:DB8:0:0:0:0:0:7]:8443",
                                             "[2001:db8::7]:8443",
                                             "[::ffff:10.0.0.1]:80",
                                             "[::ffff:a00:1]:80",
                                             "[1:2:3:4:5:6:7:8]:9",
                                             "[fe80::1%2]:80",
                                             "[fe80::1%0]:80",
                                             "[fe80::1%lo]:80",
                                             "10.0.0.1:65536",
                                             "10.0.0.1",
                                             "db.local:80",
                                             "[10.0.0.1]:80",
                                             "[::1]",
                                             "::1:80",
                                             "10.0.0.1:"};
  for (const std::string& literal : literals) {
    grpc_resolved_address resolved;
    std::optional<std::string> grpc_text;
    if (grpc_parse_ipv4_hostport(literal, &resolved, false) ||
        grpc_parse_ipv6_hostport(literal, &resolved, false)) {
      auto text = grpc_sockaddr_to_string(&resolved, false);
      ASSERT_TRUE(text.ok()) << literal;
      grpc_text = *text;
    }
    EXPECT_EQ(router::NormalizeAddress(literal), grpc_text) << literal;
  }
}

TEST(RendezvousConfig, ValidateServiceConfigReportsTheChannelsError) {
  EXPECT_TRUE(
      ValidateServiceConfig(
          R"({"loadBalancingConfig":[{"weighted_rendezvous":{"hashHeader":"k"}}]})")
          .ok());
  const absl::Status bad = ValidateServiceConfig(
      R"({"loadBalancingConfig":[{"bounded_load_rendezvous":{"hashHeader":"k","balanceFactorPercent":50}}]})");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find(
                "field:balanceFactorPercent error:must be at least 100"),
            std::string::npos)
      << bad;
  EXPECT_FALSE(ValidateServiceConfig("{not json").ok());
}

// serverLoad.admission: a refusal's count, from poise::server's status only.
TEST(ServerLoadAdmission, RefusalCountReadsOnlyTheServersRefusal) {
  const auto refusal = [](const std::string& message) {
    return RefusalCount(absl::ResourceExhaustedError(message));
  };
  EXPECT_EQ(refusal("poise-refused count=7 bound=6"), 7u);
  EXPECT_EQ(refusal("poise-refused count=0 bound=1"), 0u);
  EXPECT_EQ(refusal("poise-refused count=12"), 12u);
  EXPECT_EQ(RefusalCount(absl::UnavailableError("poise-refused count=7")),
            std::nullopt);
  EXPECT_EQ(RefusalCount(absl::OkStatus()), std::nullopt);
  for (const char* hostile :
       {"", "poise-refused count=", "poise-refused count=x",
        "poise-refused count=7x", "poise-refused count=-7",
        "poise-refused count= 7", "Poise-refused count=7", "resource exhausted",
        "poise-refused count=1099511627777",
        "poise-refused count=9999999999999999999999"}) {
    EXPECT_EQ(refusal(hostile), std::nullopt) << hostile;
  }
}

// serverLoad (rule C8): loaded as gRPC's JSON, checked by the router.
absl::StatusOr<router::Config> ParseServerLoad(const std::string& server_load,
                                               bool bounded = true) {
  auto json = grpc_core::Json::Parse(
      absl::StrCat(R"({"hashHeader":"k","serverLoad":)", server_load, "}"));
  if (!json.ok()) return json.status();
  return ParseRendezvousConfig(*json, bounded);
}

constexpr char kBoundedPrefix[] =
    "errors validating bounded_load_rendezvous LB policy config: ";

TEST(ServerLoadConfig, FullObjectAndDefaults) {
  auto full = ParseServerLoad(
      R"({"metric":"cpu.rif","outOfBandInterval":"0.25s","maxReportAge":"2.5s"})");
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->server_load,
            (router::ServerLoadConfig{"cpu.rif", absl::Milliseconds(250),
                                      absl::Milliseconds(2500)}));
  auto defaults = ParseServerLoad("{}");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->server_load, router::ServerLoadConfig());
  auto per_call = ParseServerLoad(R"({"outOfBandInterval":"0s"})");
  ASSERT_TRUE(per_call.ok()) << per_call.status();
  EXPECT_EQ(per_call->server_load->out_of_band_interval, absl::ZeroDuration());
  auto bounds = ParseServerLoad(
      R"({"outOfBandInterval":"0.010s","maxReportAge":"3600s"})");
  ASSERT_TRUE(bounds.ok()) << bounds.status();
  EXPECT_FALSE(defaults->server_load->admission);
  auto admission = ParseServerLoad(R"({"admission":true})");
  ASSERT_TRUE(admission.ok()) << admission.status();
  EXPECT_TRUE(admission->server_load->admission);
  EXPECT_FALSE(admission->server_load == router::ServerLoadConfig());
  auto absent = ParseServerLoad("null");
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_FALSE(absent->server_load.has_value());
}

constexpr char kIntervalRule[] =
    "must be a duration in seconds with an s suffix: 0s (per-call reports "
    "only) or between 0.01s and 3600s (1 h)";
constexpr char kAgeRule[] =
    "must be a duration in seconds with an s suffix (like \"1s\"), longer "
    "than 0s and at most 3600s (1 h)";

TEST(ServerLoadConfig, RejectedValuesNameTheField) {
  const std::string prefix = kBoundedPrefix;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"metric":""})",
       "[field:serverLoad.metric error:must be 1 to 64 printable ASCII "
       "characters without spaces (an OrcaLoadReport.utilization key, like "
       "\"rif\")]"},
      {R"({"metric":"r f"})",
       "[field:serverLoad.metric error:must be 1 to 64 printable ASCII "
       "characters without spaces (an OrcaLoadReport.utilization key, like "
       "\"rif\")]"},
      {R"({"outOfBandInterval":"0.009s"})",
       "[field:serverLoad.outOfBandInterval error:must be a duration in "
       "seconds "
       "with an s suffix: 0s (per-call reports only) or between 0.01s and "
       "3600s (1 h)]"},
      // Below gRPC's millisecond: not silently 0s (per-call only).
      {R"({"outOfBandInterval":"0.0005s"})",
       "[field:serverLoad.outOfBandInterval error:must be a duration in "
       "seconds "
       "with an s suffix: 0s (per-call reports only) or between 0.01s and "
       "3600s (1 h)]"},
      // Past 1 h: our rule's message, not a parse error.
      {R"({"outOfBandInterval":"3600.001s","maxReportAge":"3600s"})",
       "[field:serverLoad.outOfBandInterval error:must be a duration in "
       "seconds "
       "with an s suffix: 0s (per-call reports only) or between 0.01s and "
       "3600s (1 h)]"},
      {R"({"maxReportAge":"3600.001s"})",
       "[field:serverLoad.maxReportAge error:" + std::string(kAgeRule) + "]"},
      {R"({"outOfBandInterval":"0s","maxReportAge":"0s"})",
       "[field:serverLoad.maxReportAge error:" + std::string(kAgeRule) + "]"},
      {R"({"maxReportAge":"0.1s"})",
       "[field:serverLoad.maxReportAge error:must be longer than "
       "outOfBandInterval (else every report expires before the next)]"},
      {R"({"metric":"rif","maxAge":"1s"})",
       "[field:serverLoad.maxAge error:unknown field (known: metric, "
       "outOfBandInterval, maxReportAge, admission)]"},
      {R"({"admission":"true"})",
       "[field:serverLoad.admission error:is not a boolean]"},
      {R"({"admission":1})",
       "[field:serverLoad.admission error:is not a boolean]"},
      {R"({"metric":7})", "[field:serverLoad.metric error:is not a string]"},
      {R"({"maxReportAge":1})",
       "[field:serverLoad.maxReportAge error:is not a string]"},
      {R"({"maxReportAge":"1"})",
       "[field:serverLoad.maxReportAge error:" + std::string(kAgeRule) + "]"},
      {R"({"outOfBandInterval":"-1s"})",
       "[field:serverLoad.outOfBandInterval error:" +
           std::string(kIntervalRule) + "]"},
      {R"({"maxReportAge":"2h"})",
       "[field:serverLoad.maxReportAge error:" + std::string(kAgeRule) + "]"},
      {"true", "[field:serverLoad error:is not an object]"},
  };
  for (const auto& [server_load, expected] : cases) {
    const auto parsed = ParseServerLoad(server_load);
    EXPECT_EQ(parsed.status().message(), prefix + expected) << server_load;
  }
}

TEST(ServerLoadConfig, OnlyOnTheBoundedPolicy) {
  const auto parsed = ParseServerLoad("{}", /*bounded=*/false);
  EXPECT_EQ(parsed.status().message(),
            "errors validating weighted_rendezvous LB policy config: "
            "[field:serverLoad error:belongs to bounded_load_rendezvous (only "
            "it bounds loads)]");
}

TEST(ServerLoadConfig, ValidateServiceConfigNamesTheField) {
  EXPECT_TRUE(ValidateServiceConfig(
                  R"({"loadBalancingConfig":[{"bounded_load_rendezvous":{
                      "hashHeader":"k","serverLoad":{"metric":"rif",
                      "outOfBandInterval":"0.1s","maxReportAge":"1s"}}}]})")
                  .ok());
  const absl::Status bad = ValidateServiceConfig(
      R"({"loadBalancingConfig":[{"bounded_load_rendezvous":{
          "hashHeader":"k","serverLoad":{"outOfBandInterval":"2s"}}}]})");
  EXPECT_NE(bad.message().find("field:serverLoad.maxReportAge error:must be "
                               "longer than outOfBandInterval"),
            std::string::npos)
      << bad;
  const absl::Status weighted = ValidateServiceConfig(
      R"({"loadBalancingConfig":[{"weighted_rendezvous":{
          "hashHeader":"k","serverLoad":{}}}]})");
  EXPECT_NE(weighted.message().find("field:serverLoad error:belongs to "
                                    "bounded_load_rendezvous"),
            std::string::npos)
      << weighted;
}

// keyCache (rule C9): false, true or a number of entries, read from the
// JSON by the policy (gRPC's loader has no field of two types).
absl::StatusOr<router::Config> ParseKeyCache(const std::string& key_cache) {
  auto json = grpc_core::Json::Parse(
      absl::StrCat(R"({"hashHeader":"k","keyCache":)", key_cache, "}"));
  if (!json.ok()) return json.status();
  return ParseRendezvousConfig(*json, /*bounded=*/false);
}

TEST(KeyCacheConfig, FalseTrueOrASize) {
  auto on = ParseKeyCache("true");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->key_cache.enabled);
  EXPECT_EQ(on->key_cache.entries, std::nullopt);
  auto off = ParseKeyCache("false");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->key_cache.enabled);
  auto sized = ParseKeyCache("4096");
  ASSERT_TRUE(sized.ok()) << sized.status();
  EXPECT_TRUE(sized->key_cache.enabled);
  EXPECT_EQ(sized->key_cache.entries, 4096u);
  auto absent = ParseKeyCache("null");
  ASSERT_TRUE(absent.ok()) << absent.status();
  EXPECT_EQ(absent->key_cache, router::KeyCacheConfig());
  EXPECT_FALSE(absent->key_cache.enabled);  // off unless asked for
  const std::string rule =
      "errors validating weighted_rendezvous LB policy config: "
      "[field:keyCache error:must be false, true or a number of entries from "
      "64 to 1048576]";
  for (const char* bad : {"63", "1048577", "4294967296", "-1", "64.5", "1e4",
                          R"("4096")", "{}", "[]"}) {
    EXPECT_EQ(ParseKeyCache(bad).status().message(), rule) << bad;
  }
}

TEST(Registration, RefusesAnotherGrpcVersion) {
  EXPECT_TRUE(CheckGrpcVersion(grpc::Version(), grpc_version_string()).ok());
  const absl::Status other = CheckGrpcVersion("1.62.0", "38.0.0");
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.message().find("compiled against gRPC 1.51.1"),
            std::string::npos)
      << other;
  EXPECT_NE(other.message().find("running with gRPC 1.62.0 (core 38.0.0)"),
            std::string::npos)
      << other;
  EXPECT_FALSE(CheckGrpcVersion("1.51.1", "29.0.1").ok());
}

TEST(Registration, RegisterPoliciesIsIdempotent) {
  // main() registered before grpc_init(); gRPC is initialised now, so a
  // second registration would abort: every call must return the first
  // result, remembered, whichever thread calls.
  const absl::Status first = RegisterPolicies();
  EXPECT_TRUE(first.ok()) << first;
  EXPECT_EQ(RegisterPolicies(), first);
  constexpr int kThreads = 8;
  std::vector<absl::Status> results(kThreads, absl::UnknownError("unset"));
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&results, t] {
      for (int i = 0; i < 100; ++i) {
        results[static_cast<size_t>(t)] = RegisterPolicies();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const absl::Status& result : results) EXPECT_EQ(result, first);
  // And the policies are there, once each.
  EXPECT_TRUE(
      ParseConfig(R"([{"weighted_rendezvous":{"hashHeader":"k"}}])").ok());
}

// ---------------------------------------------------------------------------
// Policy with fake subchannels

class RendezvousLbTest : public test_support::PolicyFixture {
 protected:
  RendezvousLbTest() : PolicyFixture(441) {}

  // Starts `name` over every backend with `body` as its config and drives
  // the listed backends READY.
  void Start(const std::string& name, const std::string& body,
             const std::vector<int>& ready) {
    MakePolicy(name);
    ASSERT_TRUE(Update(Config(name, body), uris_).ok());
    for (int i : ready) SetState(i, GRPC_CHANNEL_READY);
    Drain();
    ASSERT_EQ(state_, GRPC_CHANNEL_READY);
  }

  int PickBackend(const std::string& key) {
    Picked p = Pick(key);
    EXPECT_NE(p.backend, -1) << "pick for " << key << " did not complete";
    return p.backend;
  }

  // The key's preference order over `eligible` backends, from the core.
  std::vector<int> Order(const std::string& key,
                         std::vector<int> eligible = {}) {
    if (eligible.empty()) {
      for (int i = 0; i < kBackends; ++i) eligible.push_back(i);
    }
    std::vector<Candidate> candidates;
    candidates.reserve(eligible.size());
    for (int i : eligible) {
      candidates.push_back({identities_[static_cast<size_t>(i)], 1, true});
    }
    std::vector<int> order;
    const Result<std::vector<Rank>> ranking =
        WeightedRendezvous::Ranking(key, candidates);
    for (const Rank& r : ranking.value()) {
      order.push_back(eligible[r.index]);
    }
    return order;
  }

  ChannelStats Stats() {
    for (ChannelStats& s : StatsSnapshot()) {
      if (s.label == label_) return s;
    }
    ADD_FAILURE() << "no stats for " << label_;
    return {};
  }

  // Backend i (at identities_[i]) is hashed as hashed[i], by the stats and
  // by where 200 keys go: each to its owner among `hashed` (one weight).
  void ExpectBackendsHashedAs(const std::vector<std::string>& hashed) {
    const ChannelStats stats = Stats();
    ASSERT_EQ(stats.backends.size(), hashed.size());
    std::vector<Candidate> candidates;
    for (size_t i = 0; i < hashed.size(); ++i) {
      EXPECT_EQ(stats.backends[i].identity, hashed[i]);
      EXPECT_EQ(stats.backends[i].address, identities_[i]);
      candidates.push_back({hashed[i], 1, true});
    }
    for (int k = 0; k < 200; ++k) {
      const std::string key = absl::StrCat("user-", k);
      ASSERT_EQ(
          PickBackend(key),
          static_cast<int>(WeightedRendezvous::Pick(key, candidates).value()))
          << key;
    }
  }

  // Updates the policy with backend `b`'s address for each {b, name} of
  // `named`, in order, with `name` as its kIdentityAddressArg (none when
  // empty).
  absl::Status UpdateNamed(
      const std::string& config_json,
      const std::vector<std::pair<int, std::string>>& named) {
    LoadBalancingPolicy::UpdateArgs update;
    update.addresses.emplace();
    for (const auto& [backend, name] : named) {
      ChannelArgs args;
      if (!name.empty()) args = args.Set(kIdentityAddressArg, name);
      update.addresses->emplace_back(
          MakeAddress(uris_[static_cast<size_t>(backend)]), args);
    }
    update.config = MakeConfig(*Json::Parse(config_json));
    return ApplyUpdate(std::move(update), policy_.get());
  }

  // ExplainKey's answer for `key` on this policy's channel, checked against
  // the stats read just before it: its ranking is over the READY backends
  // when the channel is READY, else over every listed backend; "not_ready"
  // names, in list order, those the stats do not show READY; its
  // "connectivity" is the channel's.
  std::string ExplainAgreeingWithStats(const std::string& key) {
    const ChannelStats stats = Stats();
    const absl::StatusOr<std::string> json = ExplainKey(label_, key);
    EXPECT_TRUE(json.ok()) << json.status();
    if (!json.ok()) return "";
    std::multiset<std::string> ranked;
    std::string not_ready;
    for (const BackendStats& b : stats.backends) {
      const bool ready = b.connectivity == "READY";
      if (ready || stats.connectivity != "READY") ranked.insert(b.identity);
      if (!ready) {
        absl::StrAppend(&not_ready, not_ready.empty() ? "" : ",", "\"",
                        b.identity, "\"");
      }
    }
    const absl::StatusOr<router::ExplainedInputs> inputs =
        router::ReadExplainJson(*json);
    EXPECT_TRUE(inputs.ok()) << inputs.status();
    if (!inputs.ok()) return *json;
    std::multiset<std::string> explained;
    for (const router::ExplainedBackend& b : inputs->backends) {
      explained.insert(b.identity);
    }
    EXPECT_EQ(explained, ranked) << *json;
    EXPECT_NE(json->find(absl::StrCat("\"not_ready\":[", not_ready, "]")),
              std::string::npos)
        << *json;
    EXPECT_NE(json->find(absl::StrCat("\"connectivity\":\"", stats.connectivity,
                                      "\"")),
              std::string::npos)
        << *json;
    return *json;
  }

  uint64_t InFlight(int backend) {
    for (const BackendStats& b : Stats().backends) {
      if (b.identity == identities_[static_cast<size_t>(backend)]) {
        return b.in_flight;
      }
    }
    return UINT64_MAX;
  }
};

// Run once per policy.
class RendezvousLbPolicyTest
    : public RendezvousLbTest,
      public ::testing::WithParamInterface<const char*> {};

INSTANTIATE_TEST_SUITE_P(
    Policies, RendezvousLbPolicyTest,
    ::testing::Values("weighted_rendezvous", "bounded_load_rendezvous"),
    [](const ::testing::TestParamInfo<const char*>& policy) {
      return std::string(policy.param);
    });

TEST_F(RendezvousLbTest, ConnectivityAggregation) {
  MakePolicy("bounded_load_rendezvous");
  ASSERT_TRUE(Update(Config("bounded_load_rendezvous", ""), uris_).ok());
  Drain();
  EXPECT_EQ(state_, GRPC_CHANNEL_CONNECTING);  // S2: all IDLE/CONNECTING
  // Eager: every backend was asked to connect.
  for (const auto& uri : uris_) {
    EXPECT_TRUE(
        subchannel_pool_.find(SubchannelKey(MakeAddress(uri), ChannelArgs()))
            ->second.ConnectionRequested());
  }
  SetState(0, GRPC_CHANNEL_TRANSIENT_FAILURE,
           absl::UnavailableError("refused 0"));
  Drain();
  EXPECT_EQ(state_, GRPC_CHANNEL_CONNECTING);  // others still connecting
  EXPECT_GE(reresolutions_, 1);
  SetState(1, GRPC_CHANNEL_READY);
  Drain();
  EXPECT_EQ(state_, GRPC_CHANNEL_READY);  // S1: any READY
  for (int i : {1, 2, 3}) {
    SetState(i, GRPC_CHANNEL_TRANSIENT_FAILURE,
             absl::UnavailableError(absl::StrCat("refused ", i)));
  }
  Drain();
  EXPECT_EQ(state_, GRPC_CHANNEL_TRANSIENT_FAILURE);  // S3
  EXPECT_NE(status_.message().find("refused 3"), std::string::npos) << status_;
  // A reconnect attempt does not take the channel out of TRANSIENT_FAILURE.
  SetState(2, GRPC_CHANNEL_CONNECTING);
  Drain();
  EXPECT_EQ(state_, GRPC_CHANNEL_TRANSIENT_FAILURE);
  SetState(2, GRPC_CHANNEL_READY);
  Drain();
  EXPECT_EQ(state_, GRPC_CHANNEL_READY);
}

TEST_F(RendezvousLbTest, EmptyAddressListFailsWithTheResolutionNote) {
  MakePolicy("weighted_rendezvous");
  EXPECT_FALSE(Update(Config("weighted_rendezvous", ""), {}).ok());
  Drain();
  EXPECT_EQ(state_, GRPC_CHANNEL_TRANSIENT_FAILURE);
  EXPECT_EQ(status_,
            absl::UnavailableError("empty address list: note from the test"));
}

TEST_P(RendezvousLbPolicyTest, KeyedPickReturnsTheOwner) {
  Start(GetParam(), "", {0, 1, 2, 3});
  for (int k = 0; k < 200; ++k) {
    const std::string key = absl::StrCat("user-", k);
    ASSERT_EQ(PickBackend(key), Order(key)[0]) << key;
  }
}

// No load tracking, but a tracker all the same: it counts how the call ended
// (call metrics).
TEST_F(RendezvousLbTest, WeightedRendezvousTracksNoLoadButCountsCalls) {
  Start("weighted_rendezvous", "", {0, 1, 2, 3});
  Picked p = Pick(std::string("k"));
  ASSERT_NE(p.tracker, nullptr);
  EXPECT_EQ(Stats().picks, 1u);
  p.tracker->Start();
  EXPECT_EQ(InFlight(p.backend), 0u);
  p.tracker->Finish({absl::UnavailableError("down"), nullptr, nullptr});
  const ChannelStats stats = Stats();
  EXPECT_EQ(stats.calls.by_status[14], 1u);  // UNAVAILABLE
  const BackendStats& b = stats.backends[static_cast<size_t>(p.backend)];
  EXPECT_EQ(b.calls.by_status[14], 1u);
  uint64_t bucketed = 0;
  for (const uint64_t n : b.calls.duration_buckets) bucketed += n;
  EXPECT_EQ(bucketed, 1u);
}

// Each backend's state as its subchannel last reported it, the channel's
// as the policy reported it.
TEST_F(RendezvousLbTest, ConnectivityStatesShowInTheStats) {
  Start("bounded_load_rendezvous", "", {1, 2, 3});  // 0 still connecting
  EXPECT_NE(Stats().backends[0].connectivity, "READY");
  EXPECT_EQ(Stats().backends[1].connectivity, "READY");
  EXPECT_EQ(Stats().connectivity, "READY");
  SetState(0, GRPC_CHANNEL_TRANSIENT_FAILURE, absl::UnavailableError("down"));
  Drain();
  EXPECT_EQ(Stats().backends[0].connectivity, "TRANSIENT_FAILURE");
  for (int i = 1; i < kBackends; ++i) {
    SetState(i, GRPC_CHANNEL_TRANSIENT_FAILURE, absl::UnavailableError("x"));
  }
  Drain();
  EXPECT_EQ(Stats().connectivity, "TRANSIENT_FAILURE");
  SetState(2, GRPC_CHANNEL_IDLE);
  Drain();
  EXPECT_EQ(Stats().backends[2].connectivity, "IDLE");
}

TEST_F(RendezvousLbTest, PendingOwnerQueuesItsKeysFailedOwnerPassesThemOn) {
  Start("bounded_load_rendezvous", "", {1, 2, 3});  // 0 still connecting
  std::string key;
  for (int k = 0; key.empty(); ++k) {
    if (Order(absl::StrCat("k", k))[0] == 0) key = absl::StrCat("k", k);
  }
  EXPECT_TRUE(
      absl::holds_alternative<PickResult::Queue>(Pick(key).result.result));
  SetState(0, GRPC_CHANNEL_TRANSIENT_FAILURE, absl::UnavailableError("down"));
  Drain();
  EXPECT_EQ(PickBackend(key), Order(key)[1]);  // next in the key's order
  SetState(0, GRPC_CHANNEL_CONNECTING);        // retrying: still failed
  Drain();
  EXPECT_EQ(PickBackend(key), Order(key)[1]);
  SetState(0, GRPC_CHANNEL_READY);
  Drain();
  EXPECT_EQ(PickBackend(key), 0);  // back home on recovery
}

TEST_P(RendezvousLbPolicyTest, MissingKeyRandomSpreads) {
  Start(GetParam(), "", {0, 1, 2, 3});
  std::set<int> seen;
  for (int i = 0; i < 200; ++i) seen.insert(Pick(std::nullopt).backend);
  EXPECT_EQ(seen, (std::set<int>{0, 1, 2, 3}));
  EXPECT_EQ(Stats().missing_key, 200u);
  for (int i = 0; i < kBackends; ++i) EXPECT_EQ(InFlight(i), 0u);
}

TEST_P(RendezvousLbPolicyTest, MissingKeyFailNamesTheHeader) {
  Start(GetParam(), R"("missingKey":"FAIL")", {0, 1, 2, 3});
  Picked p = Pick(std::nullopt);
  auto* drop = absl::get_if<PickResult::Drop>(&p.result.result);
  ASSERT_NE(drop, nullptr);
  EXPECT_EQ(drop->status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(drop->status.message().find("\"x-session-id\""), std::string::npos)
      << drop->status;
  EXPECT_EQ(Stats().failed_picks, 1u);
}

TEST_F(RendezvousLbTest, SpillsAtTheBoundAndReturnsWhenItDrains) {
  // factor 100, 4 equal backends: capacity = ceil((L + 1) / 4).
  Start("bounded_load_rendezvous", R"("balanceFactorPercent":100)",
        {0, 1, 2, 3});
  const std::string key = "hot";
  const std::vector<int> order = Order(key);
  std::vector<std::unique_ptr<Tracker>> held;
  // First pick: L = 0, capacity 1, owner has room.
  Picked first = Pick(key);
  ASSERT_EQ(first.backend, order[0]);
  first.tracker->Start();
  EXPECT_EQ(InFlight(order[0]), 1u);
  // Second: L = 1, capacity ceil(2/4) = 1, owner full -> next in order.
  Picked second = Pick(key);
  ASSERT_EQ(second.backend, order[1]);
  second.tracker->Start();
  EXPECT_EQ(Stats().spills, 1u);
  // The owner's call finishes: the key goes home.
  first.tracker->Finish({absl::OkStatus(), nullptr, nullptr});
  EXPECT_EQ(InFlight(order[0]), 0u);
  Picked third = Pick(key);
  EXPECT_EQ(third.backend, order[0]);
  third.tracker->Start();
  third.tracker->Finish({absl::CancelledError(), nullptr, nullptr});
  second.tracker->Finish({absl::OkStatus(), nullptr, nullptr});
  for (int i = 0; i < kBackends; ++i) EXPECT_EQ(InFlight(i), 0u);
}

TEST_F(RendezvousLbTest, TrackerDestroyedWithoutStartLeavesCountsUnchanged) {
  Start("bounded_load_rendezvous", "", {0, 1, 2, 3});
  {
    Picked p = Pick(std::string("k"));
    ASSERT_NE(p.tracker, nullptr);
    EXPECT_EQ(InFlight(p.backend), 1u);  // reserved at the pick
  }
  for (int i = 0; i < kBackends; ++i) EXPECT_EQ(InFlight(i), 0u);
  // A call that never started is not a call that ended.
  for (const uint64_t n : Stats().calls.by_status) EXPECT_EQ(n, 0u);
}

TEST_F(RendezvousLbTest, AddressUpdateKeepsCountersAndLateFinishIsSafe) {
  Start("bounded_load_rendezvous", "", {0, 1, 2, 3});
  const std::string key = "session-9";
  Picked p = Pick(key);
  p.tracker->Start();
  const int backend = p.backend;
  // The backend leaves the list while its call runs.
  std::vector<std::string> rest;
  for (int i = 0; i < kBackends; ++i) {
    if (i != backend) rest.push_back(uris_[static_cast<size_t>(i)]);
  }
  ASSERT_TRUE(Update(Config("bounded_load_rendezvous", ""), rest).ok());
  Drain();
  EXPECT_EQ(Stats().backends.size(), 3u);
  // ... and comes back before the call ends: same counter.
  ASSERT_TRUE(Update(Config("bounded_load_rendezvous", ""), uris_).ok());
  SetState(backend, GRPC_CHANNEL_READY);
  Drain();
  EXPECT_EQ(InFlight(backend), 1u);
  p.tracker->Finish({absl::OkStatus(), nullptr, nullptr});
  for (int i = 0; i < kBackends; ++i) EXPECT_EQ(InFlight(i), 0u);
  // A call whose backend is gone for good finishes into its own counter.
  Picked q = Pick(key);
  q.tracker->Start();
  ASSERT_TRUE(Update(Config("bounded_load_rendezvous", ""), rest).ok());
  Drain();
  q.tracker->Finish({absl::OkStatus(), nullptr, nullptr});
  for (const BackendStats& b : Stats().backends) EXPECT_EQ(b.in_flight, 0u);
}

TEST_F(RendezvousLbTest, SameSizeAddressUpdatesRouteByTheNewList) {
  // Reordered or renamed backends keep the list's size: hashing kept from the
  // old list would route wrongly without failing.
  Start("bounded_load_rendezvous", "", {0, 1, 2, 3});
  const std::vector<std::string> reversed(uris_.rbegin(), uris_.rend());
  ASSERT_TRUE(Update(Config("bounded_load_rendezvous", ""), reversed).ok());
  Drain();
  for (int k = 0; k < 200; ++k) {
    const std::string key = absl::StrCat("user-", k);
    ASSERT_EQ(PickBackend(key), Order(key)[0]) << key;
  }
  // The same addresses under new identities.
  const std::vector<std::string> names = {"a", "b", "c", "d"};
  std::string body = R"("endpoints":[)";
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StrAppend(&body, i == 0 ? "" : ",", R"({"address":")", identities_[i],
                    R"(","identity":")", names[i], R"("})");
  }
  absl::StrAppend(&body, "]");
  // Twice: the second is a re-resolution of an unchanged list.
  for (int round = 0; round < 2; ++round) {
    ASSERT_TRUE(Update(Config("bounded_load_rendezvous", body), uris_).ok());
    Drain();
    ExpectBackendsHashedAs(names);
  }
}

TEST_P(RendezvousLbPolicyTest, HardLimitFailsFastWithResourceExhausted) {
  Start(GetParam(), R"("maxInFlightPerBackend":2)", {0, 1, 2, 3});
  std::vector<Picked> held;
  for (int i = 0; i < 2 * kBackends; ++i) {
    Picked p = Pick(absl::StrCat("k", i % 3));
    ASSERT_NE(p.backend, -1) << "pick " << i;
    p.tracker->Start();
    held.push_back(std::move(p));
  }
  for (int i = 0; i < kBackends; ++i) EXPECT_EQ(InFlight(i), 2u);
  Picked refused = Pick(std::string("k0"));
  auto* drop = absl::get_if<PickResult::Drop>(&refused.result.result);
  ASSERT_NE(drop, nullptr);
  EXPECT_EQ(drop->status,
            absl::ResourceExhaustedError("poise: every READY backend is at "
                                         "maxInFlightPerBackend (2 calls in "
                                         "flight)"));
  for (auto& p : held) {
    p.tracker->Finish({absl::OkStatus(), nullptr, nullptr});
  }
  for (int i = 0; i < kBackends; ++i) EXPECT_EQ(InFlight(i), 0u);
}

TEST_F(RendezvousLbTest, ConfigIdentityAndWeightDriveTheHash) {
  const std::string body = absl::StrCat(
      R"("endpoints":[{"address":"127.0.0.1:441","identity":"a","weight":1},)",
      R"({"address":"127.0.0.1:442","identity":"b","weight":3},)",
      R"({"address":"127.0.0.1:443","identity":"c","weight":6}])");
  MakePolicy("weighted_rendezvous");
  ASSERT_TRUE(Update(Config("weighted_rendezvous", body),
                     {uris_[0], uris_[1], uris_[2]})
                  .ok());
  for (int i : {0, 1, 2}) SetState(i, GRPC_CHANNEL_READY);
  Drain();
  // The published example: customer-42 belongs to b.
  EXPECT_EQ(PickBackend("customer-42"), 1);
  const std::vector<Candidate> c = {{"a", 1}, {"b", 3}, {"c", 6}};
  for (int k = 0; k < 300; ++k) {
    const std::string key = absl::StrCat(k);
    EXPECT_EQ(PickBackend(key),
              static_cast<int>(WeightedRendezvous::Pick(key, c).value()));
  }
}

// The public per-address channel arg (what the poise-dns/poise-srv resolvers
// and any user's resolver set) names the backend like the attribute does.
TEST_F(RendezvousLbTest, IdentityAddressArgDrivesTheHash) {
  const std::string body = absl::StrCat(
      R"("endpoints":[{"address":")", identities_[0], R"(","identity":"a"}])");
  MakePolicy("weighted_rendezvous");
  LoadBalancingPolicy::UpdateArgs update;
  update.addresses.emplace();
  const std::vector<std::string> args = {"not-a", "web-1:8443", "",
                                         "web-3:8443"};
  for (size_t i = 0; i < uris_.size(); ++i) {
    ChannelArgs address_args;
    if (!args[i].empty()) {
      address_args =
          address_args.Set(poise::grpc_lb::kIdentityAddressArg, args[i]);
    }
    update.addresses->emplace_back(MakeAddress(uris_[i]), address_args);
  }
  update.config = MakeConfig(*Json::Parse(Config("weighted_rendezvous", body)));
  ASSERT_TRUE(ApplyUpdate(std::move(update), policy_.get()).ok());
  for (int i = 0; i < kBackends; ++i) SetState(i, GRPC_CHANNEL_READY);
  Drain();
  ASSERT_EQ(state_, GRPC_CHANNEL_READY);
  ExpectBackendsHashedAs({"a", "web-1:8443", identities_[2], "web-3:8443"});
}

// Zones: the resolver's kZoneAddressArg gives each address its zone, the
// channel's kLocalZoneArg the client's, before the config's localZone; a
// value that is not a zone is refused and the config's zone routes.
TEST_F(RendezvousLbTest, ZoneArgsKeepEveryKeyOnItsZonesOwner) {
  const std::vector<std::string> zones = {"a", "b", "a", "b"};
  ASSERT_EQ(zones.size(), static_cast<size_t>(kBackends));
  MakePolicy("weighted_rendezvous");
  const auto update_with = [&](const char* local_zone_arg) {
    LoadBalancingPolicy::UpdateArgs update;
    update.addresses.emplace();
    for (size_t i = 0; i < uris_.size(); ++i) {
      update.addresses->emplace_back(
          MakeAddress(uris_[i]), ChannelArgs().Set(kZoneAddressArg, zones[i]));
    }
    if (local_zone_arg != nullptr) {
      update.args = update.args.Set(kLocalZoneArg, local_zone_arg);
    }
    subchannel_args_ = update.args;
    update.config = MakeConfig(
        *Json::Parse(Config("weighted_rendezvous", R"("localZone":"a")")));
    return ApplyUpdate(std::move(update), policy_.get());
  };
  ASSERT_TRUE(update_with("b").ok());
  for (int i = 0; i < kBackends; ++i) SetState(i, GRPC_CHANNEL_READY);
  Drain();
  ASSERT_EQ(state_, GRPC_CHANNEL_READY);
  for (int k = 0; k < 200; ++k) {
    const std::string key = absl::StrCat("user-", k);
    ASSERT_EQ(PickBackend(key), Order(key, {1, 3}).front()) << key;
  }
  EXPECT_EQ(Stats().zone_kept, 200u);
  EXPECT_EQ(Stats().zone_out, 0u);
  // ExplainKey shows the zone's order and owner.
  const absl::StatusOr<std::string> explained = ExplainKey(label_, "user-7");
  ASSERT_TRUE(explained.ok()) << explained.status();
  EXPECT_NE(explained->find(absl::StrCat(
                R"("local_zone":"b","zone_order":[)", R"({"identity":")",
                identities_[static_cast<size_t>(Order("user-7", {1, 3})[0])])),
            std::string::npos)
      << *explained;
  EXPECT_NE(explained->find(R"("left_zone":null)"), std::string::npos)
      << *explained;
  // Not a zone: the config's localZone "a" (new args, new subchannels).
  ASSERT_TRUE(update_with("").ok());
  for (int i = 0; i < kBackends; ++i) SetState(i, GRPC_CHANNEL_READY);
  Drain();
  ASSERT_EQ(state_, GRPC_CHANNEL_READY);
  for (int k = 0; k < 200; ++k) {
    const std::string key = absl::StrCat("user-", k);
    ASSERT_EQ(PickBackend(key), Order(key, {0, 2}).front()) << key;
  }
  EXPECT_EQ(Stats().zone_kept, 400u);
}

// A resolver's identity attribute names the backend unless the config's
// endpoints[] does; the address is hashed only without either.
TEST_F(RendezvousLbTest, IdentityAttributeDrivesTheHash) {
  const std::string body = absl::StrCat(
      R"("endpoints":[{"address":")", identities_[0], R"(","identity":"a"}])");
  MakePolicy("weighted_rendezvous");
  LoadBalancingPolicy::UpdateArgs update;
  update.addresses.emplace();
  const std::vector<std::string> attributes = {"not-a", "b", "", "d"};
  for (size_t i = 0; i < uris_.size(); ++i) {
    std::map<const char*,
             std::unique_ptr<grpc_core::ServerAddress::AttributeInterface>>
        attrs;
    attrs[IdentityAttribute::kKey] =
        std::make_unique<IdentityAttribute>(attributes[i]);
    update.addresses->emplace_back(MakeAddress(uris_[i]), ChannelArgs(),
                                   std::move(attrs));
  }
  update.config = MakeConfig(*Json::Parse(Config("weighted_rendezvous", body)));
  ASSERT_TRUE(ApplyUpdate(std::move(update), policy_.get()).ok());
  for (int i = 0; i < kBackends; ++i) SetState(i, GRPC_CHANNEL_READY);
  Drain();
  ASSERT_EQ(state_, GRPC_CHANNEL_READY);
  // endpoints[] wins, then the attribute; an empty one names nothing.
  ExpectBackendsHashedAs({"a", "b", identities_[2], "d"});
}

// Two addresses hashed as one identity would split that owner's keys by list
// position: the first keeps the identity, the other is left out.
TEST_F(RendezvousLbTest, DuplicateIdentitiesKeepTheFirstBackend) {
  const std::string body =
      absl::StrCat(R"("endpoints":[{"address":")", identities_[3],
                   R"(","identity":")", identities_[1], R"("}])");
  MakePolicy("bounded_load_rendezvous");
  ASSERT_TRUE(Update(Config("bounded_load_rendezvous", body), uris_).ok());
  // No subchannel for the backend left out.
  EXPECT_EQ(subchannel_pool_.find(
                SubchannelKey(MakeAddress(uris_[3]), ChannelArgs())),
            subchannel_pool_.end());
  for (int i = 0; i < 3; ++i) SetState(i, GRPC_CHANNEL_READY);
  Drain();
  const ChannelStats stats = Stats();
  ASSERT_EQ(stats.backends.size(), 3u);
  EXPECT_EQ(stats.backends[1].address, identities_[1]);
  EXPECT_EQ(stats.backends[2].address, identities_[2]);
  for (int k = 0; k < 100; ++k) {
    EXPECT_NE(PickBackend(absl::StrCat("user-", k)), 3);
  }
}

// B1: two names of one pod (or a CNAME beside its target) resolving to one
// address are a backend each: each name's keys go to the address as they
// would over the names alone, each through a subchannel of its own that it
// keeps across updates, and each counts its own calls in flight.
TEST_F(RendezvousLbTest, TwoIdentitiesOnOneAddressAreABackendEach) {
  const std::string config = Config("bounded_load_rendezvous", "");
  const std::vector<std::pair<int, std::string>> named = {
      {0, "b0.t:441"}, {0, "b1.t:441"}, {1, "b2.t:442"}, {2, ""}};
  MakePolicy("bounded_load_rendezvous");
  ASSERT_TRUE(UpdateNamed(config, named).ok());
  for (int i : {0, 1, 2}) SetState(i, GRPC_CHANNEL_READY);
  Drain();
  ASSERT_EQ(state_, GRPC_CHANNEL_READY);
  const std::vector<std::string> hashed = {"b0.t:441", "b1.t:441", "b2.t:442",
                                           identities_[2]};
  const ChannelStats stats = Stats();
  ASSERT_EQ(stats.backends.size(), hashed.size());
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < hashed.size(); ++i) {
    EXPECT_EQ(stats.backends[i].identity, hashed[i]);
    EXPECT_EQ(stats.backends[i].address,
              identities_[static_cast<size_t>(named[i].first)]);
    candidates.push_back({hashed[i], 1, true});
  }
  // A key of each name on the shared address.
  std::string key_of_b0;
  std::string key_of_b1;
  for (int k = 0; k < 200; ++k) {
    const std::string key = absl::StrCat("user-", k);
    const size_t owner = WeightedRendezvous::Pick(key, candidates).value();
    ASSERT_EQ(PickBackend(key), named[owner].first) << key;
    if (owner == 0 && key_of_b0.empty()) key_of_b0 = key;
    if (owner == 1 && key_of_b1.empty()) key_of_b1 = key;
  }
  ASSERT_FALSE(key_of_b0.empty());
  ASSERT_FALSE(key_of_b1.empty());
  const auto subchannel_of = [&](const std::string& key) {
    Picked p = Pick(key);
    auto* complete = absl::get_if<PickResult::Complete>(&p.result.result);
    EXPECT_NE(complete, nullptr) << key;
    return complete == nullptr ? nullptr : complete->subchannel.get();
  };
  const auto* b0 = subchannel_of(key_of_b0);
  const auto* b1 = subchannel_of(key_of_b1);
  EXPECT_NE(b0, b1);
  // Calls in flight count per name.
  Picked call = Pick(key_of_b0);
  ASSERT_NE(call.tracker, nullptr);
  call.tracker->Start();
  EXPECT_EQ(Stats().backends[0].in_flight, 1u);
  EXPECT_EQ(Stats().backends[1].in_flight, 0u);
  call.tracker->Finish({absl::OkStatus(), nullptr, nullptr});
  EXPECT_EQ(Stats().backends[0].in_flight, 0u);
  // Re-resolved, and then with the two names swapped: each keeps its own.
  for (const auto& update :
       {named,
        std::vector<std::pair<int, std::string>>{
            {0, "b1.t:441"}, {1, "b2.t:442"}, {0, "b0.t:441"}, {2, ""}}}) {
    ASSERT_TRUE(UpdateNamed(config, update).ok());
    Drain();
    ASSERT_EQ(state_, GRPC_CHANNEL_READY);
    EXPECT_EQ(subchannel_of(key_of_b0), b0);
    EXPECT_EQ(subchannel_of(key_of_b1), b1);
  }
}

// ExplainKey while no backend is READY (a new channel, an address list that
// changed entirely, every backend failing): the key over the backends the
// stats list, each named not READY, never "no picker"; with a backend READY,
// over the READY ones as the picker weighs them.
TEST_F(RendezvousLbTest, ExplainKeyNamesTheListedBackendsWhileNoneIsReady) {
  const std::string config = Config("bounded_load_rendezvous", "");
  const std::string key = "user-7";
  MakePolicy("bounded_load_rendezvous");
  const absl::StatusOr<std::string> before = ExplainKey(label_, key);
  EXPECT_EQ(before.status(),
            absl::FailedPreconditionError(absl::StrCat(
                "channel \"", label_,
                "\" lists no backend: its resolver has given no address list "
                "yet, or an empty one")));
  ASSERT_TRUE(Update(config, uris_).ok());
  Drain();
  ASSERT_EQ(state_, GRPC_CHANNEL_CONNECTING);
  std::string json = ExplainAgreeingWithStats(key);
  EXPECT_NE(json.find(absl::StrCat(
                "\"affinity\":\"",
                identities_[static_cast<size_t>(Order(key)[0])], "\"")),
            std::string::npos)
      << json;
  // One READY: the picker's answer, over it alone.
  SetState(1, GRPC_CHANNEL_READY);
  Drain();
  ASSERT_EQ(state_, GRPC_CHANNEL_READY);
  json = ExplainAgreeingWithStats(key);
  EXPECT_NE(json.find(absl::StrCat("\"affinity\":\"", identities_[1], "\"")),
            std::string::npos)
      << json;
  // Churn: a list of other addresses, none connected yet.
  const std::vector<std::string> others = {"ipv4:127.0.0.1:9001",
                                           "ipv4:127.0.0.1:9002"};
  ASSERT_TRUE(Update(config, others).ok());
  Drain();
  ASSERT_EQ(state_, GRPC_CHANNEL_CONNECTING);
  json = ExplainAgreeingWithStats(key);
  const std::vector<std::string> new_ids = {"127.0.0.1:9001", "127.0.0.1:9002"};
  const std::vector<Candidate> new_list = {{new_ids[0], 1, true},
                                           {new_ids[1], 1, true}};
  EXPECT_NE(
      json.find(absl::StrCat(
          "\"affinity\":\"",
          new_ids[WeightedRendezvous::Pick(key, new_list).value()], "\"")),
      std::string::npos)
      << json;
  for (const std::string& gone : identities_) {
    EXPECT_EQ(json.find(gone), std::string::npos) << json;
  }
  // Both failing: still named, the channel's state with them.
  for (const std::string& uri : others) {
    ExecCtx exec_ctx;
    auto it =
        subchannel_pool_.find(SubchannelKey(MakeAddress(uri), ChannelArgs()));
    ASSERT_NE(it, subchannel_pool_.end()) << uri;
    it->second.SetConnectivityState(GRPC_CHANNEL_TRANSIENT_FAILURE,
                                    absl::UnavailableError("refused"));
  }
  Drain();
  ASSERT_EQ(state_, GRPC_CHANNEL_TRANSIENT_FAILURE);
  json = ExplainAgreeingWithStats(key);
  EXPECT_NE(json.find("\"connectivity\":\"TRANSIENT_FAILURE\""),
            std::string::npos)
      << json;
  // An empty list: nothing to explain over.
  EXPECT_FALSE(Update(config, {}).ok());
  Drain();
  EXPECT_EQ(ExplainKey(label_, key).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace poise::grpc_lb
