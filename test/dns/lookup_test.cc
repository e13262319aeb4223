// poise::dns lookups against a real dnsmasq on 127.0.0.1: the records, and
// the outcome a resolver acts on for each way a lookup can end.
#include "src/dns/lookup.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "src/dns/target.h"
#include "test/dns/print.h"
#include "test/support/dns_server.h"

namespace poise::dns {
namespace {

using poise::test_support::DnsmasqServer;
using poise::test_support::DnsZone;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr char kService[] = "_grpc._tcp.web.test";

// Three targets with different ports, priorities and weights; web-0 has an
// A and an AAAA record, web-1 two A records, web-2 only AAAA.
DnsZone WebZone() {
  return DnsZone()
      .Host("web-0.web.test", "127.0.0.2")
      .Host("web-0.web.test", "::1")
      .Host("web-1.web.test", "127.0.0.3")
      .Host("web-1.web.test", "127.0.0.13")
      .Host("web-2.web.test", "::1")
      .Srv(kService, "web-0.web.test", 8443, 0, 5)
      .Srv(kService, "web-1.web.test", 8444, 0, 10)
      .Srv(kService, "web-2.web.test", 9000, 1, 0);
}

LookupOptions Via(const DnsmasqServer& dns,
                  milliseconds timeout = milliseconds(2000)) {
  LookupOptions options;
  const absl::StatusOr<DnsServer> server = ParseDnsServer(dns.authority());
  EXPECT_TRUE(server.ok()) << server.status();
  if (server.ok()) options.server = *server;
  options.timeout = timeout;
  return options;
}

std::vector<SrvRecord> WebRecords() {
  return {{"web-0.web.test", 8443, 0, 5},
          {"web-1.web.test", 8444, 0, 10},
          {"web-2.web.test", 9000, 1, 0}};
}

std::vector<std::string> Ips(const AddressResult& result) {
  std::vector<std::string> ips;
  for (const Address& address : result.addresses) ips.push_back(address.ip);
  return ips;
}

class LookupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    POISE_REQUIRE_DNSMASQ();
    ASSERT_TRUE(dns_.Start(WebZone()));
  }
  DnsmasqServer dns_;
};

TEST_F(LookupTest, SrvRecordsWithSeveralTargetsAndPorts) {
  const SrvResult result = LookupSrv(kService, Via(dns_));
  ASSERT_EQ(result.outcome, Outcome::kFound) << result.message;
  EXPECT_EQ(result.records, WebRecords());
  std::vector<std::string> identities;
  for (const SrvRecord& record : result.records) {
    identities.push_back(record.Identity());
  }
  EXPECT_EQ(identities, (std::vector<std::string>{"web-0.web.test:8443",
                                                  "web-1.web.test:8444",
                                                  "web-2.web.test:9000"}));
  EXPECT_NE(result.message.find("3 records"), std::string::npos)
      << result.message;
  // An absolute name is the same name.
  EXPECT_EQ(LookupSrv("_grpc._tcp.web.test.", Via(dns_)).records, WebRecords());
}

TEST_F(LookupTest, SrvNameWithoutRecords) {
  const SrvResult nxdomain = LookupSrv("_none._tcp.web.test", Via(dns_));
  EXPECT_EQ(nxdomain.outcome, Outcome::kNoRecords) << nxdomain.message;
  EXPECT_TRUE(nxdomain.records.empty());
  EXPECT_NE(nxdomain.message.find("NXDOMAIN"), std::string::npos)
      << nxdomain.message;
  // web-0 exists (A/AAAA) but has no SRV record.
  const SrvResult nodata = LookupSrv("web-0.web.test", Via(dns_));
  EXPECT_EQ(nodata.outcome, Outcome::kNoRecords) << nodata.message;
  EXPECT_NE(nodata.message.find("NODATA"), std::string::npos) << nodata.message;
}

TEST_F(LookupTest, SrvTargetDotMeansNotAvailable) {
  // srv-host= without a target serves target "." (RFC 2782).
  DnsZone zone = WebZone();
  zone.Srv("_off._tcp.web.test", "", 0);
  ASSERT_TRUE(dns_.SetRecords(zone));
  const SrvResult result = LookupSrv("_off._tcp.web.test", Via(dns_));
  EXPECT_EQ(result.outcome, Outcome::kNoRecords) << result.message;
  EXPECT_TRUE(result.records.empty());
  EXPECT_NE(result.message.find("target \".\""), std::string::npos)
      << result.message;
}

