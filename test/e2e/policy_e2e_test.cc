// The policies end to end: real grpc++ servers on 127.0.0.1 (port 0), real
// channels configured through SetServiceConfigJSON.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend.h"
#include "poise/grpc_lb.h"
#include "poise/rendezvous.h"
#include "test/support/e2e_harness.h"

namespace poise::grpc_lb {
namespace {

using example::BackendSet;
// The shared e2e harness.
using test_support::CallOptions;
using test_support::Candidates;
using test_support::Client;
using test_support::kHeader;
using test_support::LbConfig;
using test_support::StatsFor;
using test_support::WaitFor;
using test_support::WarmUp;

// These tests' calls: wait for ready, 20 s deadline.
CallOptions Calling(uint32_t delay_ms = 0) {
  CallOptions options;
  options.delay_ms = delay_ms;
  options.deadline = std::chrono::seconds(20);
  return options;
}

constexpr std::chrono::milliseconds kPoll{20};  // WaitFor's polling period

// The id of the backend that served the call, or "error:<message>".
std::string Served(Client& client, const std::string& key) {
  return client.Call(key, Calling()).ServedBy();
}

TEST(PolicyE2E, SameKeySameServerOnTwoChannelsMatchingTheCoreAndExplain) {
  BackendSet set;
  ASSERT_TRUE(set.Start(4, kHeader).ok());
  Client a(set.target(), LbConfig("bounded_load_rendezvous", ""), "two-a");
  Client b(set.target(), LbConfig("weighted_rendezvous", ""), "two-b");
  std::vector<std::string> ids;
  const auto candidates = Candidates(set, &ids);
  for (int k = 0; k < 100; ++k) {
    const std::string key = absl::StrCat("user-", k);
    const std::string owner =
        set.backend(WeightedRendezvous::Pick(key, candidates).value()).id();
    ASSERT_EQ(Served(a, key), owner) << key;
    ASSERT_EQ(Served(b, key), owner) << key;
  }
#ifdef POISE_EXPLAIN_PATH
  // poise-explain, given the same identities, names the same owner.
  std::string command = absl::StrCat(POISE_EXPLAIN_PATH, " --key user-7");
  for (const auto& id : ids) absl::StrAppend(&command, " --backend ", id, "=1");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buffer[8192];
  std::string output;
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) {
    output.append(buffer, n);
  }
  ASSERT_EQ(pclose(pipe), 0);
  const std::string owner = Served(a, "user-7");
  const auto index = static_cast<size_t>(set.IndexOf(owner));
  EXPECT_NE(output.find(absl::StrCat("\"affinity\":\"", ids[index], "\"")),
            std::string::npos)
      << output;
#endif
}

TEST(PolicyE2E, WeightsSetShares) {
  BackendSet set;
  ASSERT_TRUE(set.Start(3, kHeader).ok());
  const std::vector<uint32_t> weights = {1, 3, 6};
  std::string endpoints;
  for (size_t i = 0; i < 3; ++i) {
    absl::StrAppend(&endpoints, i ? "," : "", R"({"address":")",
                    set.backend(i).address(), R"(","weight":)", weights[i],
                    "}");
  }
  Client c(set.target(),
           LbConfig("weighted_rendezvous",
                    absl::StrCat(R"("endpoints":[)", endpoints, "]")),
           "shares");
  constexpr int kKeys = 3000;
  std::map<std::string, int> hits;
  for (int k = 0; k < kKeys; ++k) ++hits[Served(c, absl::StrCat("k", k))];
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(hits[set.backend(i).id()] / double{kKeys}, weights[i] / 10.0,
                0.03)
        << set.backend(i).id();
  }
}

