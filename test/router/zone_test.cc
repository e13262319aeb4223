// Zones (picker.h P8, backend_set.h B5, config.h C10) against the contract:
// a key's owner in the local zone is the zone's first backend in the key's
// global order (src/core/contract.h, K5), it leaves the zone only when the
// zone has no READY backend or none admitted, and without a local zone every
// pick is what it was without zones.
#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "poise/bound.h"
#include "src/core/contract.h"
#include "src/router/backend_set.h"
#include "src/router/config.h"
#include "src/router/explain.h"
#include "src/router/fleet_load.h"
#include "src/router/picker.h"
#include "test/router/router_test_util.h"

namespace poise::router::test {
namespace {

constexpr uint32_t kFactor = Config::kDefaultBalanceFactorPercent;

// Nine backends in three zones, of weights 1 to 3.
const std::vector<std::string> kZones = {"a", "b", "c", "a", "b",
                                         "c", "a", "b", "c"};
const std::vector<uint32_t> kWeights = {1, 2, 3, 2, 1, 1, 3, 1, 2};

std::string KeyOf(int i) { return "key-" + std::to_string(i); }

class ZoneTest : public ::testing::Test {
 protected:
  // The backends AddressOf(0..) with `zones` as their resolver attributes
  // (empty: none), the client in `local_zone`.
  void Build(std::optional<std::string> local_zone,
             std::vector<BackendState> states, bool bounded = false,
             const std::vector<std::string>& zones = kZones,
             const std::vector<uint32_t>& weights = kWeights) {
    Config config = ValidConfig(bounded);
    config.local_zone = std::move(local_zone);
    config.max_in_flight_per_backend = limit_;
    if (server_load_) config.server_load.emplace();
    ASSERT_TRUE(NormalizeAndValidate(config).empty());
    config_ = std::make_shared<const Config>(std::move(config));
    std::vector<ResolverEntry> entries;
    for (size_t i = 0; i < weights.size(); ++i) {
      entries.push_back(Entry(AddressOf(i), weights[i]));
      if (!zones.empty()) entries.back().zone = zones[i];
    }
    zones_ = zones;
    set_.Update(entries, *config_);
    states_ = std::move(states);
    stats_ = std::make_shared<PolicyStats>("test", "policy");
    picker_ = std::make_unique<Picker>(config_, set_.list(), states_, stats_);
  }
  PickOutcome Pick(std::string_view key, uint32_t previous_attempts = 0) {
    return picker_->Pick(PickRequest{key, previous_attempts});
  }
  static const PickOutcome::Complete* Completed(const PickOutcome& outcome) {
    return std::get_if<PickOutcome::Complete>(&outcome.result);
  }
  size_t PickedBackend(std::string_view key, uint32_t previous_attempts = 0) {
    const PickOutcome outcome = Pick(key, previous_attempts);
    const auto* c = Completed(outcome);
    EXPECT_NE(c, nullptr) << key;
    return c != nullptr ? c->backend : SIZE_MAX;
  }
  // The key's global order over the READY backends, by the contract.
  std::vector<size_t> ReadyOrder(std::string_view key) const {
    std::vector<contract::LoadedCandidate> loaded;
    for (size_t i = 0; i < set_.backends().size(); ++i) {
      loaded.push_back({std::string(set_.backends()[i].identity),
                        set_.backends()[i].weight, 0,
                        states_[i].routing == RoutingState::kReady});
    }
    std::vector<size_t> order;
    for (const contract::Ranked& r : contract::Order(key, loaded)) {
      order.push_back(r.index);
    }
    return order;
  }
  // That order restricted to `zone` (or to the backends outside it).
  std::vector<size_t> ZoneOrder(std::string_view key, const std::string& zone,
                                bool inside = true) const {
    std::vector<size_t> order;
    for (const size_t i : ReadyOrder(key)) {
      if ((zones_[i] == zone) == inside) order.push_back(i);
    }
    return order;
  }
  uint64_t InFlight(size_t i) const {
    return set_.backends()[i].cell->in_flight->Load();
  }

