#include "src/dns/lookup.h"

#include <ares.h>
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "src/dns/cat_and_split.h"

namespace poise::dns {
namespace {

using internal::Append;
using internal::Cat;

using Clock = std::chrono::steady_clock;

// ares_library_init once per process (it is not thread-safe itself). Never
// cleaned up: other users of c-ares in the process (gRPC) share the library.
int LibraryStatus() {
  static std::once_flag once;
  static int status = ARES_SUCCESS;
  std::call_once(once, [] { status = ares_library_init(ARES_LIB_INIT_ALL); });
  return status;
}

std::string ServerText(const LookupOptions& options) {
  return options.server ? options.server->ToString()
                        : std::string("the system resolver configuration");
}

// The c-ares status names, for messages ("ETIMEOUT: Timeout while ...").
std::string StatusText(int status) {
  const char* name = "";
  switch (status) {
    case ARES_ENODATA:
      name = "NODATA";
      break;
    case ARES_ENOTFOUND:
      name = "NXDOMAIN";
      break;
    case ARES_ESERVFAIL:
      name = "SERVFAIL";
      break;
    case ARES_EREFUSED:
      name = "REFUSED";
      break;
    case ARES_EFORMERR:
      name = "FORMERR";
      break;
    case ARES_ENOTIMP:
      name = "NOTIMP";
      break;
    case ARES_ETIMEOUT:
      name = "ETIMEOUT";
      break;
    case ARES_ECONNREFUSED:
      name = "ECONNREFUSED";
      break;
    case ARES_EBADRESP:
      name = "EBADRESP";
      break;
    case ARES_EBADNAME:
      name = "EBADNAME";
      break;
    case ARES_ECANCELLED:
      name = "ECANCELLED";
      break;
    default:
      name = "c-ares";
      break;
  }
  return Cat(name, ": ", ares_strerror(status));
}

Outcome Classify(int status) {
  switch (status) {
    case ARES_SUCCESS:
      return Outcome::kFound;
    case ARES_ENODATA:
    case ARES_ENOTFOUND:
      return Outcome::kNoRecords;
    case ARES_ETIMEOUT:
    case ARES_ECONNREFUSED:
    case ARES_ESERVFAIL:
    case ARES_EREFUSED:
    case ARES_EFORMERR:
    case ARES_ENOTIMP:
    case ARES_EBADRESP:
    case ARES_EOF:
    case ARES_ECANCELLED:  // Our own deadline.
      return Outcome::kNoAnswer;
    default:
      return Outcome::kError;
  }
}

// One query's result, filled by the c-ares callback.
struct Query {
  bool done = false;
  int status = ARES_EDESTRUCTION;
  std::vector<unsigned char> answer;
  int* pending = nullptr;
};

void OnAnswer(void* arg, int status, int /*timeouts*/, unsigned char* abuf,
              int alen) {
  auto* query = static_cast<Query*>(arg);
  query->done = true;
  query->status = status;
  if (status == ARES_SUCCESS && abuf != nullptr && alen > 0) {
    query->answer.assign(abuf, abuf + alen);
  }
  --*query->pending;
}

// A c-ares channel for one call, and the loop that drives it.
class Channel {
 public:
  Channel() = default;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  ~Channel() {
    if (channel_ != nullptr) ares_destroy(channel_);
  }

  // ARES_SUCCESS or the c-ares status that prevented the channel.
  int Init(const LookupOptions& options) {
    if (const int status = LibraryStatus(); status != ARES_SUCCESS) {
      return status;
    }
    const int attempts = std::clamp(options.attempts, 1, 8);
    const auto total_ms = std::max<int64_t>(1, options.timeout.count());
    // c-ares waits t, 2t, 4t, ... on successive rounds: fit them in total.
    const int64_t per_try_ms =
        std::max<int64_t>(1, total_ms / ((int64_t{1} << attempts) - 1));
    ares_options opts{};
    int mask = ARES_OPT_FLAGS | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES;
    opts.flags = options.server ? ARES_FLAG_NOSEARCH : 0;
    opts.timeout = static_cast<int>(std::min<int64_t>(per_try_ms, 1 << 30));
    opts.tries = attempts;
    std::string resolv_conf = options.resolv_conf_path;
    if (!options.server && !resolv_conf.empty()) {
      mask |= ARES_OPT_RESOLVCONF;
      opts.resolvconf_path = resolv_conf.data();
    }
    if (!options.server && options.resolv_conf_port != 0) {
      mask |= ARES_OPT_UDP_PORT | ARES_OPT_TCP_PORT;
      opts.udp_port = options.resolv_conf_port;
      opts.tcp_port = options.resolv_conf_port;
    }
    if (const int status = ares_init_options(&channel_, &opts, mask);
        status != ARES_SUCCESS) {
      channel_ = nullptr;
      return status;
    }
    if (options.server) {
      ares_addr_port_node node{};
      node.next = nullptr;
      const std::string ip = options.server->ip;
      int parsed = 0;
      if (options.server->family == IpFamily::kIpv6) {
        node.family = AF_INET6;
        parsed = inet_pton(AF_INET6, ip.c_str(), &node.addr.addr6);
      } else {
        node.family = AF_INET;
        parsed = inet_pton(AF_INET, ip.c_str(), &node.addr.addr4);
      }
      if (parsed != 1) return ARES_EBADSTR;
      node.udp_port = options.server->port;
      node.tcp_port = options.server->port;
      if (const int status = ares_set_servers_ports(channel_, &node);
          status != ARES_SUCCESS) {
        return status;
      }
    }
    return ARES_SUCCESS;
  }

