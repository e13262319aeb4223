// Zones of DNS-named backends (issue 38) against dnsmasq: one SRV name lists
// the backends of two zones, and zoneByIdentitySuffix gives each its zone by
// the end of its poise-srv identity ("target:port"), without listing pods.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend.h"
#include "poise/grpc_lb.h"
#include "poise/rendezvous.h"
#include "test/support/dns_server.h"
#include "test/support/e2e_harness.h"

namespace poise::grpc_lb {
namespace {

using example::Backend;
using test_support::CallOptions;
using test_support::Client;
using test_support::DnsmasqServer;
using test_support::DnsZone;
using test_support::kHeader;
using test_support::StatsFor;
using test_support::WaitFor;

// One pod: its backend, its DNS name and its zone.
struct Pod {
  std::unique_ptr<Backend> backend;
  std::string host;  // "a0.zone-a.test"
  std::string zone;
  std::string identity() const {
    return absl::StrCat(host, ":", backend->port());
  }
};

CallOptions Calling() {
  CallOptions options;
  options.deadline = std::chrono::seconds(20);
  return options;
}

// The key's owner among the pods `admitted` picks, by their identities.
template <typename Admitted>
std::string OwnerAmong(const std::vector<Pod>& pods, const std::string& key,
                       Admitted admitted) {
  std::vector<std::string> ids;
  std::vector<size_t> index;
  for (size_t i = 0; i < pods.size(); ++i) {
    if (!admitted(pods[i])) continue;
    ids.push_back(pods[i].identity());
    index.push_back(i);
  }
  std::vector<Candidate> candidates;
  for (const std::string& id : ids) candidates.push_back({id, 1, true});
  return pods[index[WeightedRendezvous::Pick(key, candidates).value()]]
      .backend->id();
}

TEST(ZonesDnsE2E, AnSrvNamesZonesComeFromTheIdentitySuffix) {
  POISE_REQUIRE_DNSMASQ();
  // Four pods on one port (as a StatefulSet's are), each on its own
  // loopback address: two in zone a, two in zone b.
  const std::vector<std::pair<std::string, std::string>> names = {
      {"a0", "a"}, {"a1", "a"}, {"b0", "b"}, {"b1", "b"}};
  // The port is the first pod's (port 0: the kernel's choice); should
  // another process hold it on a later address, all start again.
  std::vector<Pod> pods;
  int port = 0;
  for (int attempt = 0; attempt < 20 && pods.size() < names.size(); ++attempt) {
    pods.clear();  // stops any started
    port = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      Pod pod{std::make_unique<Backend>(names[i].first, kHeader),
              absl::StrCat(names[i].first, ".zone-", names[i].second, ".test"),
              names[i].second};
      if (!pod.backend->StartOn(absl::StrCat("127.0.0.", 2 + i), port).ok()) {
        break;
      }
      port = pod.backend->port();
      pods.push_back(std::move(pod));
    }
  }
  ASSERT_EQ(pods.size(), names.size()) << "no port free on every address";
  DnsZone records;
  for (size_t i = 0; i < pods.size(); ++i) {
    records.Host(pods[i].host, absl::StrCat("127.0.0.", 2 + i));
    records.Srv("_grpc._tcp.cache.test", pods[i].host,
                static_cast<uint16_t>(port));
  }
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(records));
  const std::string config = test_support::LbConfig(
      "weighted_rendezvous",
      absl::StrCat(R"("zoneByIdentitySuffix":[)", R"({"suffix":".zone-a.test:)",
                   port, R"(","zone":"a"},)", R"({"suffix":".zone-b.test:)",
                   port, R"(","zone":"b"}])"));
  const std::string target =
      absl::StrCat("poise-srv://", dns.authority(), "/_grpc._tcp.cache.test");
  grpc::ChannelArguments in_b_args;
  in_b_args.SetString(kLocalZoneArg, "b");
  Client in_b(target, config, "dns-zone-b", in_b_args);
  Client nowhere(target, config, "dns-zone-none");
  std::vector<std::string> keys;
  for (int k = 0; k < 100; ++k) keys.push_back(absl::StrCat("dns-", k));
  // Once every pod is READY: b's client on each key's owner in zone b, the
  // other on its owner over every pod.
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const std::string& key : keys) {
          const std::string in_zone =
              OwnerAmong(pods, key, [](const Pod& p) { return p.zone == "b"; });
          if (in_b.Call(key, Calling()).ServedBy() != in_zone) return false;
        }
        return true;
      },
      std::chrono::seconds(20), std::chrono::milliseconds(20)));
  size_t global = 0;
  for (const std::string& key : keys) {
    const std::string owner =
        OwnerAmong(pods, key, [](const Pod&) { return true; });
    global += nowhere.Call(key, Calling()).ServedBy() == owner ? 1 : 0;
  }
  EXPECT_EQ(global, keys.size());
  EXPECT_EQ(StatsFor("dns-zone-b").zone_out, 0u);
  EXPECT_GE(StatsFor("dns-zone-b").zone_kept, keys.size());
  EXPECT_EQ(StatsFor("dns-zone-none").zone_kept, 0u);
  // Zone b's pods stop: its keys go to their next READY choice, in zone a.
  for (Pod& p : pods) {
    if (p.zone == "b") p.backend->Stop();
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const std::string& key : keys) {
          const std::string next =
              OwnerAmong(pods, key, [](const Pod& p) { return p.zone == "a"; });
          if (in_b.Call(key, Calling()).ServedBy() != next) return false;
        }
        return true;
      },
      std::chrono::seconds(30), std::chrono::milliseconds(20)));
  EXPECT_GT(StatsFor("dns-zone-b").zone_out, 0u);
}

}  // namespace
}  // namespace poise::grpc_lb