  std::optional<uint64_t> limit_;
  bool server_load_ = false;
  std::vector<std::string> zones_;
  std::shared_ptr<const Config> config_;
  BackendSet set_;
  std::vector<BackendState> states_;
  std::shared_ptr<PolicyStats> stats_;
  std::unique_ptr<Picker> picker_;
};

TEST(ZoneConfig, AZoneIsOneTo64PrintableCharactersAndErrorsNameTheField) {
  EXPECT_TRUE(IsValidZone("us-east-1a"));
  EXPECT_TRUE(IsValidZone(std::string(64, 'z')));
  EXPECT_TRUE(IsValidZone("zone with spaces ~"));
  EXPECT_FALSE(IsValidZone(""));
  EXPECT_FALSE(IsValidZone(std::string(65, 'z')));
  EXPECT_FALSE(IsValidZone("tab\there"));
  EXPECT_FALSE(IsValidZone("del\x7f"));
  EXPECT_FALSE(IsValidZone("\xC3\xBC"));  // printable, but not ASCII

  Config config = ValidConfig();
  config.local_zone = std::string(65, 'x');
  config.endpoints.resize(3);
  config.endpoints[0].address = "10.0.0.1:80";
  config.endpoints[0].zone = "a";
  config.endpoints[1].address = "10.0.0.2:80";
  config.endpoints[2].address = "10.0.0.3:80";
  config.endpoints[2].zone = "";
  const std::vector<ConfigError> errors = NormalizeAndValidate(config);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], (ConfigError{"endpoints[2].zone", kZoneRule}));
  EXPECT_EQ(errors[1], (ConfigError{"localZone", kZoneRule}));
}

TEST(ZoneBackendSet, TheEndpointsZoneThenAValidAttributeThenNone) {
  Config config = ValidConfig();
  config.endpoints.resize(2);
  config.endpoints[0].address = AddressOf(0);
  config.endpoints[0].zone = "from-config";
  config.endpoints[1].identity = "named";
  config.endpoints[1].zone = "by-identity";
  ASSERT_TRUE(NormalizeAndValidate(config).empty());
  std::vector<ResolverEntry> entries = {
      Entry(AddressOf(0)), Entry(AddressOf(1), std::nullopt, "named"),
      Entry(AddressOf(2)), Entry(AddressOf(3)), Entry(AddressOf(4))};
  entries[0].zone = "from-resolver";  // the config's comes first
  entries[2].zone = "from-resolver";
  entries[3].zone = std::string(65, 'x');  // not a zone: none
  BackendSet set;
  set.Update(entries, config);
  const BackendList& list = *set.list();
  ASSERT_EQ(list.backends.size(), 5u);
  EXPECT_EQ(list.zones, (std::vector<std::string>{"from-config", "by-identity",
                                                  "from-resolver"}));
  EXPECT_EQ(list.backends[0].zone, 0u);
  EXPECT_EQ(list.backends[1].zone, 1u);
  EXPECT_EQ(list.backends[2].zone, 2u);
  EXPECT_EQ(list.backends[3].zone, kNoZone);
  EXPECT_EQ(list.backends[4].zone, kNoZone);
  EXPECT_EQ(list.ZoneIndex("from-resolver"), 2u);
  EXPECT_EQ(list.ZoneIndex("elsewhere"), kNoZone);
}