TEST(PolicyE2E, HotKeySpreadsWithinItsBoundAndCountersDrain) {
  BackendSet set;
  ASSERT_TRUE(set.Start(3, kHeader).ok());
  constexpr uint32_t kFactor = 150;
  constexpr int kThreads = 12;
  Client c(set.target(),
           LbConfig("bounded_load_rendezvous",
                    absl::StrCat(R"("balanceFactorPercent":)", kFactor)),
           "hot");
  // The bound below divides by all three backends' weight.
  ASSERT_TRUE(WarmUp(c, set));
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  std::atomic<int> errors{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 40; ++i) {
        if (!c.Call("the-hot-key", Calling(5)).status.ok()) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  int served = 0;
  for (size_t i = 0; i < set.size(); ++i) served += set.backend(i).calls() > 0;
  EXPECT_GT(served, 1);  // the hot key was relieved
  // With at most kThreads calls in flight, L + 1 <= kThreads at every pick,
  // so no backend can have been admitted past ceil(f kThreads w / (100 W)).
  const uint64_t bound = (kFactor * kThreads + 300 - 1) / 300;
  const ChannelStats stats = StatsFor("hot");
  ASSERT_EQ(stats.backends.size(), 3u);
  for (const BackendStats& b : stats.backends) {
    EXPECT_LE(b.peak_in_flight, bound) << b.identity;
    EXPECT_EQ(b.in_flight, 0u) << b.identity;
  }
  EXPECT_GT(stats.spills, 0u);
}

// loadScope PROCESS: four channels of one stats label (the scope's name)
// drive one hot key with 16 calls in flight in all over 5 backends. Every
// backend stays within the bound of all their calls, ceil(1.5 * 16 / 5) = 5
// (with the scope's peak for 16), as its server counts them; each channel's
// own bound, ceil(1.5 * 4 / 5) = 2, would let the owner hold 8
// (test/router/load_scope_test.cc). Every counter of the scope drains, also
// as the channels close.
TEST(PolicyE2E, ChannelsOfOneProcessScopeShareTheBound) {
  BackendSet set;
  ASSERT_TRUE(set.Start(5, kHeader).ok());
  constexpr uint32_t kFactor = 150;
  constexpr int kChannels = 4;
  constexpr int kThreadsPerChannel = 4;
  const std::string config =
      LbConfig("bounded_load_rendezvous",
               absl::StrCat(R"("balanceFactorPercent":)", kFactor,
                            R"(,"loadScope":"PROCESS")"));
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kChannels; ++i) {
    clients.push_back(
        std::make_unique<Client>(set.target(), config, "process-scope"));
    ASSERT_TRUE(WarmUp(*clients.back(), set));
  }
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < kChannels * kThreadsPerChannel; ++t) {
    Client& c = *clients[static_cast<size_t>(t % kChannels)];
    threads.emplace_back([&c, &errors] {
      for (int i = 0; i < 30; ++i) {
        if (!c.Call("the-hot-key", Calling(5)).status.ok()) ++errors;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  // L + 1 is at most the scope's peak at every pick (16 calls, or a few
  // more while Finish(), on gRPC's threads, trails a call's return), plus
  // one: a slot is counted in its backend's counter before the scope's
  // total and released from the total first, so the counters' sum, which a
  // pick that finds the total stale decides on, can pass the total's peak
  // for a moment (seen on 2 cores kept busy by another process).
  const uint64_t peak = StatsFor("process-scope").scope_peak_in_flight;
  EXPECT_GE(peak, 4u);
  const uint64_t bound = test_support::Bound(kFactor, peak + 1, 1, 5);
  for (size_t i = 0; i < set.size(); ++i) {
    EXPECT_LE(static_cast<uint64_t>(set.backend(i).peak_in_flight()), bound)
        << set.backend(i).id() << ", scope peak " << peak;
  }
  uint64_t spills = 0;
  int channels_seen = 0;
  for (const ChannelStats& s : grpc_lb::StatsSnapshot()) {
    if (s.label != "process-scope") continue;
    ++channels_seen;
    EXPECT_EQ(s.load_scope, "PROCESS");
    EXPECT_EQ(s.scope_in_flight, 0u);
    spills += s.spills;
    ASSERT_EQ(s.backends.size(), 5u);
    for (const BackendStats& b : s.backends) {
      EXPECT_LE(b.peak_in_flight, bound) << b.identity;  // scope-wide
      EXPECT_EQ(b.in_flight, 0u) << b.identity;
    }
  }
  EXPECT_EQ(channels_seen, kChannels);
  EXPECT_GT(spills, 0u);
  // Closing them, in an order that is neither first-to-last nor the reverse,
  // while the others still count.
  for (const size_t i : {2u, 0u, 3u, 1u}) {
    clients[i].reset();
    for (const ChannelStats& s : grpc_lb::StatsSnapshot()) {
      if (s.label == "process-scope") {
        EXPECT_EQ(s.scope_in_flight, 0u);
      }
    }
  }
}

TEST(PolicyE2E, StoppingABackendMovesOnlyItsKeysAndRestartingMovesThemBack) {
  BackendSet set;
  ASSERT_TRUE(set.Start(4, kHeader).ok());
  Client c(set.target(), LbConfig("bounded_load_rendezvous", ""), "stop");
  std::vector<std::string> keys;
  std::map<std::string, std::string> before;
  for (int k = 0; k < 200; ++k) {
    keys.push_back(absl::StrCat("s", k));
    before[keys.back()] = Served(c, keys.back());
  }
  set.backend(2).Stop();
  const std::string stopped = set.backend(2).id();
  // Wait until the channel has seen the failure (its keys answer elsewhere).
  std::string probe;
  for (const auto& k : keys) {
    if (before[k] == stopped) probe = k;
  }
  ASSERT_FALSE(probe.empty());
  ASSERT_TRUE(WaitFor([&] { return Served(c, probe).rfind('b', 0) == 0; },
                      std::chrono::seconds(20), kPoll));
  for (const auto& k : keys) {
    const std::string now = Served(c, k);
    if (before[k] == stopped) {
      EXPECT_NE(now, stopped) << k;
      EXPECT_EQ(now.rfind('b', 0), 0u) << k << " " << now;
    } else {
      EXPECT_EQ(now, before[k]) << k;  // nobody else's key moved
    }
  }
  ASSERT_TRUE(set.backend(2).Restart().ok());
  ASSERT_TRUE(WaitFor([&] { return Served(c, probe) == stopped; },
                      std::chrono::seconds(30), kPoll));
  for (const auto& k : keys) EXPECT_EQ(Served(c, k), before[k]) << k;
  for (const BackendStats& b : StatsFor("stop").backends) {
    EXPECT_EQ(b.in_flight, 0u);
  }
}

// ExplainKey on a live channel: the key's owner and order over its READY
// backends, as the channel routes it; a stopped backend is listed as not
// READY and its keys' answer moves with the channel's.
TEST(PolicyE2E, ExplainKeyAnswersForTheLiveChannel) {
  BackendSet set;
  ASSERT_TRUE(set.Start(3, kHeader).ok());
  Client c(set.target(), LbConfig("bounded_load_rendezvous"), "explain-live");
  ASSERT_TRUE(WarmUp(c, set));
  std::vector<std::string> ids;
  const auto candidates = Candidates(set, &ids);
  for (int k = 0; k < 20; ++k) {
    const std::string key = absl::StrCat("user-", k);
    const absl::StatusOr<std::string> json = ExplainKey("explain-live", key);
    ASSERT_TRUE(json.ok()) << json.status();
    const size_t owner = WeightedRendezvous::Pick(key, candidates).value();
    EXPECT_NE(json->find(absl::StrCat("\"affinity\":\"", ids[owner], "\"")),
              std::string::npos)
        << *json;
    EXPECT_NE(json->find("\"channel\":\"explain-live\",\"policy\":"
                         "\"bounded_load_rendezvous\",\"not_ready\":[]"),
              std::string::npos)
        << *json;
    EXPECT_EQ(Served(c, key), set.backend(owner).id());
  }
  // user-0's owner stops: it is not READY, and the answer is the next choice.
  const size_t owner = WeightedRendezvous::Pick("user-0", candidates).value();
  set.backend(owner).Stop();
  ASSERT_TRUE(WaitFor([&] {
    const absl::StatusOr<std::string> json =
        ExplainKey("explain-live", "user-0");
    return json.ok() && json->find(absl::StrCat("\"not_ready\":[\"", ids[owner],
                                                "\"]")) != std::string::npos;
  }));
  const absl::StatusOr<std::string> json = ExplainKey("explain-live", "user-0");
  ASSERT_TRUE(json.ok());
  const std::string served = Served(c, "user-0");
  const auto index = static_cast<size_t>(set.IndexOf(served));
  EXPECT_NE(json->find(absl::StrCat("\"affinity\":\"", ids[index], "\"")),
            std::string::npos)
      << *json << " served by " << served;
  EXPECT_EQ(ExplainKey("no-such-label", "k").status().code(),
            absl::StatusCode::kNotFound);
}

// Client-side health checking (the README's healthCheckConfig example): a
// backend that turns NOT_SERVING passes its keys to their next choice and
// no other key moves; SERVING again, its keys come back.
TEST(PolicyE2E, HealthCheckConfigPassesANotServingBackendsKeysOn) {
  BackendSet set;
  ASSERT_TRUE(set.Start(4, kHeader).ok());
  const std::string config =
      R"({"healthCheckConfig": {"serviceName": ""},
          "loadBalancingConfig": [{"bounded_load_rendezvous": {
            "hashHeader": "x-session-id"}}]})";
  ASSERT_TRUE(ValidateServiceConfig(config).ok());
  Client c(set.target(), config, "health");
  ASSERT_TRUE(WarmUp(c, set));
  std::vector<std::string> ids;
  std::vector<Candidate> candidates = Candidates(set, &ids);
  std::map<std::string, std::string> before;
  for (int k = 0; k < 200; ++k) {
    const std::string key = absl::StrCat("user-", k);
    before[key] = Served(c, key);
    ASSERT_EQ(
        before[key],
        set.backend(WeightedRendezvous::Pick(key, candidates).value()).id());
  }
  set.backend(1).set_serving(false);
  candidates[1].eligible = false;
  ASSERT_TRUE(WaitFor([&] {
    return Served(c, "user-0") ==
           set.backend(WeightedRendezvous::Pick("user-0", candidates).value())
               .id();
  }));
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& [key, by] : before) {
      if (by == set.backend(1).id() && Served(c, key) == by) return false;
    }
    return true;
  }));
  int moved = 0;
  for (const auto& [key, by] : before) {
    const std::string now = Served(c, key);
    const std::string next =
        set.backend(WeightedRendezvous::Pick(key, candidates).value()).id();
    EXPECT_EQ(now, next) << key;
    if (by == set.backend(1).id()) {
      ++moved;
    } else {
      EXPECT_EQ(now, by) << key << " moved though its owner is SERVING";
    }
  }
  EXPECT_GT(moved, 0);
  set.backend(1).set_serving(true);
  ASSERT_TRUE(WaitFor([&] {
    for (const auto& [key, by] : before) {
      if (Served(c, key) != by) return false;
    }
    return true;
  }));
}