  ares_channel get() const { return channel_; }

  // Drives the channel until *pending reaches zero or the deadline passes
  // (then cancels the queries: their callbacks see ARES_ECANCELLED).
  void Run(const int* pending, Clock::time_point deadline) {
    while (*pending > 0) {
      const Clock::time_point now = Clock::now();
      if (now >= deadline) {
        ares_cancel(channel_);
        return;
      }
      pollfd fds[ARES_GETSOCK_MAXNUM];
      const nfds_t nfds = PollFds(fds);
      const int ready = poll(fds, nfds, WaitMs(deadline - now));
      if (ready < 0 && errno != EINTR) {
        ares_cancel(channel_);
        return;
      }
      Process(fds, ready > 0 ? nfds : 0);
    }
  }

 private:
  // The channel's sockets in `fds`, each with the events c-ares waits for;
  // returns how many.
  nfds_t PollFds(pollfd* fds) const {
    ares_socket_t socks[ARES_GETSOCK_MAXNUM];
    const int bits = ares_getsock(channel_, socks, ARES_GETSOCK_MAXNUM);
    nfds_t nfds = 0;
    for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
      const bool want_read = ARES_GETSOCK_READABLE(bits, i) != 0;
      const bool want_write = ARES_GETSOCK_WRITABLE(bits, i) != 0;
      if (!want_read && !want_write) continue;
      fds[nfds].fd = socks[i];
      fds[nfds].events = static_cast<decltype(pollfd::events)>(
          (want_read ? POLLIN : 0) | (want_write ? POLLOUT : 0));
      fds[nfds].revents = 0;
      ++nfds;
    }
    return nfds;
  }

  // How long poll() may wait: c-ares's next timeout, within `left` and at
  // most a second.
  int WaitMs(Clock::duration left) const {
    const auto left_us =
        std::chrono::duration_cast<std::chrono::microseconds>(left).count();
    timeval max_wait{};
    max_wait.tv_sec = static_cast<time_t>(left_us / 1000000);
    max_wait.tv_usec = static_cast<suseconds_t>(left_us % 1000000);
    timeval wait{};
    const timeval* next = ares_timeout(channel_, &max_wait, &wait);
    // Round up so that a wake-up is never before c-ares's own timeout.
    const int64_t wait_ms = static_cast<int64_t>(next->tv_sec) * 1000 +
                            (static_cast<int64_t>(next->tv_usec) + 999) / 1000;
    return static_cast<int>(std::min<int64_t>(wait_ms, 1000));
  }

