// DNS lookups with c-ares for the poise-dns and poise-srv resolvers: SRV
// records with their target names (gRPC 1.51's own SRV lookup returns
// addresses only) and A/AAAA addresses of names.
//
// Asynchronous: StartSrvLookup() and StartAddressLookups() send their
// queries and return; the queries of one call go out together (all names,
// both families) on one c-ares channel of their own, and one deadline ends
// them all. One thread per process, "poise-dns" (started by the first
// lookup), drives every lookup in flight: it waits in poll() on their
// sockets and c-ares timeouts, and calls a lookup's callback once each of its
// queries is answered or its deadline has passed. So a DNS server that does
// not answer holds sockets and a deadline per lookup, never a thread, and
// however many lookups wait, the thread sleeps in poll(). Callbacks run on
// that thread: they must be short and must not block (the resolvers hand the
// result on to gRPC's event engine). LookupSrv() and LookupAddresses() are
// the blocking forms, for tools and tests.
//
// The outcome tells a resolver what to do with its last good list:
//   kFound      at least one record: use it;
//   kNoRecords  the server answered that there is nothing: NXDOMAIN, or the
//               name has no record of the type (NODATA); for SRV also every
//               record's target being "." (RFC 2782: service not available).
//               The name stopped resolving: drop its backend;
//   kNoAnswer   no usable answer: no reply within the timeout, connection
//               refused, SERVFAIL, REFUSED, a malformed reply. Keep the last
//               good list;
//   kError      the query could not be made at all (a name c-ares rejects,
//               c-ares failed to initialise, out of memory).
//
// Queries go to DNS only (no /etc/hosts). SRV names are queried as given.
// A/AAAA names: with an explicit server, as given; with the system's
// configuration, its search domains apply as in res_search(3) (so that a
// Kubernetes short name resolves as it does for gRPC's dns: resolver). A name
// ending in '.' is absolute either way.
#ifndef POISE_DNS_LOOKUP_H_
#define POISE_DNS_LOOKUP_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/dns/target.h"

namespace poise::dns {

enum class Outcome { kFound, kNoRecords, kNoAnswer, kError };

// "found", "no records", "no answer", "error".
std::string_view OutcomeName(Outcome outcome);

struct LookupOptions {
  // The server to ask; nullopt: the system's resolver configuration.
  std::optional<DnsServer> server;
  // For the whole call of the blocking forms (every query of a call runs in
  // parallel within it; past it they return kNoAnswer). The asynchronous
  // forms take a deadline instead.
  std::chrono::milliseconds timeout{5000};
  // Tries of each server within the timeout (c-ares doubles the wait after
  // each round: the first try gets timeout / (2^attempts - 1); with a
  // deadline, the time left to it counts as the timeout).
  int attempts = 2;
  // Test hooks for the system configuration (no server): read this file
  // instead of /etc/resolv.conf, and send to this port instead of 53 (a
  // resolv.conf line names no port). Empty / 0: the defaults.
  std::string resolv_conf_path;
  uint16_t resolv_conf_port = 0;
};

struct SrvRecord {
  std::string target;  // As in the reply: no trailing dot, case kept.
  uint16_t port = 0;
  uint16_t priority = 0;
  uint16_t weight = 0;

  // SrvIdentity(target, port): "web-0.web.test:8443".
  std::string Identity() const;
  friend bool operator==(const SrvRecord& a, const SrvRecord& b) {
    return a.target == b.target && a.port == b.port &&
           a.priority == b.priority && a.weight == b.weight;
  }
};

struct SrvResult {
  Outcome outcome = Outcome::kError;
  // kFound: the records, sorted by priority, target, port, weight; records
  // whose target is "." are left out.
  std::vector<SrvRecord> records;
  // What happened, for traces: the query, the server and the c-ares status.
  std::string message;
};

struct Address {
  IpFamily family = IpFamily::kIpv4;
  std::string ip;  // "127.0.0.2", "::1" (inet_ntop text).
  friend bool operator==(const Address& a, const Address& b) {
    return a.family == b.family && a.ip == b.ip;
  }
};

enum class Families { kIpv4, kIpv6, kBoth };

struct AddressResult {
  // kFound if either family found an address; otherwise the worse of the
  // two (kError, then kNoAnswer, then kNoRecords).
  Outcome outcome = Outcome::kError;
  // IPv4 addresses, then IPv6, each sorted, without duplicates.
  std::vector<Address> addresses;
  // Per family; kNoRecords for a family that was not asked for.
  Outcome ipv4 = Outcome::kNoRecords;
  Outcome ipv6 = Outcome::kNoRecords;
  std::string message;
};

using LookupClock = std::chrono::steady_clock;

// A lookup in flight on the poise-dns thread.
class PendingLookup {
 public:
  PendingLookup() = default;
  PendingLookup(const PendingLookup&) = delete;
  PendingLookup& operator=(const PendingLookup&) = delete;
  virtual ~PendingLookup() = default;

  // Returns at once; the thread closes the lookup's sockets soon after.
  // True: the callback had not started and never will (it is destroyed by
  // this call, on the calling thread). False: it has started or run, or the
  // lookup was cancelled already.
  virtual bool Cancel() = 0;
};

using SrvCallback = std::function<void(SrvResult)>;
// One result per name, in the order of the names.
using AddressesCallback = std::function<void(std::vector<AddressResult>)>;

// The SRV records of name; `done` runs on the poise-dns thread, at the
// latest at `deadline` (unless cancelled). options.timeout is not used.
std::shared_ptr<PendingLookup> StartSrvLookup(std::string_view name,
                                              const LookupOptions& options,
                                              LookupClock::time_point deadline,
                                              SrvCallback done);

// The addresses of each of `names`, all queried at once; `done` as above.
std::shared_ptr<PendingLookup> StartAddressLookups(
    const std::vector<std::string>& names, const LookupOptions& options,
    LookupClock::time_point deadline, AddressesCallback done,
    Families families = Families::kBoth);

// Lookups started and not yet closed by the poise-dns thread (done or
// cancelled): what a test of cancellation waits to see at zero.
int OpenLookupsForTesting();

// The SRV records of name ("_grpc._tcp.web.default.svc.cluster.local"),
// blocking for at most options.timeout.
SrvResult LookupSrv(std::string_view name, const LookupOptions& options = {});

// The A and/or AAAA records of name, blocking for at most options.timeout.
AddressResult LookupAddresses(std::string_view name,
                              const LookupOptions& options = {},
                              Families families = Families::kBoth);

}  // namespace poise::dns

#endif  // POISE_DNS_LOOKUP_H_