TEST(PolicyE2E, InvalidConfigIsReportedWithTheField) {
  const absl::Status status = ValidateServiceConfig(
      LbConfig("bounded_load_rendezvous", R"("balanceFactorPercent":99)"));
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("field:balanceFactorPercent"),
            std::string::npos)
      << status;
}

// Adds the routing key as call credentials would (a per-tenant token plugin,
// say): gRPC 1.51 runs the plugin after the pick.
class TenantCredentials : public grpc::MetadataCredentialsPlugin {
 public:
  explicit TenantCredentials(std::string tenant) : tenant_(std::move(tenant)) {}
  bool IsBlocking() const override { return false; }
  grpc::Status GetMetadata(
      grpc::string_ref /*service_url*/, grpc::string_ref /*method_name*/,
      const grpc::AuthContext& /*channel_auth_context*/,
      std::multimap<std::string, std::string>* metadata) override {
    metadata->emplace("x-tenant", tenant_);
    return grpc::Status::OK;
  }

 private:
  std::string tenant_;
};

// What the README says of call credentials: the header they add reaches the
// backend but not the pick, so missingKey decides; the same key attached to
// the call's own metadata routes it.
TEST(PolicyE2E, AKeyAddedByCallCredentialsIsInvisibleToThePick) {
  BackendSet set;
  ASSERT_TRUE(set.Start(5, "x-tenant").ok());
  const auto call = [](Client& client, bool key_in_metadata) {
    grpc::ClientContext context;
    context.set_credentials(grpc::experimental::MetadataCredentialsFromPlugin(
        std::make_unique<TenantCredentials>("tenant-7"), GRPC_SECURITY_NONE));
    if (key_in_metadata) context.AddMetadata("x-tenant", "tenant-7");
    context.set_wait_for_ready(true);
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(20));
    example::EchoRequest request;
    example::EchoReply reply;
    const grpc::Status status = client.stub().Echo(&context, request, &reply);
    return status.ok() ? reply.backend_id()
                       : absl::StrCat("error:", status.error_message());
  };
  const auto config = [](const char* missing_key) {
    return absl::StrCat(
        R"({"loadBalancingConfig":[{"weighted_rendezvous":{"hashHeader":"x-tenant","missingKey":")",
        missing_key, R"("}}]})");
  };
  Client failing(set.target(), config("FAIL"), "creds-fail");
  EXPECT_EQ(call(failing, false),
            "error:poise: the call has no \"x-tenant\" header and missingKey "
            "is FAIL");
  Client random(set.target(), config("RANDOM"), "creds-random");
  std::set<std::string> served;
  for (int i = 0; i < 40; ++i) served.insert(call(random, false));
  EXPECT_GT(served.size(), 1u) << "one tenant spread over the backends";
  // The header was on the wire all along: the backends saw the tenant.
  size_t saw_tenant = 0;
  for (size_t b = 0; b < set.size(); ++b) {
    saw_tenant += set.backend(b).keys_seen().count("tenant-7");
  }
  EXPECT_EQ(saw_tenant, served.size());
  // In the call's metadata the key routes: every call to the owner.
  std::vector<std::string> ids;
  const auto candidates = Candidates(set, &ids);
  const std::string owner =
      set.backend(WeightedRendezvous::Pick("tenant-7", candidates).value())
          .id();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(call(random, true), owner);
}