TEST(ZoneBackendSet,
     AnIdentitySuffixGivesTheZoneAfterTheEndpointAndTheAttribute) {
  Config config = ValidConfig();
  config.zone_by_identity_suffix = {{".zone-a.test:80", "a"},
                                    {".test:80", "other"}};
  config.endpoints.resize(1);
  config.endpoints[0].identity = "x0.zone-a.test:80";
  config.endpoints[0].zone = "from-config";
  ASSERT_TRUE(NormalizeAndValidate(config).empty());
  std::vector<ResolverEntry> entries = {
      Entry(AddressOf(0), std::nullopt, "x0.zone-a.test:80"),
      Entry(AddressOf(1), std::nullopt, "x1.zone-a.test:80"),
      Entry(AddressOf(2), std::nullopt, "x2.zone-a.test:80"),
      Entry(AddressOf(3), std::nullopt, "y0.zone-b.test:80"),
      Entry(AddressOf(4), std::nullopt, "y0.zone-b.test:81")};
  entries[2].zone = "from-resolver";
  BackendSet set;
  set.Update(entries, config);
  const BackendList& list = *set.list();
  const auto zone_of = [&](size_t i) {
    const uint32_t z = list.backends[i].zone;
    return z == kNoZone ? std::string("(none)") : list.zones[z];
  };
  EXPECT_EQ(zone_of(0), "from-config");
  EXPECT_EQ(zone_of(1), "a");
  EXPECT_EQ(zone_of(2), "from-resolver");
  EXPECT_EQ(zone_of(3), "other");  // the first suffix that matches
  EXPECT_EQ(zone_of(4), "(none)");

  Config bad = ValidConfig();
  bad.zone_by_identity_suffix = {{"", "a"}, {".b", ""}};
  const std::vector<ConfigError> errors = NormalizeAndValidate(bad);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0].field, "zoneByIdentitySuffix[0].suffix");
  EXPECT_EQ(errors[1],
            (ConfigError{"zoneByIdentitySuffix[1].zone", kZoneRule}));
}

TEST_F(ZoneTest, EveryKeyGoesToItsZonesFirstBackendInItsGlobalOrder) {
  for (const bool bounded : {false, true}) {
    for (const char* zone : {"a", "b", "c"}) {
      Build(zone, States(9, RoutingState::kReady), bounded);
      for (int k = 0; k < 500; ++k) {
        const std::string key = KeyOf(k);
        const PickOutcome outcome = Pick(key);
        const auto* c = Completed(outcome);
        ASSERT_NE(c, nullptr);
        EXPECT_EQ(c->backend, ZoneOrder(key, zone).front()) << key;
        EXPECT_FALSE(c->spilled);
      }
      EXPECT_EQ(stats_->zone_kept.load(), 500u);
      EXPECT_EQ(stats_->zone_out.load(), 0u);
      EXPECT_EQ(stats_->spills.load(), 0u);
    }
  }
}

TEST_F(ZoneTest, WithoutALocalZoneOrWithNoBackendInItOwnersAreAsToday) {
  for (const bool bounded : {false, true}) {
    std::vector<size_t> today;
    Build(std::nullopt, States(9, RoutingState::kReady), bounded,
          /*zones=*/{});
    for (int k = 0; k < 2000; ++k) today.push_back(PickedBackend(KeyOf(k)));
    // The owner over every READY backend, as the contract states it.
    for (int k = 0; k < 2000; k += 97) {
      EXPECT_EQ(today[static_cast<size_t>(k)], ReadyOrder(KeyOf(k)).front());
    }
    // Zoned backends, no local zone; a local zone nobody is in.
    for (const std::optional<std::string>& local :
         {std::optional<std::string>(), std::optional<std::string>("d")}) {
      Build(local, States(9, RoutingState::kReady), bounded);
      size_t same = 0;
      for (int k = 0; k < 2000; ++k) {
        same += PickedBackend(KeyOf(k)) == today[static_cast<size_t>(k)];
      }
      EXPECT_EQ(same, 2000u);
      EXPECT_EQ(stats_->zone_kept.load() + stats_->zone_out.load(), 0u);
    }
  }
}

TEST_F(ZoneTest, AFailedZoneOwnerPassesOnlyItsKeysToTheZonesNextBackend) {
  Build("a", States(9, RoutingState::kReady));
  std::vector<size_t> before;
  for (int k = 0; k < 1000; ++k) before.push_back(PickedBackend(KeyOf(k)));
  // Backend 3 (zone a) fails.
  std::vector<BackendState> states = States(9, RoutingState::kReady);
  states[3].routing = RoutingState::kFailed;
  Build("a", states);
  size_t moved = 0;
  size_t of_backend_3 = 0;
  for (int k = 0; k < 1000; ++k) {
    const std::string key = KeyOf(k);
    const size_t now = PickedBackend(key);
    const size_t was = before[static_cast<size_t>(k)];
    of_backend_3 += was == 3;
    if (now == was) continue;
    ++moved;
    EXPECT_EQ(was, 3u) << key;                           // no other key moves
    EXPECT_EQ(now, ZoneOrder(key, "a").front()) << key;  // its next in a
    EXPECT_EQ(zones_[now], "a");
  }
  EXPECT_EQ(moved, of_backend_3);
  EXPECT_GT(moved, 100u);
  EXPECT_EQ(stats_->zone_out.load(), 0u);
}