  // Hands c-ares the sockets poll() found ready among the first `nfds` of
  // `fds` (none: only its retries and per-try timeouts).
  void Process(const pollfd* fds, nfds_t nfds) {
    bool processed = false;
    for (nfds_t i = 0; i < nfds; ++i) {
      if (fds[i].revents == 0) continue;
      const bool readable =
          (fds[i].revents & (POLLIN | POLLERR | POLLHUP)) != 0;
      const bool writable = (fds[i].revents & POLLOUT) != 0;
      ares_process_fd(channel_, readable ? fds[i].fd : ARES_SOCKET_BAD,
                      writable ? fds[i].fd : ARES_SOCKET_BAD);
      processed = true;
    }
    // Retries and per-try timeouts are handled on every call; call once
    // when no socket was ready.
    if (!processed) {
      ares_process_fd(channel_, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
    }
  }

  ares_channel channel_ = nullptr;
};

std::string_view FamilyName(IpFamily family) {
  return family == IpFamily::kIpv4 ? "A" : "AAAA";
}

// The addresses of one A or AAAA answer (ARES_SUCCESS), or the parse status.
int ParseAddresses(const Query& query, IpFamily family,
                   std::vector<Address>* out) {
  hostent* host = nullptr;
  const int length = static_cast<int>(query.answer.size());
  const int status = family == IpFamily::kIpv4
                         ? ares_parse_a_reply(query.answer.data(), length,
                                              &host, nullptr, nullptr)
                         : ares_parse_aaaa_reply(query.answer.data(), length,
                                                 &host, nullptr, nullptr);
  if (status != ARES_SUCCESS) return status;
  const int af = family == IpFamily::kIpv4 ? AF_INET : AF_INET6;
  if (host->h_addrtype == af) {
    for (char** addr = host->h_addr_list; *addr != nullptr; ++addr) {
      char text[INET6_ADDRSTRLEN];
      if (inet_ntop(af, *addr, text, sizeof(text)) != nullptr) {
        out->push_back(Address{family, text});
      }
    }
  }
  ares_free_hostent(host);
  return out->empty() ? ARES_ENODATA : ARES_SUCCESS;
}

// The records of one SRV answer (ARES_SUCCESS), sorted by priority, target,
// port, weight, with those whose target is "." counted in `dot_targets`
// instead; or the parse status.
int ParseSrvRecords(const Query& query, std::vector<SrvRecord>* records,
                    size_t* dot_targets) {
  ares_srv_reply* reply = nullptr;
  const int status = ares_parse_srv_reply(
      query.answer.data(), static_cast<int>(query.answer.size()), &reply);
  if (status != ARES_SUCCESS) return status;
  for (const ares_srv_reply* r = reply; r != nullptr; r = r->next) {
    // The root name "." expands to "": the service is not available.
    if (r->host == nullptr || r->host[0] == '\0' ||
        std::strcmp(r->host, ".") == 0) {
      ++*dot_targets;
      continue;
    }
    records->push_back(SrvRecord{r->host, r->port, r->priority, r->weight});
  }
  ares_free_data(reply);
  std::sort(records->begin(), records->end(),
            [](const SrvRecord& a, const SrvRecord& b) {
              return std::tie(a.priority, a.target, a.port, a.weight) <
                     std::tie(b.priority, b.target, b.port, b.weight);
            });
  return ARES_SUCCESS;
}

std::string Describe(int status, size_t count,
                     std::chrono::milliseconds timeout) {
  if (status == ARES_SUCCESS) {
    return Cat(count, count == 1 ? " record" : " records");
  }
  if (status == ARES_ECANCELLED) {
    return Cat("no answer within ", timeout.count(), " ms");
  }
  switch (Classify(status)) {
    case Outcome::kNoRecords:
      return Cat("no records (", StatusText(status), ")");
    case Outcome::kNoAnswer:
      return Cat("no answer (", StatusText(status), ")");
    default:
      return Cat("error (", StatusText(status), ")");
  }
}

// One family's query of LookupAddresses, done or cut off: its outcome, its
// addresses (sorted, without duplicates) appended to `addresses`, and its
// part of the message.
std::string FinishFamily(const Query& query, IpFamily family,
                         std::chrono::milliseconds timeout, Outcome* outcome,
                         std::vector<Address>* addresses) {
  int status = query.done ? query.status : ARES_ECANCELLED;
  std::vector<Address> found;
  if (status == ARES_SUCCESS) status = ParseAddresses(query, family, &found);
  std::sort(found.begin(), found.end(),
            [](const Address& a, const Address& b) { return a.ip < b.ip; });
  found.erase(std::unique(found.begin(), found.end()), found.end());
  *outcome = Classify(status);
  addresses->insert(addresses->end(), found.begin(), found.end());
  return Cat(FamilyName(family), ": ", Describe(status, found.size(), timeout));
}

int Severity(Outcome outcome) {
  switch (outcome) {
    case Outcome::kFound:
      return 0;
    case Outcome::kNoRecords:
      return 1;
    case Outcome::kNoAnswer:
      return 2;
    case Outcome::kError:
      return 3;
  }
  return 3;
}

// LookupAddresses' outcome from its families' (kFound if either found an
// address, else the worse of those asked for) and its message from their
// parts.
void Summarize(bool want4, bool want6, const std::string& prefix,
               const std::vector<std::string>& parts, AddressResult* result) {
  if (!result->addresses.empty()) {
    result->outcome = Outcome::kFound;
  } else {
    const Outcome a = want4 ? result->ipv4 : Outcome::kNoRecords;
    const Outcome b = want6 ? result->ipv6 : Outcome::kNoRecords;
    result->outcome = Severity(a) >= Severity(b) ? a : b;
  }
  result->message = prefix;
  for (size_t i = 0; i < parts.size(); ++i) {
    Append(&result->message, i == 0 ? "" : "; ", parts[i]);
  }
}

}  // namespace

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kFound:
      return "found";
    case Outcome::kNoRecords:
      return "no records";
    case Outcome::kNoAnswer:
      return "no answer";
    case Outcome::kError:
      return "error";
  }
  return "error";
}

