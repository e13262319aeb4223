// The dnsmasq fixture itself: how it changes records, and that dnsmasq is
// gone after every way a test can end (destruction, a failed assertion, the
// test process dying), and after the whole suite.
#include "test/support/dns_server.h"

#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "src/dns/lookup.h"
#include "src/dns/target.h"
#include "test/dns/print.h"

namespace poise::test_support {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// After every test program run (each ctest case is one): no dnsmasq started
// by this process is left.
class NoDnsmasqLeftBehind : public ::testing::Environment {
 public:
  void TearDown() override {
    EXPECT_EQ(DnsmasqProcessesOf(getpid()), std::vector<pid_t>{})
        << "dnsmasq processes left by this test process";
  }
};
[[maybe_unused]] ::testing::Environment* const kLeakCheck =
    ::testing::AddGlobalTestEnvironment(new NoDnsmasqLeftBehind);

// Alive: exists and is not a zombie.
bool Alive(pid_t pid) {
  if (kill(pid, 0) != 0) return false;
  std::string stat_path = "/proc/" + std::to_string(pid) + "/stat";
  FILE* file = std::fopen(stat_path.c_str(), "r");
  if (file == nullptr) return false;
  char buffer[512] = {};
  const size_t got = std::fread(buffer, 1, sizeof(buffer) - 1, file);
  std::fclose(file);
  const std::string text(buffer, got);
  const size_t paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() ||
         text[paren + 2] != 'Z';
}

template <typename Predicate>
bool Eventually(milliseconds within, Predicate done) {
  const Clock::time_point deadline = Clock::now() + within;
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

dns::LookupOptions Via(const DnsmasqServer& dns) {
  dns::LookupOptions options;
  options.server = *dns::ParseDnsServer(dns.authority());
  options.timeout = milliseconds(2000);
  return options;
}

TEST(DnsmasqServer, ServesTheZoneOnLoopbackAtAFreePort) {
  POISE_REQUIRE_DNSMASQ();
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(DnsZone().Host("a.test", "127.0.0.2")));
  EXPECT_TRUE(dns.running());
  EXPECT_NE(dns.port(), 0);
  EXPECT_NE(dns.port(), 53);
  EXPECT_EQ(dns.authority(), "127.0.0.1:" + std::to_string(dns.port()));
  EXPECT_EQ(dns.launches(), 1);
  EXPECT_EQ(DnsmasqProcessesOf(getpid()), std::vector<pid_t>{dns.pid()});
  EXPECT_EQ(dns::LookupAddresses("a.test", Via(dns)).outcome,
            dns::Outcome::kFound);
  // Two servers side by side get different ports.
  DnsmasqServer other;
  ASSERT_TRUE(other.Start(DnsZone().Host("a.test", "127.0.0.3")));
  EXPECT_NE(other.port(), dns.port());
  const dns::AddressResult from_other =
      dns::LookupAddresses("a.test", Via(other), dns::Families::kIpv4);
  ASSERT_EQ(from_other.addresses.size(), 1U) << from_other.message;
  EXPECT_EQ(from_other.addresses[0].ip, "127.0.0.3");
}

TEST(DnsmasqServer, HostChangesAreASighupSrvChangesARestartOnTheSamePort) {
  POISE_REQUIRE_DNSMASQ();
  DnsmasqServer dns;
  DnsZone zone =
      DnsZone().Host("a.test", "127.0.0.2").Srv("_s._tcp.test", "a.test", 80);
  ASSERT_TRUE(dns.Start(zone));
  const pid_t first = dns.pid();
  const uint16_t port = dns.port();

  zone.hosts[0].ip = "127.0.0.4";
  ASSERT_TRUE(dns.SetRecords(zone));
  EXPECT_EQ(dns.pid(), first);
  EXPECT_EQ(dns.launches(), 1);
  EXPECT_EQ(dns::LookupAddresses("a.test", Via(dns)).addresses,
            (std::vector<dns::Address>{{dns::IpFamily::kIpv4, "127.0.0.4"}}));
  EXPECT_NE(dns.Log().find("read " + dns.run_dir() + "/hosts"),
            std::string::npos);

  zone.srv[0].port = 81;
  ASSERT_TRUE(dns.SetRecords(zone));
  EXPECT_NE(dns.pid(), first);
  EXPECT_EQ(dns.port(), port);
  EXPECT_EQ(dns.launches(), 2);
  EXPECT_FALSE(Alive(first));
  const dns::SrvResult srv = dns::LookupSrv("_s._tcp.test", Via(dns));
  ASSERT_EQ(srv.records.size(), 1U) << srv.message;
  EXPECT_EQ(srv.records[0].port, 81);
  EXPECT_EQ(DnsmasqProcessesOf(getpid()), std::vector<pid_t>{dns.pid()});
}

TEST(DnsmasqServer, PauseStopsAnsweringAndSetRecordsRefusesWhilePaused) {
  POISE_REQUIRE_DNSMASQ();
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(DnsZone().Host("a.test", "127.0.0.2")));
  ASSERT_TRUE(dns.Pause());
  dns::LookupOptions options = Via(dns);
  options.timeout = milliseconds(300);
  EXPECT_EQ(dns::LookupAddresses("a.test", options).outcome,
            dns::Outcome::kNoAnswer);
  EXPECT_FALSE(dns.SetRecords(DnsZone()));
  ASSERT_TRUE(dns.Resume());
  EXPECT_EQ(dns::LookupAddresses("a.test", Via(dns)).outcome,
            dns::Outcome::kFound);
  // A paused server is stopped all the same.
  ASSERT_TRUE(dns.Pause());
  const pid_t pid = dns.pid();
  ASSERT_TRUE(dns.Stop());
  EXPECT_FALSE(Alive(pid));
}

