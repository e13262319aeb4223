// The poise-dns and poise-srv resolvers against a real DNS server (dnsmasq)
// and real backends on distinct loopback addresses. Every scenario compares
// the serving backend of each key with the core's prediction over the
// identities (WeightedRendezvous::Pick over "host:port").
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend.h"
#include "poise/grpc_lb.h"
#include "poise/rendezvous.h"
#include "src/dns/lookup.h"
#include "test/support/dns_pods.h"
#include "test/support/dns_server.h"
#include "test/support/e2e_harness.h"

namespace poise::test_support {
namespace {

using example::Backend;
using grpc_lb::kDnsRefreshIntervalArg;

constexpr int kKeys = 240;
constexpr int kThreads = 4;

// key -> the id of the backend that owns it over the pods' identities
// ("web-0.web.test:port"), or with `by_address` over their addresses
// ("127.0.0.2:port": what address identities would do), pod i of weight
// weights[i] (1 where none is given).
std::map<std::string, std::string> Predict(
    const std::vector<Pod>& pods, const std::vector<uint32_t>& weights = {},
    bool by_address = false) {
  std::vector<std::string> names;
  names.reserve(pods.size());
  for (const Pod& pod : pods) {
    names.push_back(by_address ? pod.backend->address() : pod.identity());
  }
  std::vector<Candidate> candidates;
  candidates.reserve(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    candidates.push_back({names[i], i < weights.size() ? weights[i] : 1, true});
  }
  std::map<std::string, std::string> owner;
  for (int k = 0; k < kKeys; ++k) {
    const std::string key = absl::StrCat("key-", k);
    owner[key] =
        pods[WeightedRendezvous::Pick(key, candidates).value()].backend->id();
  }
  return owner;
}

// The keys `owners` gives to backend `id`.
std::set<std::string> KeysOf(const std::map<std::string, std::string>& owners,
                             const std::string& id) {
  std::set<std::string> keys;
  for (const auto& [key, owner] : owners) {
    if (owner == id) keys.insert(key);
  }
  return keys;
}

// pods[i] for each i of `which`, moved out of `pods` (still serving).
std::vector<Pod> TakePods(std::vector<Pod>& pods,
                          std::initializer_list<size_t> which) {
  std::vector<Pod> taken;
  for (const size_t i : which) {
    taken.push_back({pods[i].name, std::move(pods[i].backend)});
  }
  return taken;
}

bool WaitForBackendCount(const std::string& label, size_t n) {
  return WaitFor([&] { return StatsFor(label).backends.size() == n; },
                 std::chrono::seconds(10));
}

// Every key once, from kThreads client threads: key -> serving backend id.
std::map<std::string, std::string> Route(Client& client) {
  std::mutex mu;
  std::map<std::string, std::string> served;
  std::atomic<int> next{0};
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int k = next++; k < kKeys; k = next++) {
        const std::string key = absl::StrCat("key-", k);
        CallOptions options;
        options.deadline = std::chrono::seconds(5);
        const std::string by = client.Call(key, options).ServedBy();
        const std::lock_guard<std::mutex> lock(mu);
        served[key] = by;
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return served;
}

int Differences(const std::map<std::string, std::string>& a,
                const std::map<std::string, std::string>& b,
                std::set<std::string>* keys = nullptr) {
  int n = 0;
  for (const auto& [key, by] : a) {
    auto it = b.find(key);
    if (it == b.end() || it->second != by) {
      ++n;
      if (keys != nullptr) keys->insert(key);
    }
  }
  return n;
}

grpc::ChannelArguments FastRefresh(int refresh_ms) {
  grpc::ChannelArguments args;
  args.SetInt(kDnsRefreshIntervalArg, refresh_ms);
  args.SetInt(GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS, 100);
  args.SetInt(GRPC_ARG_DNS_ARES_QUERY_TIMEOUT_MS, 300);
  return args;
}

bool ServesPrediction(Client& client,
                      const std::map<std::string, std::string>& predicted) {
  return WaitFor([&] { return Differences(Route(client), predicted) == 0; },
                 std::chrono::seconds(15), std::chrono::milliseconds(50));
}

TEST(DnsResolverE2e, PodRestartKeepsEveryKeyOnItsIdentity) {
  POISE_REQUIRE_DNSMASQ();
  std::vector<Pod> pods = StartPods(3);
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(ZoneOf(pods, false)));
  const std::string label = "dns-restart";
  Client client(DnsTarget(dns, pods), LbConfig("weighted_rendezvous"), label,
                FastRefresh(300));
  const auto predicted = Predict(pods);
  ASSERT_TRUE(ServesPrediction(client, predicted));
  const auto before = Route(client);
  ASSERT_EQ(Differences(before, predicted), 0);
  const auto by_address_before = Predict(pods, {}, true);

