// serverLoad's rules without gRPC: what counts as a report, the others'
// part of a report and its age, and bounded picks over the fleet's loads
// (picker.h, P7) against the core's Decide() on those loads.
#include "src/router/fleet_load.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "poise/rendezvous.h"
#include "src/core/contract.h"
#include "src/router/picker.h"
#include "test/router/router_test_util.h"

namespace poise::router {
namespace {

using test::CandidatesOf;
using test::Entries;
using test::States;
using test::ValidConfig;

TEST(ReportedCount, RefusesWhatNoBackendCanReport) {
  EXPECT_EQ(ReportedCount(0.0), 0u);
  EXPECT_EQ(ReportedCount(7.0), 7u);
  EXPECT_EQ(ReportedCount(3.4), 3u);
  EXPECT_EQ(ReportedCount(3.5), 4u);
  EXPECT_EQ(ReportedCount(1099511627776.0), uint64_t{1} << 40);
  EXPECT_EQ(ReportedCount(-0.5), std::nullopt);
  EXPECT_EQ(ReportedCount(-1.0), std::nullopt);
  EXPECT_EQ(ReportedCount(std::nan("")), std::nullopt);
  EXPECT_EQ(ReportedCount(std::numeric_limits<double>::infinity()),
            std::nullopt);
  EXPECT_EQ(ReportedCount(1099511627777.0), std::nullopt);
  EXPECT_EQ(ReportedCount(1e300), std::nullopt);
}

TEST(ReportSlot, TheOthersPartIsTheReportLessThisClientsOwnThen) {
  ReportSlot slot;
  EXPECT_FALSE(slot.Fresh(0, 1000).has_value());  // none yet
  EXPECT_EQ(slot.received_ns(), ReportSlot::kNever);
  slot.Store(/*reported=*/9, /*own_then=*/2, /*now_ns=*/5000);
  std::optional<FreshReport> r = slot.Fresh(5000, 1000);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->others, 7u);
  EXPECT_EQ(r->own_then, 2u);
  EXPECT_EQ(r->age_ns, 0);
  r = slot.Fresh(6000, 1000);  // exactly maxReportAge
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->age_ns, 1000);
  EXPECT_FALSE(slot.Fresh(6001, 1000).has_value());  // older
  EXPECT_EQ(slot.last_reported(), 9u);
  EXPECT_EQ(slot.received_ns(), 5000);
  // A report below this client's own count (its own calls started after
  // the backend counted) leaves no others, not a negative.
  slot.Store(1, 3, 7000);
  EXPECT_EQ(slot.Fresh(7000, 1000)->others, 0u);
  EXPECT_EQ(FleetEstimate(std::nullopt, 4), 4u);
  EXPECT_EQ(FleetEstimate(FreshReport{5, 1, 0}, 4), 9u);
}

// ---------------------------------------------------------------------------
// Picks over the fleet's loads

std::atomic<int64_t> fake_now_ns{0};
int64_t FakeNow() { return fake_now_ns.load(); }

class FleetPickerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_now_ns = 1'000'000'000;
    SetFleetClockForTesting(&FakeNow);
  }
  void TearDown() override { SetFleetClockForTesting(nullptr); }

  // n READY backends of weight 1 under bounded_load_rendezvous, with
  // serverLoad on (maxReportAge 1 s) unless `server_load` is false.
  void Build(size_t n, bool server_load = true) {
    Config config = ValidConfig(/*bounded=*/true);
    if (server_load) config.server_load.emplace();
    ASSERT_TRUE(NormalizeAndValidate(config).empty());
    config_ = std::make_shared<const Config>(std::move(config));
    set_ = BackendSet();  // new cells: no report, no ask, no count yet
    set_.Update(Entries(n), *config_);
    states_ = States(n, RoutingState::kReady);
    stats_ = std::make_shared<PolicyStats>("test", "policy");
    picker_ = std::make_unique<Picker>(config_, set_.list(), states_, stats_);
  }
  // A report of `reported` calls from backend i, now.
  void Report(size_t i, uint64_t reported) {
    BackendCell& cell = *set_.backends()[i].cell;
    cell.fleet().report.Store(reported, cell.in_flight->Load(),
                              fake_now_ns.load());
  }
  PickOutcome Pick(std::string_view key, uint32_t previous_attempts = 0) {
    return picker_->Pick(PickRequest{key, previous_attempts});
  }
  static const PickOutcome::Complete& Completed(const PickOutcome& outcome) {
    const auto* c = std::get_if<PickOutcome::Complete>(&outcome.result);
    EXPECT_NE(c, nullptr);
    static const PickOutcome::Complete kNone{SIZE_MAX, false, {}};
    return c != nullptr ? *c : kNone;
  }
  // The key's order over every backend (weight 1, idle), by contract.h.
  std::vector<contract::Ranked> ContractOrder(const std::string& key) const {
    std::vector<contract::LoadedCandidate> loaded;
    for (const auto& b : set_.backends()) {
      loaded.push_back(
          contract::LoadedCandidate{std::string(b.identity), 1, 0, true});
    }
    return contract::Order(key, loaded);
  }
  size_t Owner(std::string_view key) const {
    return WeightedRendezvous::Pick(key, CandidatesOf(set_.backends())).value();
  }
  // The core's bounded decision over `loads`.
  Decision DecideOn(std::string_view key, const std::vector<uint64_t>& loads,
                    uint64_t nth = 0) {
    const BoundedLoadRendezvous policy =
        *BoundedLoadRendezvous::Create(Config::kDefaultBalanceFactorPercent);
    const auto load = [&loads](size_t i) { return loads[i]; };
    const std::vector<Candidate> candidates = CandidatesOf(set_.backends());
    const IdentityTable& table = *set_.table();
    const Result<Decision> d =
        nth == 0
            ? policy.Decide(key, candidates, table, load, scratch_)
            : policy.DecideNth(key, candidates, table, load, nth, scratch_);
    EXPECT_TRUE(d.ok());
    return d.value();
  }

  std::shared_ptr<const Config> config_;
  BackendSet set_;
  std::vector<BackendState> states_;
  std::shared_ptr<PolicyStats> stats_;
  std::unique_ptr<Picker> picker_;
  DecisionScratch scratch_;
};

TEST_F(FleetPickerTest, AnIdleFleetRoutesEveryKeyToItsOwner) {
  Build(5);
  for (int k = 0; k < 200; ++k) {
    const std::string key = "key-" + std::to_string(k);
    const PickOutcome outcome = Pick(key);
    EXPECT_EQ(Completed(outcome).backend, Owner(key)) << key;
    EXPECT_FALSE(Completed(outcome).spilled);
  }
  // No backend has reported: every pick counted only this client's calls.
  EXPECT_EQ(stats_->picks_without_some_report.load(), 200u);
  EXPECT_TRUE(stats_->server_load.load());
  for (size_t i = 0; i < 5; ++i) Report(i, 0);
  // L is summed again at most every ms (Picker::OthersSum).
  fake_now_ns += 1'000'000;
  for (int k = 0; k < 200; ++k) {
    const std::string key = "key-" + std::to_string(k);
    EXPECT_EQ(Completed(Pick(key)).backend, Owner(key)) << key;
  }
  EXPECT_EQ(stats_->picks_without_some_report.load(), 200u);
}

TEST_F(FleetPickerTest, OtherClientsCallsOnTheOwnerSendTheKeyOn) {
  Build(5);
  const std::string key = "hot";
  const size_t owner = Owner(key);
  // Other clients hold 40 calls on the owner, none elsewhere: L = 40, the
  // owner's bound ceil(1.5 * 41 / 5) = 13.
  for (size_t i = 0; i < 5; ++i) Report(i, i == owner ? 40 : 0);
  std::vector<uint64_t> loads(5, 0);
  loads[owner] = 40;
  const Decision expected = DecideOn(key, loads);
  ASSERT_TRUE(expected.spilled);
  const PickOutcome outcome = Pick(key);
  EXPECT_EQ(Completed(outcome).backend, expected.selection);
  EXPECT_TRUE(Completed(outcome).spilled);
  // Without serverLoad the client sees only its own calls: the owner.
  Build(5, /*server_load=*/false);
  EXPECT_EQ(Completed(Pick(key)).backend, owner);
}