TEST(DnsmasqServer, RecordsSetWhileStoppedAreServedAfterRestart) {
  POISE_REQUIRE_DNSMASQ();
  DnsmasqServer dns;
  ASSERT_TRUE(dns.Start(DnsZone().Host("a.test", "127.0.0.2")));
  ASSERT_TRUE(dns.Stop());
  ASSERT_TRUE(dns.SetRecords(DnsZone().Host("b.test", "127.0.0.3")));
  EXPECT_FALSE(dns.running());
  ASSERT_TRUE(dns.Restart());
  EXPECT_EQ(dns::LookupAddresses("a.test", Via(dns)).outcome,
            dns::Outcome::kNoRecords);
  EXPECT_EQ(dns::LookupAddresses("b.test", Via(dns)).outcome,
            dns::Outcome::kFound);
}

TEST(DnsmasqServer, DestructionStopsDnsmasq) {
  POISE_REQUIRE_DNSMASQ();
  pid_t pid = -1;
  std::string run_dir;
  {
    DnsmasqServer dns;
    ASSERT_TRUE(dns.Start(DnsZone().Host("a.test", "127.0.0.2")));
    pid = dns.pid();
    run_dir = dns.run_dir();
    ASSERT_TRUE(Alive(pid));
  }
  EXPECT_FALSE(Alive(pid));
  EXPECT_EQ(DnsmasqProcessesOf(getpid()), std::vector<pid_t>{});
  EXPECT_NE(access(run_dir.c_str(), F_OK), 0) << run_dir << " is left";
}

pid_t g_failing_test_pid = -1;

TEST(DnsmasqServer, FailedAssertionStillStopsDnsmasq) {
  POISE_REQUIRE_DNSMASQ();
  g_failing_test_pid = -1;
  EXPECT_FATAL_FAILURE(
      {
        DnsmasqServer dns;
        ASSERT_TRUE(dns.Start(DnsZone().Host("a.test", "127.0.0.2")));
        g_failing_test_pid = dns.pid();
        ASSERT_EQ(1, 2) << "deliberate failure with dnsmasq running";
      },
      "deliberate failure with dnsmasq running");
  ASSERT_GT(g_failing_test_pid, 0);
  EXPECT_FALSE(Alive(g_failing_test_pid));
  EXPECT_EQ(DnsmasqProcessesOf(getpid()), std::vector<pid_t>{});
}

// A test process that dies without running destructors (SIGKILL) takes its
// dnsmasq with it: the kernel's parent-death signal.
TEST(DnsmasqServer, DyingTestProcessTakesDnsmasqWithIt) {
  POISE_REQUIRE_DNSMASQ();
  int fds[2];
  ASSERT_EQ(pipe(fds), 0) << std::strerror(errno);
  const pid_t child = fork();
  ASSERT_GE(child, 0) << std::strerror(errno);
  if (child == 0) {
    close(fds[0]);
    DnsmasqServer dns;
    pid_t pid = -1;
    if (dns.Start(DnsZone().Host("a.test", "127.0.0.2"))) pid = dns.pid();
    if (write(fds[1], &pid, sizeof(pid)) != sizeof(pid)) _exit(1);
    raise(SIGKILL);
    _exit(2);
  }
  close(fds[1]);
  pid_t dnsmasq = -1;
  pollfd pfd{fds[0], POLLIN, 0};
  const bool readable = poll(&pfd, 1, 15000) == 1;
  const bool got = readable && read(fds[0], &dnsmasq, sizeof(dnsmasq)) ==
                                   static_cast<ssize_t>(sizeof(dnsmasq));
  close(fds[0]);
  if (!got || dnsmasq <= 0) kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(got) << "the child did not report dnsmasq's pid";
  ASSERT_GT(dnsmasq, 0) << "the child could not start dnsmasq";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  // Gone for good: neither alive (a dying process loses its command line
  // before it is a zombie) nor any dnsmasq of the child's left.
  const bool gone = Eventually(milliseconds(5000), [&] {
    return !Alive(dnsmasq) && DnsmasqProcessesOf(child).empty();
  });
  EXPECT_TRUE(gone) << "dnsmasq " << dnsmasq << " outlived its test process";
  // On failure, stop what is left ourselves (only pids that are still the
  // child's dnsmasq, never a reused pid).
  for (const pid_t left : DnsmasqProcessesOf(child)) kill(left, SIGKILL);
  // The child's run folder: nobody else removes it.
  const std::string prefix = "poise-dnsmasq-" + std::to_string(child) + "-";
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(
           std::filesystem::temp_directory_path(), error)) {
    if (entry.path().filename().string().rfind(prefix, 0) == 0) {
      std::filesystem::remove_all(entry.path(), error);
    }
  }
}

}  // namespace
}  // namespace poise::test_support
