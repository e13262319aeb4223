// Zones end to end (issue 38): real grpc++ servers in three zones, each zone
// on a loopback address of its own (127.0.0.2, .3, .4; port 0), clients in
// two zones from one service config, the client's zone from the channel
// argument poise.local_zone.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backend.h"
#include "poise/grpc_lb.h"
#include "poise/rendezvous.h"
#include "test/support/e2e_harness.h"

namespace poise::grpc_lb {
namespace {

using example::Backend;
using test_support::CallOptions;
using test_support::Client;
using test_support::kHeader;
using test_support::StatsFor;
using test_support::WaitFor;

constexpr std::chrono::milliseconds kPoll{20};
constexpr size_t kPerZone = 3;
const std::vector<std::string> kZoneNames = {"a", "b", "c"};

CallOptions Calling(uint32_t delay_ms = 0) {
  CallOptions options;
  options.delay_ms = delay_ms;
  options.deadline = std::chrono::seconds(20);
  return options;
}

// Three backends per zone, zone z's on 127.0.0.(2 + z); their zones in the
// service config's endpoints[] by address.
class Zones {
 public:
  absl::Status Start() {
    for (size_t z = 0; z < kZoneNames.size(); ++z) {
      for (size_t i = 0; i < kPerZone; ++i) {
        auto b =
            std::make_unique<Backend>(absl::StrCat(kZoneNames[z], i), kHeader);
        const absl::Status started =
            b->StartOn(absl::StrCat("127.0.0.", 2 + z), 0);
        if (!started.ok()) return started;
        zone_of_.push_back(kZoneNames[z]);
        backends_.push_back(std::move(b));
      }
    }
    return absl::OkStatus();
  }
  std::string Target() const {
    std::vector<std::string> addresses;
    for (const auto& b : backends_) addresses.push_back(b->address());
    return absl::StrCat("ipv4:", absl::StrJoin(addresses, ","));
  }
  std::string ServiceConfig(const std::string& policy) const {
    std::vector<std::string> endpoints;
    for (size_t i = 0; i < backends_.size(); ++i) {
      endpoints.push_back(absl::StrCat(R"({"address":")",
                                       backends_[i]->address(), R"(","zone":")",
                                       zone_of_[i], R"("})"));
    }
    return test_support::LbConfig(
        policy,
        absl::StrCat(R"("endpoints":[)", absl::StrJoin(endpoints, ","), "]"));
  }
  // The key's owner among the backends `admitted` picks (identities: the
  // addresses), by the core.
  template <typename Admitted>
  std::string OwnerAmong(const std::string& key, Admitted admitted) const {
    std::vector<std::string> ids;
    std::vector<size_t> index;
    for (size_t i = 0; i < backends_.size(); ++i) {
      if (!admitted(i)) continue;
      ids.push_back(backends_[i]->address());
      index.push_back(i);
    }
    std::vector<Candidate> candidates;
    for (const std::string& id : ids) candidates.push_back({id, 1, true});
    return backends_[index[WeightedRendezvous::Pick(key, candidates).value()]]
        ->id();
  }
  std::string ZoneOwner(const std::string& key, const std::string& zone) const {
    return OwnerAmong(key, [&](size_t i) { return zone_of_[i] == zone; });
  }
  std::string GlobalOwner(const std::string& key) const {
    return OwnerAmong(key, [](size_t) { return true; });
  }
  size_t size() const { return backends_.size(); }
  Backend& backend(size_t i) { return *backends_[i]; }
  const std::string& zone_of(size_t i) const { return zone_of_[i]; }
  // The zone of the backend with this id ("" for none).
  std::string ZoneOfId(const std::string& id) const {
    for (size_t i = 0; i < backends_.size(); ++i) {
      if (backends_[i]->id() == id) return zone_of_[i];
    }
    return "";
  }