TEST_F(ZoneTest, AZoneWithoutAReadyBackendSendsKeysToTheirGlobalOwner) {
  for (const bool bounded : {false, true}) {
    // Zone b down: its clients' keys go to their first READY backend
    // anywhere; zone a's clients see no key move; b's keys come back.
    std::vector<BackendState> b_down = States(9, RoutingState::kReady);
    for (size_t i = 0; i < 9; ++i) {
      if (kZones[i] == "b") {
        b_down[i].routing = RoutingState::kFailed;
      }
    }
    std::vector<size_t> b_up;
    std::vector<size_t> a_up;
    Build("b", States(9, RoutingState::kReady), bounded);
    for (int k = 0; k < 1000; ++k) b_up.push_back(PickedBackend(KeyOf(k)));
    Build("a", States(9, RoutingState::kReady), bounded);
    for (int k = 0; k < 1000; ++k) a_up.push_back(PickedBackend(KeyOf(k)));

    Build("b", b_down, bounded);
    for (int k = 0; k < 1000; ++k) {
      const std::string key = KeyOf(k);
      EXPECT_EQ(PickedBackend(key), ReadyOrder(key).front()) << key;
    }
    EXPECT_EQ(stats_->zone_out.load(), 1000u);
    Build("a", b_down, bounded);
    size_t a_moved = 0;
    for (int k = 0; k < 1000; ++k) {
      a_moved += PickedBackend(KeyOf(k)) != a_up[static_cast<size_t>(k)];
    }
    EXPECT_EQ(a_moved, 0u);
    Build("b", States(9, RoutingState::kReady), bounded);
    size_t back = 0;
    for (int k = 0; k < 1000; ++k) {
      back += PickedBackend(KeyOf(k)) == b_up[static_cast<size_t>(k)];
    }
    EXPECT_EQ(back, 1000u);
  }
}

TEST_F(ZoneTest, APendingZoneOwnerQueuesItsKeysAndNoOtherOwnerDoes) {
  std::vector<BackendState> states = States(9, RoutingState::kReady);
  states[0].routing = RoutingState::kPending;  // zone a
  states[1].routing = RoutingState::kPending;  // zone b
  Build("a", states);
  size_t queued = 0;
  for (int k = 0; k < 600; ++k) {
    const std::string key = KeyOf(k);
    // The zone's owner over every backend of a, pending ones included.
    std::vector<contract::LoadedCandidate> every;
    for (size_t i = 0; i < 9; ++i) {
      every.push_back(
          {std::string(set_.backends()[i].identity), kWeights[i], 0, true});
    }
    size_t zone_owner = SIZE_MAX;
    for (const contract::Ranked& r : contract::Order(key, every)) {
      if (kZones[r.index] == "a") {
        zone_owner = r.index;
        break;
      }
    }
    const PickOutcome outcome = Pick(key);
    if (zone_owner == 0) {
      EXPECT_TRUE(std::holds_alternative<PickOutcome::Queue>(outcome.result));
      ++queued;
    } else {
      const auto* c = Completed(outcome);
      ASSERT_NE(c, nullptr) << key;
      EXPECT_EQ(c->backend, zone_owner) << key;
    }
  }
  EXPECT_GT(queued, 50u);
}

