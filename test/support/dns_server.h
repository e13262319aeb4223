// A real DNS server for tests: dnsmasq (/usr/sbin/dnsmasq, Debian
// dnsmasq-base) on 127.0.0.1 at a free port, authoritative for one test
// domain (names under it that have no record get NXDOMAIN; names outside it
// get REFUSED, since it has no upstream servers), with records generated from
// a DnsZone.
//
//   POISE_REQUIRE_DNSMASQ();
//   DnsmasqServer dns;
//   ASSERT_TRUE(dns.Start(DnsZone()
//                             .Host("web-0.web.test", "127.0.0.2")
//                             .Srv("_grpc._tcp.web.test", "web-0.web.test",
//                                  8443)));
//   ... query dns.authority() ("127.0.0.1:N") ...
//   ASSERT_TRUE(dns.SetRecords(new_zone));   // mid-test change
//   ASSERT_TRUE(dns.Pause());                 // stops answering (SIGSTOP)
//
// Changing records. SIGHUP makes dnsmasq re-read its hosts files
// (--addn-hosts, --hostsdir, /etc/hosts) but not its configuration file, and
// srv-host= and cname= (like host-record=) exist only in the configuration.
// So SetRecords() rewrites the hosts file and sends SIGHUP when only A/AAAA
// records change, and restarts dnsmasq on the same port when SRV or CNAME
// records change. Either way it returns once dnsmasq answers from the new
// records (each generation of records carries a marker name that it waits for).
//
// Lifetime. Every call waits with a deadline, never a bare sleep. The
// destructor kills dnsmasq (SIGKILL to its process group, which holds its TCP
// children too) and reaps it, so a test that fails an assertion still stops
// it; if the test process dies, dnsmasq gets SIGKILL from the kernel
// (PR_SET_PDEATHSIG). That signal follows the thread that started the
// server: start it from the test's main thread, not from a thread that ends
// first.
#ifndef POISE_TEST_SUPPORT_DNS_SERVER_H_
#define POISE_TEST_SUPPORT_DNS_SERVER_H_

#include <gtest/gtest.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace poise::test_support {

inline constexpr char kDnsmasqPath[] = "/usr/sbin/dnsmasq";

// The records a DnsmasqServer serves.
struct DnsZone {
  struct HostRecord {
    std::string name;
    std::string ip;  // IPv4 -> A, IPv6 -> AAAA.
    friend bool operator==(const HostRecord& a, const HostRecord& b) {
      return a.name == b.name && a.ip == b.ip;
    }
  };
  struct SrvRecord {
    std::string name;  // "_grpc._tcp.web.test"
    std::string target;
    uint16_t port = 0;
    uint16_t priority = 0;
    uint16_t weight = 0;
    friend bool operator==(const SrvRecord& a, const SrvRecord& b) {
      return a.name == b.name && a.target == b.target && a.port == b.port &&
             a.priority == b.priority && a.weight == b.weight;
    }
  };

  // dnsmasq answers an alias only when its target is one of the zone's
  // hosts (or another alias).
  struct CnameRecord {
    std::string alias;
    std::string target;
    friend bool operator==(const CnameRecord& a, const CnameRecord& b) {
      return a.alias == b.alias && a.target == b.target;
    }
  };

  std::vector<HostRecord> hosts;
  std::vector<SrvRecord> srv;
  std::vector<CnameRecord> cnames;

  DnsZone& Host(std::string name, std::string ip);
  DnsZone& Cname(std::string alias, std::string target);
  DnsZone& Srv(std::string name, std::string target, uint16_t port,
               uint16_t priority = 0, uint16_t weight = 0);
};

class DnsmasqServer {
 public:
  // domain: the zone dnsmasq answers for (--local=/domain/).
  explicit DnsmasqServer(std::string domain = "test");
  DnsmasqServer(const DnsmasqServer&) = delete;
  DnsmasqServer& operator=(const DnsmasqServer&) = delete;
  ~DnsmasqServer();

  static bool Installed();

  // Starts dnsmasq at a free port with zone's records and waits until it
  // answers (at most `wait`). Retries with another port if the chosen one
  // was taken in between.
  ::testing::AssertionResult Start(
      const DnsZone& zone,
      std::chrono::milliseconds wait = std::chrono::seconds(10));

  // Serves zone from now on (see the header comment): SIGHUP for A/AAAA-only
  // changes, a restart on the same port for SRV changes. Returns once the
  // new records are served. While stopped, only records the files; Restart()
  // serves them. Fails while paused.
  ::testing::AssertionResult SetRecords(
      const DnsZone& zone,
      std::chrono::milliseconds wait = std::chrono::seconds(10));

  // SIGSTOP: dnsmasq stops answering (queries time out) until Resume().
  ::testing::AssertionResult Pause();
  // SIGCONT, and waits until it answers again.
  ::testing::AssertionResult Resume(
      std::chrono::milliseconds wait = std::chrono::seconds(10));

  // Stops dnsmasq (SIGTERM, SIGKILL after a deadline) and reaps it: its port
  // is closed, queries get ICMP port unreachable (connection refused).
  ::testing::AssertionResult Stop();
  // Starts it again on the same port with the current records.
  ::testing::AssertionResult Restart(
      std::chrono::milliseconds wait = std::chrono::seconds(10));

  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }
  // "127.0.0.1:N": the authority of a poise-dns/poise-srv target.
  std::string authority() const;
  const std::string& domain() const { return domain_; }
  // How many times dnsmasq was started (1 after Start(), +1 per restart).
  int launches() const { return launches_; }
  // The folder with the generated files and dnsmasq's log.
  const std::string& run_dir() const { return run_dir_; }
  // dnsmasq's log (stderr, with --log-queries) so far.
  std::string Log() const;

 private:
  ::testing::AssertionResult Launch(std::chrono::milliseconds wait,
                                    bool fresh_port);
  ::testing::AssertionResult WaitForGeneration(
      std::chrono::steady_clock::time_point deadline);
  ::testing::AssertionResult WriteFiles(const DnsZone& zone);
  ::testing::AssertionResult Failure(std::string_view what) const;
  bool Reap(bool block);  // true if dnsmasq has exited (and was reaped).
  void Kill();

  std::string domain_;
  std::string run_dir_;
  DnsZone zone_;
  pid_t pid_ = -1;
  uint16_t port_ = 0;
  int generation_ = 0;
  int launches_ = 0;
  bool paused_ = false;
};

// dnsmasq processes (not zombies) whose command line names a run folder made
// by a DnsmasqServer of process `owner`: what a leak check expects empty.
std::vector<pid_t> DnsmasqProcessesOf(pid_t owner);

// True when a missing dnsmasq must fail rather than skip: under CI (CI set
// and not "false"/"0"), where tools/setup.sh has installed it.
bool DnsmasqRequired();

// Skips the test if dnsmasq is not installed (fails instead under CI).
#define POISE_REQUIRE_DNSMASQ()                                          \
  do {                                                                   \
    if (!::poise::test_support::DnsmasqServer::Installed()) {            \
      if (::poise::test_support::DnsmasqRequired()) {                    \
        GTEST_FAIL() << ::poise::test_support::kDnsmasqPath              \
                     << " is missing under CI: tools/setup.sh installs " \
                        "dnsmasq-base";                                  \
      }                                                                  \
      GTEST_SKIP() << ::poise::test_support::kDnsmasqPath                \
                   << " is not installed (Debian dnsmasq-base; run "     \
                      "tools/setup.sh)";                                 \
    }                                                                    \
  } while (false)

}  // namespace poise::test_support

#endif  // POISE_TEST_SUPPORT_DNS_SERVER_H_