TEST_F(FleetPickerTest, AReportOlderThanMaxReportAgeCountsOnlyOwnCalls) {
  Build(5);
  const std::string key = "hot";
  const size_t owner = Owner(key);
  for (size_t i = 0; i < 5; ++i) Report(i, i == owner ? 40 : 0);
  EXPECT_NE(Completed(Pick(key)).backend, owner);
  EXPECT_EQ(stats_->picks_without_some_report.load(), 0u);
  fake_now_ns += absl::ToInt64Nanoseconds(absl::Seconds(1));
  EXPECT_NE(Completed(Pick(key)).backend, owner);  // exactly 1 s: fresh
  fake_now_ns += 1;
  {
    const PickOutcome outcome = Pick(key);
    EXPECT_EQ(Completed(outcome).backend, owner);
    EXPECT_FALSE(Completed(outcome).spilled);
  }
  // The count follows L's sum, made again at most every ms.
  fake_now_ns += 1'000'000;
  EXPECT_EQ(Completed(Pick(key)).backend, owner);
  EXPECT_GE(stats_->picks_without_some_report.load(), 1u);
}

TEST_F(FleetPickerTest, ThisClientsOwnCallsCountAsTheyAreNow) {
  Build(2);
  const std::string key = "hot";
  const size_t owner = Owner(key);
  // Three own calls on the owner, which the owner reports (3: no others).
  std::vector<PickOutcome> held;
  held.reserve(3);
  for (int i = 0; i < 3; ++i) held.push_back(Pick(key));
  for (const PickOutcome& o : held) EXPECT_EQ(Completed(o).backend, owner);
  Report(owner, 3);
  Report(1 - owner, 0);
  fake_now_ns += 1'000'000;  // L's next sum
  // L = 3, the owner's bound ceil(1.5 * 4 / 2) = 3: full, the key spills.
  EXPECT_EQ(Completed(Pick(key)).backend, 1 - owner);
  // Two own calls end: the owner's load is 1 now, not the 3 reported.
  held.resize(1);
  EXPECT_EQ(Completed(Pick(key)).backend, owner);
}

// L as fleet_load.h states it, by search rather than its closed form: each
// E_i counted at most as the largest E with E <= ceil(f (R + E + 1) /
// (100 n)) over the others' sum R (one weight), never below own_i.
uint64_t CappedL(const std::vector<uint64_t>& loads,
                 const std::vector<uint64_t>& own) {
  uint64_t raw = 0;
  for (const uint64_t e : loads) raw += e;
  const auto n = static_cast<uint64_t>(loads.size());
  uint64_t total = 0;
  for (size_t i = 0; i < loads.size(); ++i) {
    const uint64_t rest = raw - loads[i];
    uint64_t most = 0;
    while (most < loads[i] &&
           most + 1 <= contract::Capacity(Config::kDefaultBalanceFactorPercent,
                                          rest + most + 1, 1, n)) {
      ++most;
    }
    total += std::min(loads[i], std::max(most, own[i]));
  }
  return total;
}