TEST_F(ZoneTest, AHotKeySpillsInsideItsZoneByTheZonesBound) {
  Build("c", States(9, RoutingState::kReady), /*bounded=*/true);
  const std::string key = "hot";
  const std::vector<size_t> zone_order = ZoneOrder(key, "c");
  uint64_t zone_weight = 0;
  for (const size_t i : zone_order) zone_weight += kWeights[i];
  std::vector<PickOutcome> held;
  uint64_t spills = 0;
  for (int call = 0; call < 300; ++call) {
    uint64_t zone_total = 0;
    for (const size_t i : zone_order) zone_total += InFlight(i);
    // The first of the zone's order below ceil(f (L_Z + 1) w / (100 W_Z)).
    size_t expected = SIZE_MAX;
    for (const size_t i : zone_order) {
      if (UInt128{InFlight(i)} <
          contract::Capacity(kFactor, zone_total, kWeights[i], zone_weight)) {
        expected = i;
        break;
      }
    }
    ASSERT_NE(expected, SIZE_MAX);
    held.push_back(Pick(key));
    const auto* c = Completed(held.back());
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->backend, expected) << call;
    EXPECT_EQ(c->spilled, expected != zone_order.front()) << call;
    spills += expected != zone_order.front() ? 1 : 0;
  }
  EXPECT_EQ(stats_->zone_out.load(), 0u);
  EXPECT_EQ(stats_->zone_kept.load(), 300u);
  // The owner keeps about f w / (100 W_Z) of the calls: 75 % here.
  EXPECT_EQ(stats_->spills.load(), spills);
  EXPECT_GE(spills, 60u);
  EXPECT_LE(spills, 90u);
  // Every backend of the zone within its bound (+ 1: the call that took it
  // there was admitted below it).
  uint64_t zone_total = 0;
  for (const size_t i : zone_order) zone_total += InFlight(i);
  for (const size_t i : zone_order) {
    EXPECT_LE(UInt128{InFlight(i)},
              contract::Capacity(kFactor, zone_total, kWeights[i], zone_weight))
        << i;
  }
}

TEST_F(ZoneTest, AZoneAtTheHardLimitSendsItsCallsOutInKeyOrder) {
  limit_ = 2;
  Build("b", States(9, RoutingState::kReady), /*bounded=*/false);
  const std::string key = "k";
  const std::vector<size_t> inside = ZoneOrder(key, "b");
  const std::vector<size_t> outside = ZoneOrder(key, "b", false);
  std::vector<PickOutcome> held;
  // Two calls to each of b's backends in the key's order, then out.
  for (size_t call = 0; call < 2 * inside.size() + 4; ++call) {
    held.push_back(Pick(key));
    const auto* c = Completed(held.back());
    ASSERT_NE(c, nullptr);
    const size_t expected = call < 2 * inside.size()
                                ? inside[call / 2]
                                : outside[(call - 2 * inside.size()) / 2];
    EXPECT_EQ(c->backend, expected) << call;
  }
  EXPECT_EQ(stats_->zone_kept.load(), 2 * inside.size());
  EXPECT_EQ(stats_->zone_out.load(), 4u);
}

TEST_F(ZoneTest, ANextChoiceRetryTakesTheKthOfTheZoneThenOfTheOthers) {
  for (const bool bounded : {false, true}) {
    Build("a", States(9, RoutingState::kReady), bounded);
    for (int k = 0; k < 100; ++k) {
      const std::string key = KeyOf(k);
      std::vector<size_t> walk = ZoneOrder(key, "a");
      for (const size_t i : ZoneOrder(key, "a", false)) walk.push_back(i);
      for (uint32_t attempts = 1; attempts <= 11; ++attempts) {
        EXPECT_EQ(PickedBackend(key, attempts), walk[attempts % walk.size()])
            << key << " " << attempts;
      }
    }
  }
}