  // web-1 dies: only its own keys move.
  Backend& web1 = *pods[1].backend;
  const int port = web1.port();
  web1.Stop();
  std::map<std::string, std::string> down;
  ASSERT_TRUE(WaitFor(
      [&] {
        down = Route(client);
        for (const auto& [key, owner] : predicted) {
          if (owner == "web-1" && down[key] == "web-1") return false;
          if (down[key].rfind("error:", 0) == 0) return false;
        }
        return true;
      },
      std::chrono::seconds(15), std::chrono::milliseconds(50)));
  std::set<std::string> moved;
  Differences(down, before, &moved);
  const auto own = static_cast<int>(KeysOf(predicted, "web-1").size());
  int others_moved = 0;
  for (const auto& key : moved) others_moved += predicted.at(key) != "web-1";
  EXPECT_EQ(others_moved, 0);
  EXPECT_EQ(static_cast<int>(moved.size()), own);

  // It comes back as a pod does: same name and port, another IP.
  ASSERT_TRUE(web1.StartOn("127.0.0.5", port).ok());
  ASSERT_TRUE(dns.SetRecords(ZoneOf(pods, false)));
  ASSERT_TRUE(ServesPrediction(client, predicted));
  const auto after = Route(client);
  EXPECT_EQ(Differences(after, before), 0);
  bool new_address = false;
  for (const auto& b : StatsFor(label).backends) {
    if (b.identity == pods[1].identity()) {
      new_address = b.address == absl::StrCat("127.0.0.5:", port);
    }
  }
  EXPECT_TRUE(new_address);
  EXPECT_TRUE(WaitFor([&] { return TotalInFlight(label) == 0; }));
  std::printf(
      "[ restart ] %d keys, web-1 owns %d: %zu moved while down (%d of "
      "other backends), %d differ after it returned on 127.0.0.5 (address "
      "identities would have moved %d)\n",
      kKeys, own, moved.size(), others_moved, Differences(after, before),
      Differences(Predict(pods, {}, true), by_address_before));
}

TEST(DnsResolverE2e, SrvScaleOutFoundByPeriodicRefresh) {
  POISE_REQUIRE_DNSMASQ();
  std::vector<Pod> pods = StartPods(4);
  std::vector<Pod> three = TakePods(pods, {0, 1, 2});
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(ZoneOf(three, true)));
  const std::string label = "srv-scale-out";
  Client client(
      absl::StrCat("poise-srv://", dns.authority(), "/_grpc._tcp.web.test"),
      LbConfig("weighted_rendezvous"), label, FastRefresh(300));
  const auto predicted3 = Predict(three);
  ASSERT_TRUE(ServesPrediction(client, predicted3));
  const auto before = Route(client);

  std::vector<Pod> four = std::move(three);
  four.push_back(std::move(pods[3]));
  ASSERT_TRUE(dns.SetRecords(ZoneOf(four, true)));
  ASSERT_TRUE(WaitForBackendCount(label, 4));
  const auto predicted4 = Predict(four);
  ASSERT_TRUE(ServesPrediction(client, predicted4));
  std::set<std::string> moved;
  const int n = Differences(Route(client), before, &moved);
  const std::set<std::string> expected = KeysOf(predicted4, "web-3");
  EXPECT_EQ(moved, expected);
  EXPECT_TRUE(WaitFor([&] { return TotalInFlight(label) == 0; }));
  std::printf("[ scale-out ] %d keys: %d moved, %zu predicted (to web-3)\n",
              kKeys, n, expected.size());
}