TEST_F(FleetPickerTest, PicksAreDecideOnTheFleetsLoads) {
  // Reports are either new (age 0: the herding rule takes any room they
  // show) or past maxReportAge, so a first attempt is the contract's
  // decision on E_i with L capped at each backend's bound (K9), and a retry
  // the k-th in the key's order with room under that L.
  std::mt19937_64 rng(7);
  Build(6);
  std::vector<PickOutcome> held;
  int spills = 0;
  int capped = 0;
  for (int round = 0; round < 600; ++round) {
    fake_now_ns += 1'500'000'000;  // every older report is stale
    for (size_t i = 0; i < 6; ++i) {
      if (rng() % 3 != 0) Report(i, rng() % 12);
    }
    const int64_t now = fake_now_ns.load();
    std::vector<uint64_t> loads(6);
    std::vector<uint64_t> own(6);
    std::vector<contract::LoadedCandidate> loaded;
    for (size_t i = 0; i < 6; ++i) {
      BackendCell& cell = *set_.backends()[i].cell;
      own[i] = cell.in_flight->Load();
      loads[i] =
          FleetEstimate(cell.fleet().report.Fresh(now, 1'000'000'000), own[i]);
      loaded.push_back(contract::LoadedCandidate{
          std::string(set_.backends()[i].identity), 1, loads[i], true});
    }
    uint64_t raw = 0;
    for (const uint64_t e : loads) raw += e;
    const uint64_t total = CappedL(loads, own);
    capped += total < raw ? 1 : 0;
    const std::string key =
        round % 4 == 0 ? "hot" : "k" + std::to_string(rng() % 50);
    const uint32_t attempts =
        round % 5 == 0 ? 1 + static_cast<uint32_t>(rng() % 3) : 0;
    PickOutcome outcome = Pick(key, attempts);
    if (attempts == 0) {
      const auto expected = contract::DecideWithTotal(
          key, loaded, Config::kDefaultBalanceFactorPercent, total);
      ASSERT_TRUE(expected.ok());
      const contract::Decision& d = expected.value().decision;
      EXPECT_EQ(Completed(outcome).backend, d.selection) << round;
      EXPECT_EQ(Completed(outcome).spilled, d.selection != d.affinity) << round;
      spills += d.selection != d.affinity ? 1 : 0;
    } else {
      // The k-th in the key's order of those with room under that L.
      std::vector<size_t> with_room;
      for (const contract::Ranked& r : contract::Order(key, loaded)) {
        if (UInt128{loads[r.index]} <
            contract::Capacity(Config::kDefaultBalanceFactorPercent, total, 1,
                               6)) {
          with_room.push_back(r.index);
        }
      }
      EXPECT_EQ(Completed(outcome).backend,
                with_room.empty() ? DecideOn(key, loads, attempts).selection
                                  : with_room[attempts % with_room.size()])
          << round;
    }
    held.push_back(std::move(outcome));
    if (held.size() > 8) held.erase(held.begin(), held.begin() + 3);
  }
  EXPECT_GT(spills, 50);
  EXPECT_GT(capped, 50);
  EXPECT_EQ(stats_->capped_load_reports.load() != 0, capped != 0);
  held.clear();
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(set_.backends()[i].cell->in_flight->Load(), 0u);
  }
}

// ---------------------------------------------------------------------------
// Herding

TEST(TakesRoom, SharesAStaleReportsRoomAmongTheFleetsAsksSinceIt) {
  // 10 others and 2 own calls reported, capacity 15: room for 3.
  const FreshReport report{10, 2, /*age_ns=*/1'000'000};
  // Asking once per ms with 1 % of the fleet's calls: the others asked 99
  // times in the report's 1 ms, so each ask takes the room with 3 / 99.
  const double per_ns = 1e-6;
  EXPECT_TRUE(TakesRoom(report, 2, 15, 0.01, per_ns, 0.029));
  EXPECT_FALSE(TakesRoom(report, 2, 15, 0.01, per_ns, 0.031));
  // Fewer asks than the room: always; a client alone: always.
  EXPECT_TRUE(TakesRoom(report, 2, 15, 0.5, per_ns, 0.999));
  EXPECT_TRUE(TakesRoom(report, 2, 15, 1.0, per_ns, 0.999));
  // Its own calls grew since the report: less room (15 - 13 = 2 of 99).
  EXPECT_TRUE(TakesRoom(report, 3, 15, 0.01, per_ns, 0.019));
  EXPECT_FALSE(TakesRoom(report, 3, 15, 0.01, per_ns, 0.021));
  // A new report (age 0): always.
  EXPECT_TRUE(TakesRoom({10, 2, 0}, 2, 15, 0.01, per_ns, 0.999));
  // Its own calls ended since the report: that room is its own.
  EXPECT_TRUE(TakesRoom(report, 1, 15, 0.01, per_ns, 0.999));
  // No room by the report: never (the own count grew since).
  EXPECT_FALSE(TakesRoom({13, 2, 0}, 2, 15, 0.01, 0, 0.0));
}

TEST(AskRate, CountsAsksOverTheHorizon) {
  AskRate rate;
  constexpr int64_t kMs = 1'000'000;
  EXPECT_EQ(rate.Ask(1000 * kMs, 1000 * kMs), 0.0);  // the first ask
  // One ask per ms for 2 s: about 1 per ms, whatever the horizon has seen.
  double last = 0;
  for (int64_t t = 1; t <= 2000; ++t) {
    last = rate.Ask((1000 + t) * kMs, 1000 * kMs);
  }
  EXPECT_NEAR(last * kMs, 1.0, 0.4);
  // Idle for 5 horizons: the rate has decayed away.
  EXPECT_LT(rate.Ask(8000 * kMs, 1000 * kMs) * kMs, 0.01);
}

TEST(AskRate, ReadsTheRateWithoutAsking) {
  AskRate rate;
  constexpr int64_t kMs = 1'000'000;
  EXPECT_EQ(rate.Rate(1000 * kMs, 1000 * kMs), 0.0);  // never asked
  for (int64_t t = 0; t <= 500; ++t) rate.Ask((1000 + t) * kMs, 1000 * kMs);
  const double read = rate.Rate(1600 * kMs, 1000 * kMs);
  EXPECT_GT(read, 0.0);
  EXPECT_EQ(rate.Rate(1600 * kMs, 1000 * kMs), read);  // nothing recorded
  EXPECT_EQ(rate.Ask(1600 * kMs, 1000 * kMs), read);   // the rate before it
  EXPECT_GT(rate.Rate(1600 * kMs, 1000 * kMs), read);  // that ask recorded
}

TEST_F(FleetPickerTest, ManyPicksShareTheRoomOfOneStaleReport) {
  // The hot key's owner reports one call below its bound; its next choice
  // has not reported (it counts this client's calls only), the other 8
  // report 11 each: L = 15 + 88 = 103, the owner's capacity
  // ceil(1.5 * 104 / 10) = 16. The client asks for the owner every ms (each
  // call ends at once) while a report ages for 100 ms: the fleet it stands
  // for (1 call in 104) would ask ~104 times per ms, so it takes the
  // owner's room on a few picks and sends the rest on.
  Build(10);
  const std::string key = "hot";
  const size_t owner = Owner(key);
  std::vector<Candidate> rest = CandidatesOf(set_.backends());
  rest[owner].eligible = false;
  const size_t next = WeightedRendezvous::Pick(key, rest).value();
  const auto report_all = [&] {
    for (size_t i = 0; i < 10; ++i) {
      if (i != next) Report(i, i == owner ? 15 : 11);
    }
  };
  int taken = 0;
  int picks = 0;
  for (int report = 0; report < 10; ++report) {
    report_all();
    for (int ms = 0; ms < 100; ++ms, ++picks) {
      fake_now_ns += 1'000'000;
      const size_t backend = Completed(Pick(key)).backend;
      EXPECT_TRUE(backend == owner || backend == next) << backend;
      taken += backend == owner ? 1 : 0;
    }
  }
  EXPECT_GT(taken, 0);
  EXPECT_LT(taken, picks / 10);
  // A report taken just before each pick (age 0) shows its room as it is.
  taken = 0;
  for (int i = 0; i < 100; ++i) {
    report_all();
    taken += Completed(Pick(key)).backend == owner ? 1 : 0;
  }
  EXPECT_EQ(taken, 100);
}

// A retry takes room only a report shows by the herding rule too, reading
// the asks without adding its own. The hot key's second choice reports one
// call below its bound (17 of 18: the other 9 backends report 11, L = 116)
// in a report 100 ms old, and this client asked for it every ms before: the
// fleet it stands for (1 call in 117) asked ~11,600 times since. A retry's
// second choice with room then passes it for the third almost always, where
// the bound alone would take it every time; no retry counts as an ask.
TEST_F(FleetPickerTest, ARetryTakesReportedRoomByTheHerdingRuleWithoutAsking) {
  Build(10);
  const std::string key = "hot";
  const std::vector<contract::Ranked> order = ContractOrder(key);
  const size_t second = order[1].index;
  const size_t third = order[2].index;
  ASSERT_EQ(
      contract::Capacity(Config::kDefaultBalanceFactorPercent, 116 + 1, 1, 10),
      18u);
  AskRate& second_asks = set_.backends()[second].cell->fleet().asks;
  for (int ms = 0; ms < 1000; ++ms) {
    fake_now_ns += 1'000'000;
    second_asks.Ask(fake_now_ns, 1'000'000'000);
  }
  for (size_t i = 0; i < 10; ++i) Report(i, i == second ? 17 : 11);
  fake_now_ns += 100'000'000;
  const double second_rate = second_asks.Rate(fake_now_ns, 1'000'000'000);
  int on_second = 0;
  for (int retry = 0; retry < 100; ++retry) {
    const size_t backend = Completed(Pick(key, 1)).backend;
    EXPECT_TRUE(backend == second || backend == third) << backend;
    on_second += backend == second ? 1 : 0;
  }
  EXPECT_LT(on_second, 5);
  for (size_t r = 0; r < 10; ++r) {
    const AskRate& asks = set_.backends()[order[r].index].cell->fleet().asks;
    EXPECT_EQ(asks.Rate(fake_now_ns, 1'000'000'000), r == 1 ? second_rate : 0.0)
        << "backend " << r << " of the key's order";
  }
}

// A pick asks (fleet_load.h's AskRate) only for the backends it visits in
// the key's order: the owner and those after it up to the first with room.
// Asking for every backend (reading every load below 512 candidates) would
// make the herding rule see this client ask for every owner and refuse
// their room to the fleet (issue: owner share 50 % -> 11 % in poise-sim).
TEST_F(FleetPickerTest, APickAsksOnlyForTheBackendsItVisits) {
  constexpr size_t kBackends = 50;
  Build(kBackends);
  for (size_t full = 0; full < 6; ++full) {
    const std::string key = "tenant-" + std::to_string(full);
    const std::vector<contract::Ranked> order = ContractOrder(key);
    fake_now_ns += 10'000'000;
    // The first `full` backends of the key's order report far over any
    // bound (and below the 2^40 refusal), the rest idle.
    for (size_t r = 0; r < kBackends; ++r) {
      Report(order[r].index, r < full ? 1'000'000 : 0);
    }
    const size_t expected = order[full].index;
    EXPECT_EQ(Completed(Pick(key)).backend, expected) << full;
    // An ask returns the rate of the asks before it: 0 for a backend never
    // asked for, more after one ask.
    for (size_t r = 0; r < kBackends; ++r) {
      AskRate& asks = set_.backends()[order[r].index].cell->fleet().asks;
      EXPECT_EQ(asks.Ask(fake_now_ns, 1'000'000'000) > 0, r <= full)
          << "backend " << r << " of the key's order, " << full << " full";
    }
    Build(kBackends);  // new AskRates for the next key
  }
}

// One backend's reports cannot lift the others' bounds past what a backend
// at its own bound would: 5 backends, one client with 16 calls in flight,
// 70 % on one key; every honest backend reports its calls each 10 ms, one
// other backend 2^40 (the largest count taken), 1e12, or 0 and 1e12 in
// turn. The honest owner stays within its bound + 1, the bound counting the
// 16 calls and the liar at its own bound; an uncapped L would let it take
// all 16. The liar's capped reports are counted.
TEST_F(FleetPickerTest, OneBackendsReportsLiftNoOtherBoundPastOneAtItsBound) {
  constexpr size_t kBackends = 5;
  constexpr size_t kInFlight = 16;
  constexpr uint64_t kF = Config::kDefaultBalanceFactorPercent;
  // The liar's most at its bound over the 16 calls (a search over the
  // bound, not MostAtItsBound's closed form), then the owner's bound.
  uint64_t liar_most = 0;
  while (liar_most + 1 <=
         contract::Capacity(kF, kInFlight + liar_most + 1, 1, kBackends)) {
    ++liar_most;
  }
  const auto bound = static_cast<uint64_t>(
      contract::Capacity(kF, kInFlight + liar_most, 1, kBackends));
  const auto honest_bound =
      static_cast<uint64_t>(contract::Capacity(kF, kInFlight, 1, kBackends));
  for (const int liar_kind : {0, 1, 2, 3}) {  // honest, 2^40, 1e12, 0 / 1e12
    SCOPED_TRACE(liar_kind);
    Build(kBackends);
    const std::string hot = "hot";
    const size_t owner = Owner(hot);
    const size_t liar = (owner + 1) % kBackends;
    std::mt19937_64 rng(static_cast<uint64_t>(liar_kind));
    std::vector<PickOutcome> held;  // oldest first
    uint64_t peak = 0;
    for (int step = 0; step < 2000; ++step) {
      fake_now_ns += 10'000'000;  // past the sum's 1 ms period
      for (size_t i = 0; i < kBackends; ++i) {
        const uint64_t own = set_.backends()[i].cell->in_flight->Load();
        uint64_t reported = own;
        if (i == liar && liar_kind == 1) reported = uint64_t{1} << 40;
        if (i == liar && liar_kind == 2) reported = 1'000'000'000'000;
        if (i == liar && liar_kind == 3) {
          reported = step % 2 == 0 ? 0 : 1'000'000'000'000;
        }
        Report(i, reported);
      }
      if (held.size() == kInFlight) {
        held.erase(held.begin() + static_cast<std::ptrdiff_t>(rng() % 4));
      }
      const std::string key =
          rng() % 10 < 7 ? hot : "k" + std::to_string(rng() % 1000);
      held.push_back(Pick(key));
      ASSERT_NE(Completed(held.back()).backend, SIZE_MAX);
      peak = std::max(peak, set_.backends()[owner].cell->in_flight->Load());
    }
    EXPECT_LE(peak, (liar_kind == 0 ? honest_bound : bound) + 1);
    EXPECT_GE(peak, honest_bound - 1);  // the hot key keeps its owner busy
    const uint64_t capped = set_.backends()[liar].cell->fleet().capped.load();
    EXPECT_EQ(capped > 0, liar_kind != 0) << capped;
    EXPECT_EQ(stats_->capped_load_reports.load() >= capped, true);
    held.clear();
  }
}

// Reports arrive on other threads (calls' Finish(), out-of-band streams)
// while picks read them; under TSan (POISE_TEST_TSAN) this is the race test.
TEST_F(FleetPickerTest, ReportsAndPicksOnManyThreads) {
  Build(8);
  constexpr int kPicks = 20000;
  std::atomic<bool> done{false};
  std::vector<std::thread> reporters;
  reporters.reserve(2);
  for (int t = 0; t < 2; ++t) {
    reporters.emplace_back([this, t, &done] {
      std::mt19937_64 rng(static_cast<uint64_t>(t));
      while (!done.load()) {
        const size_t i = rng() % 8;
        BackendCell& cell = *set_.backends()[i].cell;
        fake_now_ns += 1000;
        cell.fleet().report.Store(rng() % 20, cell.in_flight->Load(),
                                  fake_now_ns);
      }
    });
  }
  std::vector<std::thread> pickers;
  pickers.reserve(2);
  std::atomic<int> completed{0};
  for (int t = 0; t < 2; ++t) {
    pickers.emplace_back([this, t, &completed] {
      std::mt19937_64 rng(static_cast<uint64_t>(100 + t));
      std::vector<PickOutcome> held;
      for (int k = 0; k < kPicks; ++k) {
        const std::string key =
            k % 3 == 0 ? "hot" : "k" + std::to_string(rng() % 100);
        PickOutcome outcome =
            picker_->Pick(PickRequest{key, k % 7 == 0 ? 1u : 0u});
        if (std::holds_alternative<PickOutcome::Complete>(outcome.result)) {
          completed.fetch_add(1);
        }
        held.push_back(std::move(outcome));
        if (held.size() > 6) held.erase(held.begin(), held.begin() + 4);
      }
    });
  }
  for (std::thread& t : pickers) t.join();
  done = true;
  for (std::thread& t : reporters) t.join();
  EXPECT_EQ(completed.load(), 2 * kPicks);  // a report never fails a pick
  EXPECT_EQ(stats_->picks.load(), static_cast<uint64_t>(2 * kPicks));
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(set_.backends()[i].cell->in_flight->Load(), 0u);
  }
}

}  // namespace
}  // namespace poise::router