// serverLoad: the backends' ORCA reports (poise::server in the example
// backend) reach the bounded policy, per call and out of band.
TEST(PolicyE2E, ServerLoadReportsReachThePolicyPerCallAndOutOfBand) {
  BackendSet set;
  ASSERT_TRUE(set.Start(3, kHeader).ok());
  Client per_call(set.target(),
                  LbConfig("bounded_load_rendezvous",
                           R"("serverLoad":{"outOfBandInterval":"0s"})"),
                  "reports-per-call");
  for (int k = 0; k < 30; ++k) {
    ASSERT_EQ(
        per_call.Call(absl::StrCat("user-", k), Calling()).status.error_code(),
        grpc::StatusCode::OK);
  }
  grpc_lb::ChannelStats stats = StatsFor("reports-per-call");
  EXPECT_TRUE(stats.server_load);
  EXPECT_EQ(stats.load_reports, 30u);  // one per call, in its trailer
  EXPECT_EQ(stats.refused_load_reports, 0u);
  for (const auto& b : stats.backends) {
    if (b.picks == 0) continue;
    EXPECT_GE(b.report_age_ms, 0) << b.address;
    EXPECT_EQ(b.reported_load, 1u) << b.address;  // the call itself
  }
  // Out of band only: every backend reports, called or not.
  Client oob(set.target(),
             LbConfig("bounded_load_rendezvous",
                      R"("serverLoad":{"outOfBandInterval":"0.01s"})"),
             "reports-oob");
  ASSERT_EQ(oob.Call("user-1", Calling()).status.error_code(),
            grpc::StatusCode::OK);
  EXPECT_TRUE(WaitFor([] {
    const grpc_lb::ChannelStats s = StatsFor("reports-oob");
    if (s.load_reports < 10) return false;
    for (const auto& b : s.backends) {
      if (b.report_age_ms < 0) return false;
    }
    return true;
  }));
}

}  // namespace
}  // namespace poise::grpc_lb