TEST(DnsResolverE2e, SrvScaleInMovesOnlyTheRemovedIdentitysKeys) {
  POISE_REQUIRE_DNSMASQ();
  std::vector<Pod> pods = StartPods(4);
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(ZoneOf(pods, true)));
  const std::string label = "srv-scale-in";
  Client client(
      absl::StrCat("poise-srv://", dns.authority(), "/_grpc._tcp.web.test"),
      LbConfig("weighted_rendezvous"), label, FastRefresh(300));
  ASSERT_TRUE(ServesPrediction(client, Predict(pods)));
  const auto before = Route(client);
  const std::vector<Pod> three = TakePods(pods, {0, 1, 3});
  ASSERT_TRUE(dns.SetRecords(ZoneOf(three, true)));  // web-2 leaves the SRV
  ASSERT_TRUE(WaitForBackendCount(label, 3));
  ASSERT_TRUE(ServesPrediction(client, Predict(three)));
  std::set<std::string> moved;
  const int n = Differences(Route(client), before, &moved);
  const std::set<std::string> expected = KeysOf(before, "web-2");
  EXPECT_EQ(moved, expected);
  EXPECT_TRUE(WaitFor([&] { return TotalInFlight(label) == 0; }));
  std::printf("[ scale-in ] %d keys: %d moved, %zu predicted (web-2's)\n",
              kKeys, n, expected.size());
}

TEST(DnsResolverE2e, NameThatStopsResolvingDropsOnlyItsBackend) {
  POISE_REQUIRE_DNSMASQ();
  std::vector<Pod> pods = StartPods(3);
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(ZoneOf(pods, false)));
  const std::string label = "dns-name-gone";
  Client client(DnsTarget(dns, pods), LbConfig("weighted_rendezvous"), label,
                FastRefresh(300));
  ASSERT_TRUE(ServesPrediction(client, Predict(pods)));
  const auto before = Route(client);
  const std::vector<Pod> two = TakePods(pods, {0, 1});
  ASSERT_TRUE(dns.SetRecords(ZoneOf(two, false)));  // web-2: NXDOMAIN
  ASSERT_TRUE(WaitForBackendCount(label, 2));
  ASSERT_TRUE(ServesPrediction(client, Predict(two)));
  std::set<std::string> moved;
  Differences(Route(client), before, &moved);
  for (const auto& key : moved) EXPECT_EQ(before.at(key), "web-2") << key;
  EXPECT_TRUE(WaitFor([&] { return TotalInFlight(label) == 0; }));
}

TEST(DnsResolverE2e, SilentDnsServerKeepsTheLastGoodList) {
  POISE_REQUIRE_DNSMASQ();
  std::vector<Pod> pods = StartPods(3);
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(ZoneOf(pods, true)));
  const std::string label = "dns-paused";
  Client client(
      absl::StrCat("poise-srv://", dns.authority(), "/_grpc._tcp.web.test"),
      LbConfig("weighted_rendezvous"), label, FastRefresh(200));
  const auto predicted = Predict(pods);
  ASSERT_TRUE(ServesPrediction(client, predicted));
  ASSERT_TRUE(dns.Pause());
  // Several refreshes time out (300 ms each) while the load runs.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < until) {
    EXPECT_EQ(Differences(Route(client), predicted), 0);
    EXPECT_EQ(client.channel()->GetState(false), GRPC_CHANNEL_READY);
  }
  EXPECT_EQ(StatsFor(label).backends.size(), 3U);
  ASSERT_TRUE(dns.Resume());
  ASSERT_TRUE(dns.Stop());  // refused: still the last good list
  EXPECT_EQ(Differences(Route(client), predicted), 0);
  EXPECT_EQ(client.channel()->GetState(false), GRPC_CHANNEL_READY);
  EXPECT_TRUE(WaitFor([&] { return TotalInFlight(label) == 0; }));
}