TEST_F(LookupTest, AAndAaaaAnswers) {
  const AddressResult both = LookupAddresses("web-0.web.test", Via(dns_));
  ASSERT_EQ(both.outcome, Outcome::kFound) << both.message;
  EXPECT_EQ(both.ipv4, Outcome::kFound);
  EXPECT_EQ(both.ipv6, Outcome::kFound);
  EXPECT_EQ(both.addresses,
            (std::vector<Address>{{IpFamily::kIpv4, "127.0.0.2"},
                                  {IpFamily::kIpv6, "::1"}}));

  const AddressResult two_a = LookupAddresses("web-1.web.test", Via(dns_));
  ASSERT_EQ(two_a.outcome, Outcome::kFound) << two_a.message;
  EXPECT_EQ(Ips(two_a), (std::vector<std::string>{"127.0.0.13", "127.0.0.3"}));
  EXPECT_EQ(two_a.ipv6, Outcome::kNoRecords);  // NODATA for AAAA.

  const AddressResult only_aaaa = LookupAddresses("web-2.web.test", Via(dns_));
  ASSERT_EQ(only_aaaa.outcome, Outcome::kFound) << only_aaaa.message;
  EXPECT_EQ(only_aaaa.addresses,
            (std::vector<Address>{{IpFamily::kIpv6, "::1"}}));
  EXPECT_EQ(only_aaaa.ipv4, Outcome::kNoRecords);

  const AddressResult v4 =
      LookupAddresses("web-0.web.test", Via(dns_), Families::kIpv4);
  EXPECT_EQ(Ips(v4), std::vector<std::string>{"127.0.0.2"});
  const AddressResult v6 =
      LookupAddresses("web-0.web.test", Via(dns_), Families::kIpv6);
  EXPECT_EQ(Ips(v6), std::vector<std::string>{"::1"});
  // Only AAAA asked: an A-only name has no records.
  EXPECT_EQ(
      LookupAddresses("web-1.web.test", Via(dns_), Families::kIpv6).outcome,
      Outcome::kNoRecords);
}

TEST_F(LookupTest, RemovedNameHasNoRecords) {
  DnsZone zone = WebZone();
  zone.hosts.erase(zone.hosts.begin() + 2, zone.hosts.begin() + 4);  // web-1
  ASSERT_TRUE(dns_.SetRecords(zone));
  EXPECT_EQ(dns_.launches(), 1) << "A/AAAA changes are a SIGHUP, no restart";
  const AddressResult gone = LookupAddresses("web-1.web.test", Via(dns_));
  EXPECT_EQ(gone.outcome, Outcome::kNoRecords) << gone.message;
  EXPECT_TRUE(gone.addresses.empty());
  EXPECT_NE(gone.message.find("NXDOMAIN"), std::string::npos) << gone.message;
  // The others still resolve.
  EXPECT_EQ(LookupAddresses("web-0.web.test", Via(dns_)).outcome,
            Outcome::kFound);

  // Moving a name to another address (a pod restart) is seen at once.
  zone.Host("web-1.web.test", "127.0.0.23");
  ASSERT_TRUE(dns_.SetRecords(zone));
  EXPECT_EQ(Ips(LookupAddresses("web-1.web.test", Via(dns_))),
            std::vector<std::string>{"127.0.0.23"});
}

TEST_F(LookupTest, SrvChangesScaleOutAndRemoval) {
  DnsZone zone = WebZone();
  zone.Host("web-3.web.test", "127.0.0.5")
      .Srv(kService, "web-3.web.test", 8443, 0, 5);
  const uint16_t port = dns_.port();
  ASSERT_TRUE(dns_.SetRecords(zone));
  EXPECT_EQ(dns_.launches(), 2) << "SRV changes restart dnsmasq";
  EXPECT_EQ(dns_.port(), port) << "on the same port";
  std::vector<SrvRecord> four = WebRecords();
  four.insert(four.begin() + 2, SrvRecord{"web-3.web.test", 8443, 0, 5});
  EXPECT_EQ(LookupSrv(kService, Via(dns_)).records, four);

  zone.srv.clear();
  ASSERT_TRUE(dns_.SetRecords(zone));
  const SrvResult removed = LookupSrv(kService, Via(dns_));
  EXPECT_EQ(removed.outcome, Outcome::kNoRecords) << removed.message;
  EXPECT_TRUE(removed.records.empty());
}