 private:
  std::vector<std::unique_ptr<Backend>> backends_;  // stopped when destroyed
  std::vector<std::string> zone_of_;
};

grpc::ChannelArguments InZone(const std::string& zone) {
  grpc::ChannelArguments args;
  if (!zone.empty()) args.SetString(kLocalZoneArg, zone);
  return args;
}

std::string Served(Client& client, const std::string& key) {
  return client.Call(key, Calling()).ServedBy();
}

TEST(ZonesE2E, IdleKeysGoToTheirZoneOwnerAndWithoutAZoneToTheirGlobalOwner) {
  Zones zones;
  ASSERT_TRUE(zones.Start().ok());
  for (const char* policy :
       {"weighted_rendezvous", "bounded_load_rendezvous"}) {
    const std::string config = zones.ServiceConfig(policy);
    Client in_a(zones.Target(), config, absl::StrCat("zone-a-", policy),
                InZone("a"));
    Client in_b(zones.Target(), config, absl::StrCat("zone-b-", policy),
                InZone("b"));
    Client nowhere(zones.Target(), config, absl::StrCat("no-zone-", policy),
                   InZone(""));
    for (int k = 0; k < 150; ++k) {
      const std::string key = absl::StrCat("idle-", k);
      EXPECT_EQ(Served(in_a, key), zones.ZoneOwner(key, "a")) << key;
      EXPECT_EQ(Served(in_b, key), zones.ZoneOwner(key, "b")) << key;
      EXPECT_EQ(Served(nowhere, key), zones.GlobalOwner(key)) << key;
    }
    const ChannelStats a = StatsFor(absl::StrCat("zone-a-", policy));
    EXPECT_EQ(a.zone_kept, 150u);
    EXPECT_EQ(a.zone_out, 0u);
    const ChannelStats none = StatsFor(absl::StrCat("no-zone-", policy));
    EXPECT_EQ(none.zone_kept + none.zone_out, 0u);
  }
}

TEST(ZonesE2E, AHotKeySpillsInsideItsZoneWithinTheZonesBound) {
  Zones zones;
  ASSERT_TRUE(zones.Start().ok());
  Client client(zones.Target(), zones.ServiceConfig("bounded_load_rendezvous"),
                "zone-hot", InZone("c"));
  // Zone c's backends READY first: its bound counts their READY weights.
  int n = 0;
  ASSERT_TRUE(WaitFor([&] {
    client.Call(absl::StrCat("warm-", n++), Calling());
    for (size_t i = 0; i < zones.size(); ++i) {
      if (zones.zone_of(i) == "c" && zones.backend(i).calls() == 0) {
        return false;
      }
    }
    return true;
  }));
  for (size_t i = 0; i < zones.size(); ++i) zones.backend(i).ResetCounters();
  // Nine calls of one key held at once: the zone's bound lets its owner
  // take at most ceil(1.5 (L_Z + 1) / 3) of them, the rest spill inside c.
  constexpr int kCalls = 9;
  std::vector<std::string> served(kCalls);
  std::vector<std::thread> threads;
  for (int t = 0; t < kCalls; ++t) {
    threads.emplace_back([&client, &served, t] {
      served[static_cast<size_t>(t)] =
          client.Call("hot", Calling(/*delay_ms=*/4000)).ServedBy();
    });
  }
  const bool all_held =
      WaitFor([&] { return StatsFor("zone-hot").scope_in_flight == kCalls; },
              std::chrono::seconds(20), kPoll);
  for (std::thread& t : threads) t.join();
  ASSERT_TRUE(all_held);
  std::set<std::string> distinct;
  for (const std::string& id : served) {
    EXPECT_EQ(zones.ZoneOfId(id), "c") << id;
    distinct.insert(id);
  }
  EXPECT_GE(distinct.size(), 2u);  // it spilled
  const ChannelStats stats = StatsFor("zone-hot");
  EXPECT_EQ(stats.zone_out, 0u);
  EXPECT_GE(stats.spills, 1u);
  for (size_t i = 0; i < zones.size(); ++i) {
    if (zones.zone_of(i) != "c") {
      EXPECT_EQ(zones.backend(i).calls(), 0u) << zones.backend(i).id();
      continue;
    }
    // L_Z reaches 8 before the last pick: ceil(1.5 * 9 / 3) = 5.
    EXPECT_LE(zones.backend(i).peak_in_flight(),
              static_cast<int64_t>(test_support::Bound(150, kCalls, 1, 3)))
        << zones.backend(i).id();
  }
}

TEST(ZonesE2E, AStoppedZonesKeysGoToTheirGlobalNextChoiceAndComeBack) {
  Zones zones;
  ASSERT_TRUE(zones.Start().ok());
  const std::string config = zones.ServiceConfig("weighted_rendezvous");
  Client in_a(zones.Target(), config, "zone-stop-a", InZone("a"));
  Client in_b(zones.Target(), config, "zone-stop-b", InZone("b"));
  std::vector<std::string> keys;
  std::map<std::string, std::string> a_before;
  std::map<std::string, std::string> b_before;
  for (int k = 0; k < 150; ++k) {
    keys.push_back(absl::StrCat("stop-", k));
    a_before[keys.back()] = Served(in_a, keys.back());
    b_before[keys.back()] = Served(in_b, keys.back());
    ASSERT_EQ(b_before[keys.back()], zones.ZoneOwner(keys.back(), "b"));
  }
  for (size_t i = 0; i < zones.size(); ++i) {
    if (zones.zone_of(i) == "b") zones.backend(i).Stop();
  }
  // Until the channel sees zone b fail: then every key of b's clients goes
  // to its first READY backend in its global order (zones a and c).
  const auto next_choice = [&](const std::string& key) {
    return zones.OwnerAmong(key,
                            [&](size_t i) { return zones.zone_of(i) != "b"; });
  };
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const std::string& key : keys) {
          if (Served(in_b, key) != next_choice(key)) return false;
        }
        return true;
      },
      std::chrono::seconds(30), kPoll));
  size_t a_moved = 0;
  for (const std::string& key : keys) {
    a_moved += Served(in_a, key) != a_before[key] ? 1 : 0;
  }
  EXPECT_EQ(a_moved, 0u);  // another zone's clients see no key move
  EXPECT_GT(StatsFor("zone-stop-b").zone_out, 0u);
  for (size_t i = 0; i < zones.size(); ++i) {
    if (zones.zone_of(i) == "b") {
      ASSERT_TRUE(zones.backend(i).Restart().ok());
    }
  }
  ASSERT_TRUE(WaitFor(
      [&] {
        for (const std::string& key : keys) {
          if (Served(in_b, key) != b_before[key]) return false;
        }
        return true;
      },
      std::chrono::seconds(40), kPoll));
  for (const std::string& key : keys) {
    EXPECT_EQ(Served(in_a, key), a_before[key]) << key;
  }
}

}  // namespace
}  // namespace poise::grpc_lb