// Without a DNS server in the target, A/AAAA go through gRPC's own resolver
// interface (the system's configuration; here localhost). gRPC's c-ares
// resolver lists ::1 for localhost as well (RFC 6761) and sorts the
// addresses (RFC 6724), so the backend listens on both loopback addresses.
TEST(DnsResolverE2e, SystemResolverNamesTheAddressByItsHost) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo("localhost", nullptr, &hints, &found) != 0) {
    GTEST_SKIP() << "localhost does not resolve here";
  }
  freeaddrinfo(found);
  Backend ipv4("local", kHeader);
  ASSERT_TRUE(ipv4.Start().ok());
  Backend ipv6("local", kHeader);
  const bool has_ipv6 = ipv6.StartOn("[::1]", ipv4.port()).ok();
  const std::string label = "dns-system";
  Client client(absl::StrCat("poise-dns:///LocalHost:", ipv4.port()),
                LbConfig("weighted_rendezvous"), label);
  CallOptions options;
  options.deadline = std::chrono::seconds(5);
  EXPECT_EQ(client.Call("k", options).ServedBy(), "local");
  const auto stats = StatsFor(label);
  ASSERT_EQ(stats.backends.size(), 1U);
  EXPECT_EQ(stats.backends[0].identity,
            absl::StrCat("localhost:", ipv4.port()));
  const std::set<std::string> addresses = {
      ipv4.address(), has_ipv6 ? ipv6.address() : ipv4.address()};
  EXPECT_EQ(addresses.count(stats.backends[0].address), 1U)
      << stats.backends[0].address;
}

// Channels destroyed while their lookups run, at every point of a round: on
// a paused server (queries waiting), on a live one (answers racing the
// shutdown) and on the system path (gRPC's resolver). Under ASan this is the
// use-after-free check; every lookup is closed right after.
TEST(DnsResolverE2e, ChannelsDestroyedWhileTheirLookupsRun) {
  POISE_REQUIRE_DNSMASQ();
  std::vector<Pod> pods = StartPods(2);
  DnsmasqServer live;
  ASSERT_TRUE(live.Start(ZoneOf(pods, true)));
  DnsmasqServer paused;
  ASSERT_TRUE(paused.Start(ZoneOf(pods, true)));
  ASSERT_TRUE(paused.Pause());
  const std::vector<std::string> targets = {
      DnsTarget(live, pods),
      absl::StrCat("poise-srv://", live.authority(), "/_grpc._tcp.web.test"),
      DnsTarget(paused, pods),
      absl::StrCat("poise-srv://", paused.authority(), "/_grpc._tcp.web.test"),
      absl::StrCat("poise-dns:///localhost:", pods[0].backend->port()),
  };
  constexpr int kRounds = 20;
  for (int round = 0; round < kRounds; ++round) {
    for (const std::string& target : targets) {
      Client client(target, LbConfig("weighted_rendezvous"), "dns-churn",
                    FastRefresh(300));
      client.channel()->GetState(true);
      // From at once to well into the round.
      std::this_thread::sleep_for(std::chrono::microseconds(round * 250));
    }
  }
  EXPECT_TRUE(WaitFor([] { return dns::OpenLookupsForTesting() == 0; },
                      std::chrono::seconds(2), std::chrono::milliseconds(5)))
      << dns::OpenLookupsForTesting() << " lookups still open";
}

// A call that fails fast on a channel whose resolver failed.
std::string FailureOf(const std::string& target,
                      const grpc::ChannelArguments& args = {}) {
  Client client(target, LbConfig("weighted_rendezvous"), "dns-bad", args);
  CallOptions options;
  options.wait_for_ready = false;
  options.deadline = std::chrono::seconds(5);
  const CallOutcome out = client.Call("k", options);
  EXPECT_FALSE(out.status.ok()) << target;
  EXPECT_EQ(out.status.error_code(), grpc::StatusCode::UNAVAILABLE)
      << out.status.error_message();
  EXPECT_EQ(client.channel()->GetState(false), GRPC_CHANNEL_TRANSIENT_FAILURE);
  return out.status.error_message();
}

TEST(DnsResolverE2e, SrvNameWithoutRecordsIsAResolverError) {
  POISE_REQUIRE_DNSMASQ();
  std::vector<Pod> pods = StartPods(1);
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(ZoneOf(pods, true)));
  const std::string message = FailureOf(
      absl::StrCat("poise-srv://", dns.authority(), "/_grpc._tcp.none.test"),
      FastRefresh(300));
  EXPECT_NE(message.find("_grpc._tcp.none.test"), std::string::npos) << message;
  EXPECT_NE(message.find("no records"), std::string::npos) << message;
}