TEST_F(LookupTest, PausedServerGivesNoAnswerWithinTheTimeout) {
  ASSERT_TRUE(dns_.Pause());
  const milliseconds timeout(400);
  for (const bool srv : {true, false}) {
    const Clock::time_point start = Clock::now();
    Outcome outcome;
    std::string message;
    if (srv) {
      const SrvResult result = LookupSrv(kService, Via(dns_, timeout));
      outcome = result.outcome;
      message = result.message;
      EXPECT_TRUE(result.records.empty());
    } else {
      const AddressResult result =
          LookupAddresses("web-0.web.test", Via(dns_, timeout));
      outcome = result.outcome;
      message = result.message;
      EXPECT_EQ(result.ipv4, Outcome::kNoAnswer);
      EXPECT_EQ(result.ipv6, Outcome::kNoAnswer);
    }
    const auto elapsed =
        std::chrono::duration_cast<milliseconds>(Clock::now() - start);
    EXPECT_EQ(outcome, Outcome::kNoAnswer) << message;
    // It waited (c-ares retried) but no longer than the timeout allows.
    EXPECT_GE(elapsed.count(), 300) << message;
    EXPECT_LE(elapsed.count(), 400 + 600) << message;
  }
  // The pause was the cause: answered again once resumed.
  ASSERT_TRUE(dns_.Resume());
  EXPECT_EQ(LookupSrv(kService, Via(dns_)).records, WebRecords());
}

TEST_F(LookupTest, StoppedServerGivesNoAnswer) {
  const LookupOptions options = Via(dns_, milliseconds(1000));
  ASSERT_TRUE(dns_.Stop());
  EXPECT_FALSE(dns_.running());
  const Clock::time_point start = Clock::now();
  const SrvResult srv = LookupSrv(kService, options);
  EXPECT_EQ(srv.outcome, Outcome::kNoAnswer) << srv.message;
  const AddressResult a = LookupAddresses("web-0.web.test", options);
  EXPECT_EQ(a.outcome, Outcome::kNoAnswer) << a.message;
  EXPECT_LE(Clock::now() - start, milliseconds(2000 + 600));
  // Back on the same port with the same records.
  ASSERT_TRUE(dns_.Restart());
  EXPECT_EQ(LookupSrv(kService, options).records, WebRecords());
}

TEST_F(LookupTest, NameOutsideTheServersZoneIsNoAnswer) {
  // dnsmasq has no upstream: REFUSED, which says nothing about the name.
  const AddressResult result = LookupAddresses("web.example", Via(dns_));
  EXPECT_EQ(result.outcome, Outcome::kNoAnswer) << result.message;
}

TEST_F(LookupTest, NamesCAresRejectsAreErrors) {
  EXPECT_EQ(LookupSrv("", Via(dns_)).outcome, Outcome::kError);
  EXPECT_EQ(LookupAddresses("", Via(dns_)).outcome, Outcome::kError);
  const std::string long_label(64, 'x');
  const SrvResult bad = LookupSrv(long_label + ".web.test", Via(dns_));
  EXPECT_EQ(bad.outcome, Outcome::kError) << bad.message;
  EXPECT_NE(bad.message.find("EBADNAME"), std::string::npos) << bad.message;
}