TEST(ZoneExplain, ShowsTheZonesOrderItsRuleAndWhyAKeyLeaves) {
  // b (zone z1) holds 5 calls: L_Z = 5, W_Z = 4, b's capacity
  // ceil(1.5 * 6 * 3 / 4) = 7, a's ceil(1.5 * 6 * 1 / 4) = 3.
  const std::vector<ExplainedBackend> backends = {
      {"a", 1, 0, "z1"}, {"b", 3, 5, "z1"}, {"c", 6, 0, "z2"}};
  std::vector<contract::LoadedCandidate> zone = {{"a", 1, 0, true},
                                                 {"b", 3, 5, true}};
  const std::vector<contract::Ranked> order =
      contract::Order("customer-42", zone);
  ASSERT_EQ(order.size(), 2u);
  const std::string first = zone[order[0].index].identity;
  const std::string second = zone[order[1].index].identity;
  EXPECT_EQ(
      ExplainZoneMembers("customer-42", kFactor, backends, "z1", true, true),
      "\"local_zone\":\"z1\",\"zone_order\":[{\"identity\":\"" + first +
          "\",\"capacity\":" + (first == "b" ? "7" : "3") +
          "},{\"identity\":\"" + second + "\",\"capacity\":" +
          (second == "b" ? "7" : "3") + "}],\"zone_owner\":\"" + first +
          "\",\"zone_selection\":\"" + first + "\",\"left_zone\":null");
  EXPECT_NE(
      ExplainZoneMembers("k", kFactor, {{"c", 6, 0, "z2"}}, "z1", true, true)
          .find("\"zone_owner\":null,\"zone_selection\":null,"
                "\"left_zone\":\"no READY backend in the zone"),
      std::string::npos);
  EXPECT_NE(
      ExplainZoneMembers("k", kFactor, {{"c", 6, 0, "z2"}}, "z1", false, true)
          .find("\"left_zone\":\"no listed backend is in the zone"),
      std::string::npos);
}

// serverLoad: the zone's backends must also have room by the fleet's bound.
std::atomic<int64_t> fake_now_ns{1'000'000'000};
int64_t FakeNow() { return fake_now_ns.load(); }
// The fleet's clock is FakeNow while it lives.
struct FakeFleetClock {
  FakeFleetClock() { SetFleetClockForTesting(&FakeNow); }
  ~FakeFleetClock() { SetFleetClockForTesting(nullptr); }
};

TEST_F(ZoneTest, UnderServerLoadAZoneOverTheFleetsBoundSendsItsExcessOut) {
  const FakeFleetClock clock;
  server_load_ = true;
  const std::vector<uint32_t> ones(9, 1);
  Build("a", States(9, RoutingState::kReady), /*bounded=*/true, kZones, ones);
  // Zone a's backends report 40 calls each from other clients, the others
  // none: the fleet's L is about 120, every bound about 20.
  for (size_t i = 0; i < 9; ++i) {
    BackendCell& cell = *set_.backends()[i].cell;
    cell.fleet().report.Store(kZones[i] == "a" ? 40 : 0, 0, fake_now_ns.load());
  }
  for (int k = 0; k < 200; ++k) {
    const std::string key = KeyOf(k);
    const PickOutcome outcome = Pick(key);
    const auto* c = Completed(outcome);
    ASSERT_NE(c, nullptr);
    // The first backend outside a in the key's order: idle, so it has room
    // by the herding rule and the bound.
    EXPECT_EQ(c->backend, ZoneOrder(key, "a", false).front()) << key;
    EXPECT_TRUE(c->spilled);
  }
  EXPECT_EQ(stats_->zone_out.load(), 200u);
  // The reports drop: the keys are back on their zone's owner.
  for (size_t i = 0; i < 9; ++i) {
    BackendCell& cell = *set_.backends()[i].cell;
    cell.fleet().report.Store(0, 0, fake_now_ns.load());
  }
  fake_now_ns += 2'000'000;  // past the sum's period
  for (int k = 0; k < 200; ++k) {
    const std::string key = KeyOf(k);
    EXPECT_EQ(PickedBackend(key), ZoneOrder(key, "a").front()) << key;
  }
  EXPECT_EQ(stats_->zone_kept.load(), 200u);
}

TEST_F(ZoneTest, UnderServerLoadAZoneWithRoomKeepsItsCalls) {
  const FakeFleetClock clock;
  server_load_ = true;
  const std::vector<uint32_t> ones(9, 1);
  Build("b", States(9, RoutingState::kReady), /*bounded=*/true, kZones, ones);
  // Balanced: every backend reports 10 calls of others.
  for (size_t i = 0; i < 9; ++i) {
    set_.backends()[i].cell->fleet().report.Store(10, 0, fake_now_ns.load());
  }
  for (int k = 0; k < 300; ++k) {
    const std::string key = KeyOf(k);
    EXPECT_EQ(PickedBackend(key), ZoneOrder(key, "b").front()) << key;
  }
  EXPECT_EQ(stats_->zone_out.load(), 0u);
}

}  // namespace
}  // namespace poise::router::test