TEST(DnsResolverE2e, EveryNameFailingNamesTheNames) {
  POISE_REQUIRE_DNSMASQ();
  std::vector<Pod> pods = StartPods(1);
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(ZoneOf(pods, false)));
  const std::string message =
      FailureOf(absl::StrCat("poise-dns://", dns.authority(),
                             "/gone-a.test:1,gone-b.test:2"),
                FastRefresh(300));
  EXPECT_NE(message.find("gone-a.test:1"), std::string::npos) << message;
  EXPECT_NE(message.find("gone-b.test:2"), std::string::npos) << message;
}

// Thirty names that do not resolve: the failure names the first ten and
// counts the rest, so each failed call carries a short message.
TEST(DnsResolverE2e, ManyFailingNamesAreCountedNotListed) {
  POISE_REQUIRE_DNSMASQ();
  std::vector<Pod> pods = StartPods(1);
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(ZoneOf(pods, false)));
  std::string target = absl::StrCat("poise-dns://", dns.authority(), "/");
  for (int i = 0; i < 30; ++i) {
    absl::StrAppend(&target, i ? "," : "", "gone-", i, ".test:1");
  }
  const std::string message = FailureOf(target, FastRefresh(300));
  EXPECT_NE(message.find("and 20 more"), std::string::npos) << message;
  EXPECT_EQ(message.find("gone-29.test:1"), std::string::npos) << message;
  EXPECT_LT(message.size(), 600u) << message;
}

// kSrvWeightsArg: poise-srv takes the SRV records' weights (weight 0:
// defaultWeight); without it every pod has defaultWeight.
TEST(DnsResolverE2e, SrvWeightsAreTakenWhenAsked) {
  POISE_REQUIRE_DNSMASQ();
  std::vector<Pod> pods = StartPods(3);
  const uint16_t srv_weights[] = {1, 3, 0};
  DnsZone zone;
  for (size_t i = 0; i < pods.size(); ++i) {
    zone.Host(pods[i].name, pods[i].backend->ip());
    zone.Srv("_grpc._tcp.web.test", pods[i].name,
             static_cast<uint16_t>(pods[i].backend->port()), 0, srv_weights[i]);
  }
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(zone));
  const std::string target =
      absl::StrCat("poise-srv://", dns.authority(), "/_grpc._tcp.web.test");
  for (const bool asked : {false, true}) {
    const std::string label = asked ? "srv-weights" : "srv-no-weights";
    grpc::ChannelArguments args = FastRefresh(300);
    if (asked) args.SetInt(grpc_lb::kSrvWeightsArg, 1);
    Client client(target,
                  LbConfig("weighted_rendezvous", R"("defaultWeight":2)"),
                  label, args);
    std::vector<uint32_t> weights;
    for (const uint16_t w : srv_weights) {
      weights.push_back(asked && w > 0 ? w : 2u);
    }
    ASSERT_TRUE(ServesPrediction(client, Predict(pods, weights))) << label;
    for (const grpc_lb::BackendStats& b : StatsFor(label).backends) {
      for (size_t i = 0; i < pods.size(); ++i) {
        if (b.identity == pods[i].identity()) {
          EXPECT_EQ(b.weight, weights[i]) << label << " " << b.identity;
        }
      }
    }
  }
}

// An SRV record with port 0 names no backend (nothing listens on port 0):
// it is left out, the other records serve.
TEST(DnsResolverE2e, SrvRecordWithPortZeroIsNotABackend) {
  POISE_REQUIRE_DNSMASQ();
  std::vector<Pod> pods = StartPods(2);
  DnsZone zone = ZoneOf(pods, true);
  zone.Host("web-9.web.test", "127.0.0.9");
  zone.Srv("_grpc._tcp.web.test", "web-9.web.test", 0);
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(zone));
  const std::string label = "srv-port-zero";
  Client client(
      absl::StrCat("poise-srv://", dns.authority(), "/_grpc._tcp.web.test"),
      LbConfig("weighted_rendezvous"), label, FastRefresh(300));
  ASSERT_TRUE(ServesPrediction(client, Predict(pods)));
  EXPECT_EQ(StatsFor(label).backends.size(), 2u);
}