// The system configuration path (no server): a resolv.conf naming the
// fixture, with a search domain that a short A/AAAA name uses and SRV does
// not.
TEST_F(LookupTest, SystemConfigurationWithSearchDomains) {
  const std::string path = dns_.run_dir() + "/resolv.conf";
  {
    std::ofstream conf(path);
    conf << "nameserver 127.0.0.1\nsearch web.test\noptions ndots:1\n";
  }
  LookupOptions options;
  options.resolv_conf_path = path;
  options.resolv_conf_port = dns_.port();
  options.timeout = milliseconds(2000);
  const AddressResult short_name = LookupAddresses("web-0", options);
  ASSERT_EQ(short_name.outcome, Outcome::kFound) << short_name.message;
  EXPECT_EQ(Ips(short_name), (std::vector<std::string>{"127.0.0.2", "::1"}));
  EXPECT_NE(short_name.message.find("the system resolver configuration"),
            std::string::npos);
  EXPECT_EQ(LookupSrv(kService, options).records, WebRecords());
  // SRV names are queried as given: searched, "_grpc._tcp" would become
  // "_grpc._tcp.web.test", the service itself.
  EXPECT_NE(LookupSrv("_grpc._tcp", options).outcome, Outcome::kFound);
}

// Lookups from several threads at once, each its own channel: every answer
// exact, and a thread stuck on a paused server does not hold up the others.
TEST_F(LookupTest, ConcurrentLookupsFromSeveralThreads) {
  DnsmasqServer paused;
  ASSERT_TRUE(paused.Start(WebZone()));
  ASSERT_TRUE(paused.Pause());
  const LookupOptions live = Via(dns_, milliseconds(3000));
  const LookupOptions dead = Via(paused, milliseconds(1500));

  constexpr int kLiveThreads = 6;
  constexpr int kDeadThreads = 2;
  constexpr int kRounds = 25;
  std::atomic<int> live_ok{0};
  std::atomic<int> dead_ok{0};
  std::atomic<int64_t> slowest_live_ms{0};
  std::vector<std::thread> threads;
  threads.reserve(kLiveThreads + kDeadThreads);
  for (int t = 0; t < kLiveThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRounds; ++i) {
        const Clock::time_point start = Clock::now();
        bool ok = false;
        if ((i + t) % 2 == 0) {
          const SrvResult r = LookupSrv(kService, live);
          ok = r.outcome == Outcome::kFound && r.records == WebRecords();
        } else {
          const AddressResult r = LookupAddresses("web-1.web.test", live);
          ok = r.outcome == Outcome::kFound &&
               Ips(r) == std::vector<std::string>{"127.0.0.13", "127.0.0.3"};
        }
        const int64_t ms =
            std::chrono::duration_cast<milliseconds>(Clock::now() - start)
                .count();
        int64_t seen = slowest_live_ms.load();
        while (ms > seen && !slowest_live_ms.compare_exchange_weak(seen, ms)) {
        }
        if (ok) ++live_ok;
      }
    });
  }
  for (int t = 0; t < kDeadThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2; ++i) {
        if (LookupSrv(kService, dead).outcome == Outcome::kNoAnswer) ++dead_ok;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(live_ok.load(), kLiveThreads * kRounds);
  EXPECT_EQ(dead_ok.load(), kDeadThreads * 2);
  // Well under the paused server's 1500 ms: no live lookup waited for it.
  EXPECT_LT(slowest_live_ms.load(), 1000);
}

// The threads of this process named `name` (/proc/self/task/*/comm).
int ThreadsNamed(const std::string& name) {
  int n = 0;
  for (const auto& task :
       std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string line;
    if (std::getline(comm, line) && line == name) ++n;
  }
  return n;
}