std::string SrvRecord::Identity() const { return SrvIdentity(target, port); }

SrvResult LookupSrv(std::string_view name, const LookupOptions& options) {
  SrvResult result;
  const std::string prefix =
      Cat("SRV ", name, " via ", ServerText(options), ": ");
  if (name.empty()) {
    result.outcome = Outcome::kError;
    result.message = Cat(prefix, "empty name");
    return result;
  }
  // The queries outlive the channel: ares_destroy would call back.
  int pending = 1;
  Query query;
  query.pending = &pending;
  Channel channel;
  if (const int status = channel.Init(options); status != ARES_SUCCESS) {
    result.outcome = Outcome::kError;
    result.message =
        Cat(prefix, "cannot set up c-ares (", StatusText(status), ")");
    return result;
  }
  const Clock::time_point deadline = Clock::now() + options.timeout;
  const std::string name_text(name);
  ares_query(channel.get(), name_text.c_str(), ns_c_in, ns_t_srv, OnAnswer,
             &query);
  channel.Run(&pending, deadline);
  int status = query.done ? query.status : ARES_ECANCELLED;
  size_t dot_targets = 0;
  if (status == ARES_SUCCESS) {
    status = ParseSrvRecords(query, &result.records, &dot_targets);
  }
  if (status == ARES_SUCCESS && result.records.empty()) {
    result.outcome = Outcome::kNoRecords;
    result.message = Cat(prefix, "no records (", dot_targets,
                         " with target \".\": the service is not available)");
    return result;
  }
  result.outcome = Classify(status);
  result.message =
      Cat(prefix, Describe(status, result.records.size(), options.timeout));
  if (dot_targets > 0) {
    Append(&result.message, "; ", dot_targets, " with target \".\" left out");
  }
  return result;
}

AddressResult LookupAddresses(std::string_view name,
                              const LookupOptions& options, Families families) {
  AddressResult result;
  const std::string prefix = Cat(families == Families::kIpv4   ? "A "
                                 : families == Families::kIpv6 ? "AAAA "
                                                               : "A/AAAA ",
                                 name, " via ", ServerText(options), ": ");
  if (name.empty()) {
    result.outcome = result.ipv4 = result.ipv6 = Outcome::kError;
    result.message = Cat(prefix, "empty name");
    return result;
  }
  // The queries outlive the channel: ares_destroy would call back.
  int pending = 0;
  Query query4;
  Query query6;
  query4.pending = query6.pending = &pending;
  Channel channel;
  if (const int status = channel.Init(options); status != ARES_SUCCESS) {
    result.outcome = result.ipv4 = result.ipv6 = Outcome::kError;
    result.message =
        Cat(prefix, "cannot set up c-ares (", StatusText(status), ")");
    return result;
  }
  const std::string name_text(name);
  const bool want4 = families != Families::kIpv6;
  const bool want6 = families != Families::kIpv4;
  // search: the channel has ARES_FLAG_NOSEARCH with an explicit server.
  if (want4) {
    ++pending;
    ares_search(channel.get(), name_text.c_str(), ns_c_in, ns_t_a, OnAnswer,
                &query4);
  }
  if (want6) {
    ++pending;
    ares_search(channel.get(), name_text.c_str(), ns_c_in, ns_t_aaaa, OnAnswer,
                &query6);
  }
  channel.Run(&pending, Clock::now() + options.timeout);

  std::vector<std::string> parts;
  if (want4) {
    parts.push_back(FinishFamily(query4, IpFamily::kIpv4, options.timeout,
                                 &result.ipv4, &result.addresses));
  }
  if (want6) {
    parts.push_back(FinishFamily(query6, IpFamily::kIpv6, options.timeout,
                                 &result.ipv6, &result.addresses));
  }
  Summarize(want4, want6, prefix, parts, &result);
  return result;
}

}  // namespace poise::dns