TEST(DnsResolverE2e, BadTargetsNameThePart) {
  struct Case {
    std::string target;
    std::string part;
  };
  const std::vector<Case> cases = {
      {"poise-dns:///web-0.web.test", "missing port"},
      {"poise-dns:///a.test:1,,b.test:2", "name 2 of 3 is empty"},
      {"poise-dns://no-such-server:x/a.test:1", "bad authority"},
      {"poise-srv:///", "no SRV name"},
  };
  for (const Case& c : cases) {
    const absl::Status status = grpc_lb::ValidateTarget(c.target);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.target;
    EXPECT_NE(status.message().find(c.part), std::string::npos) << status;
    const std::string message = FailureOf(c.target);
    EXPECT_NE(message.find(c.part), std::string::npos) << message;
  }
  EXPECT_TRUE(grpc_lb::ValidateTarget("poise-dns:///a.test:1,B.test:2").ok());
  EXPECT_TRUE(
      grpc_lb::ValidateTarget("poise-srv://127.0.0.1:5353/_grpc._tcp.w.t")
          .ok());
}

// endpoints[] entries by identity alone give DNS-named backends weights that
// follow the name, whatever address it resolves to.
TEST(DnsResolverE2e, EndpointsByIdentityWeighDnsNamedBackends) {
  POISE_REQUIRE_DNSMASQ();
  std::vector<Pod> pods = StartPods(2);
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(ZoneOf(pods, true)));
  const std::string label = "dns-identity-weights";
  Client client(
      absl::StrCat("poise-srv://", dns.authority(), "/_grpc._tcp.web.test"),
      LbConfig("weighted_rendezvous",
               absl::StrCat(R"("endpoints":[{"identity":")", pods[1].identity(),
                            R"(","weight":3}])")),
      label, FastRefresh(300));
  ASSERT_TRUE(ServesPrediction(client, Predict(pods, {1, 3})));
  for (const grpc_lb::BackendStats& b : StatsFor(label).backends) {
    EXPECT_EQ(b.weight, b.identity == pods[1].identity() ? 3u : 1u)
        << b.identity;
  }
}

// Names sharing one address (a second A record of a pod, and a CNAME beside
// its target) are a backend each: every name's keys go to that address as
// the core predicts over the names alone, and the stats list every name at
// the shared address.
TEST(DnsResolverE2e, NamesSharingAnAddressAreABackendEach) {
  POISE_REQUIRE_DNSMASQ();
  std::vector<Pod> pods = StartPods(2);
  DnsZone zone = ZoneOf(pods, false);
  zone.Host("web-0b.web.test", pods[0].backend->ip());
  zone.Cname("cache.web.test", pods[0].name);
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(zone));
  const std::string port0 = absl::StrCat(":", pods[0].backend->port());
  // Each name of the target and the pod it resolves to.
  const std::vector<std::pair<std::string, size_t>> names = {
      {pods[0].identity(), 0},
      {"web-0b.web.test" + port0, 0},
      {"cache.web.test" + port0, 0},
      {pods[1].identity(), 1}};
  std::string target = absl::StrCat("poise-dns://", dns.authority(), "/");
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < names.size(); ++i) {
    absl::StrAppend(&target, i == 0 ? "" : ",", names[i].first);
    candidates.push_back({names[i].first, 1, true});
  }
  // What keeping only the address's first name would do: over the pods'
  // first names alone.
  const std::map<std::string, std::string> first_names_only = Predict(pods);
  std::map<std::string, std::string> predicted;
  int of_other_names = 0;
  for (int k = 0; k < kKeys; ++k) {
    const std::string key = absl::StrCat("key-", k);
    const size_t owner = WeightedRendezvous::Pick(key, candidates).value();
    predicted[key] = pods[names[owner].second].backend->id();
    of_other_names += owner == 1 || owner == 2 ? 1 : 0;
  }
  const int elsewhere = Differences(predicted, first_names_only);
  EXPECT_GT(of_other_names, 0);
  std::printf(
      "[ shared address ] %d keys: %d owned by web-0b or the CNAME; keeping "
      "only web-0 would send %d of them to web-1\n",
      kKeys, of_other_names, elsewhere);
  const std::string label = "dns-shared-address";
  Client client(target, LbConfig("weighted_rendezvous"), label,
                FastRefresh(300));
  ASSERT_TRUE(ServesPrediction(client, predicted));
  const grpc_lb::ChannelStats stats = StatsFor(label);
  ASSERT_EQ(stats.backends.size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(stats.backends[i].identity, names[i].first);
    EXPECT_EQ(stats.backends[i].address,
              pods[names[i].second].backend->address());
  }
  EXPECT_TRUE(WaitFor([&] { return TotalInFlight(label) == 0; }));
}