// Polls `done` every 5 ms until it holds or `limit` passes.
template <typename Condition>
bool Within(milliseconds limit, Condition done) {
  const Clock::time_point deadline = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

// The names of one call are queried together: a silent server costs the
// call one timeout, not one per name, and every lookup waits on the same
// thread.
TEST_F(LookupTest, NamesOfOneCallShareOneTimeout) {
  ASSERT_TRUE(dns_.Pause());
  const std::vector<std::string> names = {"web-0.web.test", "web-1.web.test",
                                          "web-2.web.test", "web-3.web.test"};
  constexpr int kCalls = 20;
  const milliseconds timeout(600);
  std::vector<std::promise<std::vector<AddressResult>>> results(kCalls);
  std::vector<std::shared_ptr<PendingLookup>> lookups;
  lookups.reserve(results.size());
  const Clock::time_point start = Clock::now();
  for (auto& result : results) {
    lookups.push_back(
        StartAddressLookups(names, Via(dns_), start + timeout,
                            [&result](std::vector<AddressResult> r) {
                              result.set_value(std::move(r));
                            }));
  }
  EXPECT_EQ(ThreadsNamed("poise-dns"), 1);
  for (auto& result : results) {
    const std::vector<AddressResult> found = result.get_future().get();
    ASSERT_EQ(found.size(), names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      EXPECT_EQ(found[i].outcome, Outcome::kNoAnswer) << found[i].message;
      EXPECT_NE(found[i].message.find(names[i]), std::string::npos);
    }
  }
  const auto elapsed =
      std::chrono::duration_cast<milliseconds>(Clock::now() - start);
  EXPECT_GE(elapsed.count(), 600);
  EXPECT_LT(elapsed.count(), 600 + 300) << "one timeout per name?";
  EXPECT_EQ(ThreadsNamed("poise-dns"), 1);
  // Answered again once resumed, several names in one call.
  ASSERT_TRUE(dns_.Resume());
  std::promise<std::vector<AddressResult>> live;
  StartAddressLookups(
      {"web-1.web.test", "gone.web.test"}, Via(dns_),
      Clock::now() + milliseconds(2000),
      [&live](std::vector<AddressResult> r) { live.set_value(std::move(r)); });
  const std::vector<AddressResult> found = live.get_future().get();
  ASSERT_EQ(found.size(), 2U);
  EXPECT_EQ(Ips(found[0]),
            (std::vector<std::string>{"127.0.0.13", "127.0.0.3"}));
  EXPECT_EQ(found[1].outcome, Outcome::kNoRecords) << found[1].message;
}

// Cancel returns at once, its callback never runs, and the thread closes the
// lookup's sockets right after.
TEST_F(LookupTest, CancelReturnsAtOnceAndTheCallbackNeverRuns) {
  ASSERT_TRUE(dns_.Pause());
  const int open_before = OpenLookupsForTesting();
  auto ran = std::make_shared<std::atomic<int>>(0);
  // The callback owns a guard: destroying it (Cancel) is observable.
  auto guard = std::make_shared<int>(0);
  std::weak_ptr<int> watch = guard;
  std::shared_ptr<PendingLookup> lookup = StartSrvLookup(
      kService, Via(dns_), Clock::now() + milliseconds(60000),
      [ran, guard = std::move(guard)](const SrvResult&) { ++*ran; });
  ASSERT_EQ(OpenLookupsForTesting(), open_before + 1);
  const Clock::time_point start = Clock::now();
  EXPECT_TRUE(lookup->Cancel());
  EXPECT_LT(Clock::now() - start, milliseconds(50));
  EXPECT_TRUE(watch.expired()) << "Cancel kept the callback";
  EXPECT_FALSE(lookup->Cancel());
  EXPECT_TRUE(Within(milliseconds(100),
                     [&] { return OpenLookupsForTesting() == open_before; }));
  EXPECT_EQ(ran->load(), 0);

  // Cancelled after its callback ran: false, and nothing else happens.
  ASSERT_TRUE(dns_.Resume());
  std::promise<SrvResult> answered;
  std::shared_ptr<PendingLookup> done = StartSrvLookup(
      kService, Via(dns_), Clock::now() + milliseconds(2000),
      [&answered](SrvResult r) { answered.set_value(std::move(r)); });
  EXPECT_EQ(answered.get_future().get().records, WebRecords());
  EXPECT_FALSE(done->Cancel());
}

// Callbacks run on the poise-dns thread, once each.
TEST_F(LookupTest, CallbacksRunOnThePoiseDnsThread) {
  std::promise<std::string> thread_name;
  std::atomic<int> calls{0};
  StartSrvLookup(kService, Via(dns_), Clock::now() + milliseconds(2000),
                 [&](const SrvResult&) {
                   char name[16] = {};
                   pthread_getname_np(pthread_self(), name, sizeof name);
                   if (calls++ == 0) thread_name.set_value(name);
                 });
  EXPECT_EQ(thread_name.get_future().get(), "poise-dns");
  EXPECT_TRUE(
      Within(milliseconds(2000), [&] { return OpenLookupsForTesting() == 0; }));
  EXPECT_EQ(calls.load(), 1);
}

}  // namespace
}  // namespace poise::dns
