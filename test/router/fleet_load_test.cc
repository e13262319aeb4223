// serverLoad's rules without gRPC: what counts as a report, the others'
// part of a report and its age, and bounded picks over the fleet's loads
// (picker.h, P7) against the core's Decide() on those loads.
#include "src/router/fleet_load.h"

#include <gtest/gtest.h>

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

TEST_F(FleetPickerTest, PicksAreDecideOnTheFleetsLoads) {
  // Reports are either new (age 0: the herding rule takes any room they
  // show) or past maxReportAge, so a pick is Decide() on E_i exactly.
  std::mt19937_64 rng(7);
  Build(6);
  std::vector<PickOutcome> held;
  int spills = 0;
  for (int round = 0; round < 600; ++round) {
    fake_now_ns += 1'500'000'000;  // every older report is stale
    for (size_t i = 0; i < 6; ++i) {
      if (rng() % 3 != 0) Report(i, rng() % 12);
    }
    const int64_t now = fake_now_ns.load();
    std::vector<uint64_t> loads(6);
    for (size_t i = 0; i < 6; ++i) {
      BackendCell& cell = *set_.backends()[i].cell;
      loads[i] = FleetEstimate(cell.fleet().report.Fresh(now, 1'000'000'000),
                               cell.in_flight->Load());
    }
    const std::string key =
        round % 4 == 0 ? "hot" : "k" + std::to_string(rng() % 50);
    const uint32_t attempts =
        round % 5 == 0 ? 1 + static_cast<uint32_t>(rng() % 3) : 0;
    const Decision expected = DecideOn(key, loads, attempts);
    PickOutcome outcome = Pick(key, attempts);
    EXPECT_EQ(Completed(outcome).backend, expected.selection) << round;
    if (attempts == 0) {
      EXPECT_EQ(Completed(outcome).spilled, expected.spilled) << round;
    }
    spills += expected.spilled ? 1 : 0;
    held.push_back(std::move(outcome));
    if (held.size() > 8) held.erase(held.begin(), held.begin() + 3);
  }
  EXPECT_GT(spills, 50);
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