// ---------------------------------------------------------------------------
// TLS: certificates made at test time with openssl

// A CA and one server certificate for `names` (subjectAltName DNS entries),
// in a folder of their own; empty pems when openssl fails.
struct TestPki {
  std::string ca_pem;
  std::string key_pem;
  std::string cert_pem;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TestPki MakePki(const std::string& names) {
  char dir_template[] = "/tmp/poise-tls-XXXXXX";
  const char* dir = mkdtemp(dir_template);
  if (dir == nullptr) return {};
  const std::string d(dir);
  {
    std::ofstream ext(d + "/ext.cnf");
    ext << "subjectAltName=" << names << "\n";
  }
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 ";
  const std::string commands = absl::StrCat(
      "cd ", d, " && openssl req -x509", ec,
      "-nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=poise-test-ca",
      " && openssl req", ec,
      "-nodes -keyout server.key -out server.csr -subj /CN=poise-test-server",
      " && openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key",
      " -CAcreateserial -out server.pem -days 2 -extfile ext.cnf",
      " >openssl.log 2>&1");
  TestPki pki;
  if (std::system(commands.c_str()) == 0) {
    pki.ca_pem = ReadFile(d + "/ca.pem");
    pki.key_pem = ReadFile(d + "/server.key");
    pki.cert_pem = ReadFile(d + "/server.pem");
  } else {
    ADD_FAILURE() << "openssl: " << ReadFile(d + "/openssl.log");
  }
  std::system(absl::StrCat("rm -rf ", d).c_str());
  return pki;
}

// Pods web-0, web-1 serving TLS with `pki`'s certificate.
std::vector<Pod> StartTlsPods(const TestPki& pki) {
  grpc::SslServerCredentialsOptions options;
  options.pem_key_cert_pairs.push_back({pki.key_pem, pki.cert_pem});
  return StartPods(2, 2, grpc::SslServerCredentials(options));
}

std::shared_ptr<grpc::ChannelCredentials> TrustingCa(const TestPki& pki) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = pki.ca_pem;
  return grpc::SslCredentials(options);
}

// A StatefulSet's pods behind a headless Service, with one certificate for
// the Service's name and a wildcard of its domain (docs/dns.md, TLS): the
// channel's authority is the service name (poise-srv) or the first pod's
// name (poise-dns), both on the certificate, and keys route as without TLS.
TEST(DnsResolverE2e, TlsChecksTheServiceOrFirstPodName) {
  POISE_REQUIRE_DNSMASQ();
  const TestPki pki = MakePki("DNS:web.test,DNS:*.web.test");
  ASSERT_FALSE(pki.ca_pem.empty());
  std::vector<Pod> pods = StartTlsPods(pki);
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(ZoneOf(pods, true)));
  const auto predicted = Predict(pods);
  const std::string targets[] = {
      absl::StrCat("poise-srv://", dns.authority(), "/_grpc._tcp.web.test"),
      DnsTarget(dns, pods)};
  for (int t = 0; t < 2; ++t) {
    Client client(targets[t], LbConfig("weighted_rendezvous"),
                  absl::StrCat("tls-", t), FastRefresh(300), TrustingCa(pki));
    EXPECT_TRUE(ServesPrediction(client, predicted)) << targets[t];
    grpc::ClientContext context;
    context.AddMetadata(kHeader, "key-1");
    example::EchoRequest request;
    example::EchoReply reply;
    ASSERT_TRUE(client.stub().Echo(&context, request, &reply).ok());
    const std::shared_ptr<const grpc::AuthContext> auth =
        context.auth_context();
    ASSERT_NE(auth, nullptr);
    EXPECT_TRUE(auth->IsPeerAuthenticated()) << targets[t];
  }
}

// A certificate for the Service's name alone: poise-srv's authority is on
// it; poise-dns's (the first pod's name) is not, and its handshakes fail
// until the channel names the service with grpc.default_authority.
TEST(DnsResolverE2e, TlsWithOnlyTheServiceNameNeedsTheAuthorityForPoiseDns) {
  POISE_REQUIRE_DNSMASQ();
  const TestPki pki = MakePki("DNS:web.test");
  ASSERT_FALSE(pki.ca_pem.empty());
  std::vector<Pod> pods = StartTlsPods(pki);
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(ZoneOf(pods, true)));
  const auto predicted = Predict(pods);
  Client srv(
      absl::StrCat("poise-srv://", dns.authority(), "/_grpc._tcp.web.test"),
      LbConfig("weighted_rendezvous"), "tls-srv-only", FastRefresh(300),
      TrustingCa(pki));
  EXPECT_TRUE(ServesPrediction(srv, predicted));
  {
    Client named(DnsTarget(dns, pods), LbConfig("weighted_rendezvous"),
                 "tls-dns-first-pod", FastRefresh(300), TrustingCa(pki));
    CallOptions options;
    options.wait_for_ready = false;
    options.deadline = std::chrono::seconds(2);
    EXPECT_EQ(named.Call("key-1", options).status.error_code(),
              grpc::StatusCode::UNAVAILABLE);
  }
  grpc::ChannelArguments args = FastRefresh(300);
  args.SetString(GRPC_ARG_DEFAULT_AUTHORITY, "web.test");
  Client overridden(DnsTarget(dns, pods), LbConfig("weighted_rendezvous"),
                    "tls-dns-authority", args, TrustingCa(pki));
  EXPECT_TRUE(ServesPrediction(overridden, predicted));
}

// Other schemes are checked by gRPC's resolver for them, as a channel is.
TEST(DnsResolverE2e, OtherSchemesAreCheckedByTheirResolver) {
  for (const char* target : {"dns:///a.test:1", "ipv4:127.0.0.1:1,127.0.0.2:2",
                             "a.test:443", "unix:/tmp/poise.sock"}) {
    EXPECT_TRUE(grpc_lb::ValidateTarget(target).ok()) << target;
  }
  for (const char* target : {"ipv4:a.test:1", "ipv6:1.2.3.4:5"}) {
    const absl::Status status = grpc_lb::ValidateTarget(target);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << target;
    EXPECT_NE(status.message().find("no resolver of gRPC accepts it"),
              std::string::npos)
        << status;
  }
}

// ValidateTarget reads a target as the channel does: percent-encoded parts
// are decoded and a query is ignored, and the channel serves every one of
// these targets as the plain one.
TEST(DnsResolverE2e, PercentEncodedAndQueriedTargetsAreServedAndValid) {
  POISE_REQUIRE_DNSMASQ();
  std::vector<Pod> pods = StartPods(2);
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(ZoneOf(pods, true)));
  std::string encoded_authority = dns.authority();
  const size_t colon = encoded_authority.rfind(':');
  ASSERT_NE(colon, std::string::npos);
  encoded_authority.replace(colon, 1, "%3A");
  const std::string names =
      absl::StrCat(pods[0].identity(), ",", pods[1].identity());
  const std::string encoded_names = absl::StrCat(
      "web%2D0.web.test:", pods[0].backend->port(), ",", pods[1].identity());
  const auto predicted = Predict(pods);
  int i = 0;
  for (const std::string& target : {
           absl::StrCat("poise-dns://", dns.authority(), "/", encoded_names),
           absl::StrCat("poise-dns://", encoded_authority, "/", names),
           absl::StrCat("poise-dns://", dns.authority(), "/", names, "?x=1"),
           absl::StrCat("poise-srv://", dns.authority(),
                        "/_grpc._tcp.web%2Etest"),
       }) {
    EXPECT_TRUE(grpc_lb::ValidateTarget(target).ok())
        << target << ": " << grpc_lb::ValidateTarget(target);
    Client client(target, LbConfig("weighted_rendezvous"),
                  absl::StrCat("encoded-", i++));
    EXPECT_TRUE(ServesPrediction(client, predicted)) << target;
  }
}

}  // namespace
}  // namespace poise::test_support
