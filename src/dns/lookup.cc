#include "src/dns/lookup.h"

#include <ares.h>
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "src/dns/cat_and_split.h"

namespace poise::dns {
namespace {

using internal::Append;
using internal::Cat;

using Clock = LookupClock;

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

// One query's result, filled by the c-ares callback (on the thread that
// drives its channel).
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

// The c-ares channel of one lookup: set up where the lookup starts, then
// driven by the poise-dns thread alone.
class Channel {
 public:
  Channel() = default;
  Channel(const Channel&) = delete;
  Channel& operator=(const Channel&) = delete;
  ~Channel() { Close(); }

  // ARES_SUCCESS or the c-ares status that prevented the channel. c-ares's
  // tries are fitted into `total_ms`.
  int Init(const LookupOptions& options, int64_t total_ms) {
    if (const int status = LibraryStatus(); status != ARES_SUCCESS) {
      return status;
    }
    const int attempts = std::clamp(options.attempts, 1, 8);
    // c-ares waits t, 2t, 4t, ... on successive rounds: fit them in total.
    const int64_t per_try_ms = std::max<int64_t>(
        1, std::max<int64_t>(1, total_ms) / ((int64_t{1} << attempts) - 1));
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

  // Ends the queries still waiting (their callbacks see ARES_ECANCELLED) and
  // closes the sockets. Idempotent.
  void Close() {
    if (channel_ == nullptr) return;
    ares_cancel(channel_);
    ares_destroy(channel_);
    channel_ = nullptr;
  }

  // Appends the channel's sockets to `fds`, each with the events c-ares
  // waits for.
  void AppendPollFds(std::vector<pollfd>* fds) const {
    if (channel_ == nullptr) return;
    ares_socket_t socks[ARES_GETSOCK_MAXNUM];
    const int bits = ares_getsock(channel_, socks, ARES_GETSOCK_MAXNUM);
    for (int i = 0; i < ARES_GETSOCK_MAXNUM; ++i) {
      const bool want_read = ARES_GETSOCK_READABLE(bits, i) != 0;
      const bool want_write = ARES_GETSOCK_WRITABLE(bits, i) != 0;
      if (!want_read && !want_write) continue;
      pollfd fd{};
      fd.fd = socks[i];
      fd.events = static_cast<decltype(pollfd::events)>(
          (want_read ? POLLIN : 0) | (want_write ? POLLOUT : 0));
      fds->push_back(fd);
    }
  }

  // How long poll() may wait for this channel: c-ares's next timeout, within
  // `left` and at most a second.
  int WaitMs(Clock::duration left) const {
    const auto left_us = std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::microseconds>(left).count());
    if (channel_ == nullptr) return 0;
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

  // Hands c-ares the sockets poll() found ready among the `nfds` of `fds`
  // (none: only its retries and per-try timeouts).
  void Process(const pollfd* fds, size_t nfds) {
    if (channel_ == nullptr) return;
    bool processed = false;
    for (size_t i = 0; i < nfds; ++i) {
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

 private:
  ares_channel channel_ = nullptr;
};

// One StartSrvLookup() or StartAddressLookups() call: its channel and
// queries, which the poise-dns thread drives once the call has handed them
// over, and its callback.
class Lookup : public PendingLookup {
 public:
  explicit Lookup(Clock::time_point deadline)
      : deadline_(deadline),
        timeout_(std::max(std::chrono::milliseconds(0),
                          std::chrono::ceil<std::chrono::milliseconds>(
                              deadline - Clock::now()))) {}

  // On the poise-dns thread.
  bool Cancelled() const {
    const std::lock_guard<std::mutex> lock(mu_);
    return cancelled_;
  }
  bool Due(Clock::time_point now) const {
    return pending_ == 0 || now >= deadline_;
  }
  Channel& channel() { return channel_; }
  Clock::time_point deadline() const { return deadline_; }
  // Ends the queries and closes the sockets, then runs the callback with
  // the result unless the lookup was cancelled.
  virtual void Finish() = 0;

 protected:
  // Sets the channel up for the time left to the deadline: ARES_SUCCESS or
  // why not.
  int InitChannel(const LookupOptions& options) {
    return channel_.Init(options, timeout_.count());
  }

  mutable std::mutex mu_;
  bool cancelled_ = false;  // guarded by mu_
  const Clock::time_point deadline_;
  const std::chrono::milliseconds timeout_;  // from the start to the deadline
  Channel channel_;
  int pending_ = 0;  // queries not answered yet
};

// The poise-dns thread (see lookup.h): one per process, started with the
// first lookup and never stopped (lookups may be in flight at exit).
class DnsThread {
 public:
  static DnsThread& Get() {
    static auto* const thread = new DnsThread();
    return *thread;
  }

  void Add(std::shared_ptr<Lookup> lookup) {
    open_.fetch_add(1);
    {
      const std::lock_guard<std::mutex> lock(mu_);
      added_.push_back(std::move(lookup));
    }
    Wake();
  }

  void Wake() const {
    if (wake_fd_ < 0) return;
    const uint64_t one = 1;
    // EAGAIN: the counter is full, so the thread wakes anyway.
    [[maybe_unused]] const ssize_t written = write(wake_fd_, &one, sizeof one);
  }

  int open() const { return open_.load(); }

 private:
  // Without an eventfd (out of descriptors), the thread looks for new and
  // cancelled lookups this often.
  static constexpr int kNoWakeUpPollMs = 10;

  DnsThread() : wake_fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    std::thread thread([this] { Run(); });
    pthread_setname_np(thread.native_handle(), "poise-dns");
    thread.detach();
  }

  void Run() {
    std::vector<std::shared_ptr<Lookup>> lookups;
    std::vector<pollfd> fds;
    std::vector<size_t> first_fd;  // by lookup: its first entry in fds
    for (;;) {
      {
        const std::lock_guard<std::mutex> lock(mu_);
        for (auto& lookup : added_) lookups.push_back(std::move(lookup));
        added_.clear();
      }
      CloseEnded(&lookups);
      const Clock::time_point now = Clock::now();
      fds.clear();
      first_fd.clear();
      fds.push_back(pollfd{wake_fd_, POLLIN, 0});
      int wait_ms = wake_fd_ < 0 ? kNoWakeUpPollMs : -1;
      for (const auto& lookup : lookups) {
        first_fd.push_back(fds.size());
        lookup->channel().AppendPollFds(&fds);
        const int ms = lookup->channel().WaitMs(lookup->deadline() - now);
        wait_ms = wait_ms < 0 ? ms : std::min(wait_ms, ms);
      }
      first_fd.push_back(fds.size());
      const int ready = poll(fds.data(), fds.size(), wait_ms);
      if (ready < 0 && errno != EINTR) continue;
      if (wake_fd_ >= 0 && (fds[0].revents & POLLIN) != 0) {
        uint64_t count = 0;
        [[maybe_unused]] const ssize_t got =
            read(wake_fd_, &count, sizeof count);
      }
      for (size_t i = 0; i < lookups.size(); ++i) {
        const size_t begin = first_fd[i];
        lookups[i]->channel().Process(fds.data() + begin,
                                      ready > 0 ? first_fd[i + 1] - begin : 0);
      }
    }
  }

  // Drops the cancelled lookups (closing their sockets) and finishes the
  // due ones: every query answered, or the deadline passed.
  void CloseEnded(std::vector<std::shared_ptr<Lookup>>* lookups) {
    const Clock::time_point now = Clock::now();
    auto kept = lookups->begin();
    for (auto& lookup : *lookups) {
      if (lookup->Cancelled()) {
        lookup->channel().Close();
      } else if (lookup->Due(now)) {
        lookup->Finish();
      } else {
        *kept++ = std::move(lookup);
        continue;
      }
      lookup.reset();
      open_.fetch_sub(1);
    }
    lookups->erase(kept, lookups->end());
  }

  const int wake_fd_;
  std::atomic<int> open_{0};
  std::mutex mu_;
  std::vector<std::shared_ptr<Lookup>> added_;  // guarded by mu_
};

// A Lookup whose callback takes `Result`.
template <typename Result>
class LookupFor : public Lookup {
 public:
  LookupFor(Clock::time_point deadline, std::function<void(Result)> done)
      : Lookup(deadline), done_(std::move(done)) {}

  bool Cancel() final {
    std::function<void(Result)> dropped;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (!done_) return false;
      dropped = std::exchange(done_, nullptr);
      cancelled_ = true;
    }
    DnsThread::Get().Wake();
    return true;  // `dropped` goes here, on the caller's thread
  }

  void Finish() final {
    channel_.Close();
    Result result = Build();
    std::function<void(Result)> done;
    {
      const std::lock_guard<std::mutex> lock(mu_);
      done = std::exchange(done_, nullptr);
    }
    if (done) done(std::move(result));
  }

 protected:
  // The result from the queries as they ended.
  virtual Result Build() const = 0;

 private:
  std::function<void(Result)> done_;  // guarded by mu_
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

class SrvLookup final : public LookupFor<SrvResult> {
 public:
  SrvLookup(std::string_view name, const LookupOptions& options,
            Clock::time_point deadline, SrvCallback done)
      : LookupFor(deadline, std::move(done)),
        name_(name),
        prefix_(Cat("SRV ", name, " via ", ServerText(options), ": ")) {
    if (name_.empty()) {
      error_ = "empty name";
      return;
    }
    if (const int status = InitChannel(options); status != ARES_SUCCESS) {
      error_ = Cat("cannot set up c-ares (", StatusText(status), ")");
      return;
    }
    pending_ = 1;
    query_.pending = &pending_;
    ares_query(channel_.get(), name_.c_str(), ns_c_in, ns_t_srv, OnAnswer,
               &query_);
  }

 private:
  SrvResult Build() const override {
    SrvResult result;
    if (!error_.empty()) {
      result.outcome = Outcome::kError;
      result.message = Cat(prefix_, error_);
      return result;
    }
    int status = query_.done ? query_.status : ARES_ECANCELLED;
    size_t dot_targets = 0;
    if (status == ARES_SUCCESS) {
      status = ParseSrvRecords(query_, &result.records, &dot_targets);
    }
    if (status == ARES_SUCCESS && result.records.empty()) {
      result.outcome = Outcome::kNoRecords;
      result.message = Cat(prefix_, "no records (", dot_targets,
                           " with target \".\": the service is not available)");
      return result;
    }
    result.outcome = Classify(status);
    result.message =
        Cat(prefix_, Describe(status, result.records.size(), timeout_));
    if (dot_targets > 0) {
      Append(&result.message, "; ", dot_targets, " with target \".\" left out");
    }
    return result;
  }

  const std::string name_;
  const std::string prefix_;
  std::string error_;  // set when no query could be sent
  Query query_;
};

class AddressLookup final : public LookupFor<std::vector<AddressResult>> {
 public:
  AddressLookup(const std::vector<std::string>& names,
                const LookupOptions& options, Families families,
                Clock::time_point deadline, AddressesCallback done)
      : LookupFor(deadline, std::move(done)),
        want4_(families != Families::kIpv6),
        want6_(families != Families::kIpv4),
        names_(names.size()) {
    const std::string server = ServerText(options);
    const std::string_view kind = families == Families::kIpv4   ? "A "
                                  : families == Families::kIpv6 ? "AAAA "
                                                                : "A/AAAA ";
    for (size_t i = 0; i < names.size(); ++i) {
      names_[i].text = names[i];
      names_[i].prefix = Cat(kind, names[i], " via ", server, ": ");
    }
    if (names.empty()) return;
    if (const int status = InitChannel(options); status != ARES_SUCCESS) {
      error_ = Cat("cannot set up c-ares (", StatusText(status), ")");
      return;
    }
    // Every query is counted before the first is sent: c-ares may answer
    // one at once (a name it rejects).
    for (Name& name : names_) {
      if (name.text.empty()) continue;
      pending_ += (want4_ ? 1 : 0) + (want6_ ? 1 : 0);
      name.ipv4.pending = name.ipv6.pending = &pending_;
    }
    // search: the channel has ARES_FLAG_NOSEARCH with an explicit server.
    for (Name& name : names_) {
      if (name.text.empty()) continue;
      if (want4_) {
        ares_search(channel_.get(), name.text.c_str(), ns_c_in, ns_t_a,
                    OnAnswer, &name.ipv4);
      }
      if (want6_) {
        ares_search(channel_.get(), name.text.c_str(), ns_c_in, ns_t_aaaa,
                    OnAnswer, &name.ipv6);
      }
    }
  }

 private:
  struct Name {
    std::string text;
    std::string prefix;
    Query ipv4;
    Query ipv6;
  };

  std::vector<AddressResult> Build() const override {
    std::vector<AddressResult> results(names_.size());
    for (size_t i = 0; i < names_.size(); ++i) {
      const Name& name = names_[i];
      AddressResult& result = results[i];
      if (name.text.empty() || !error_.empty()) {
        result.outcome = result.ipv4 = result.ipv6 = Outcome::kError;
        result.message =
            Cat(name.prefix, name.text.empty() ? "empty name" : error_);
        continue;
      }
      std::vector<std::string> parts;
      if (want4_) {
        parts.push_back(FinishFamily(name.ipv4, IpFamily::kIpv4, timeout_,
                                     &result.ipv4, &result.addresses));
      }
      if (want6_) {
        parts.push_back(FinishFamily(name.ipv6, IpFamily::kIpv6, timeout_,
                                     &result.ipv6, &result.addresses));
      }
      Summarize(want4_, want6_, name.prefix, parts, &result);
    }
    return results;
  }

  const bool want4_;
  const bool want6_;
  // Sized once: the queries' addresses go to c-ares.
  std::vector<Name> names_;
  std::string error_;  // set when no query could be sent
};

// Waits for the callback of a lookup started by `start`, which is passed the
// callback.
template <typename Result, typename Start>
Result Await(Start start) {
  auto promise = std::make_shared<std::promise<Result>>();
  std::future<Result> future = promise->get_future();
  start([promise](Result result) { promise->set_value(std::move(result)); });
  return future.get();
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

std::shared_ptr<PendingLookup> StartSrvLookup(std::string_view name,
                                              const LookupOptions& options,
                                              LookupClock::time_point deadline,
                                              SrvCallback done) {
  auto lookup =
      std::make_shared<SrvLookup>(name, options, deadline, std::move(done));
  DnsThread::Get().Add(lookup);
  return lookup;
}

std::shared_ptr<PendingLookup> StartAddressLookups(
    const std::vector<std::string>& names, const LookupOptions& options,
    LookupClock::time_point deadline, AddressesCallback done,
    Families families) {
  auto lookup = std::make_shared<AddressLookup>(names, options, families,
                                                deadline, std::move(done));
  DnsThread::Get().Add(lookup);
  return lookup;
}

int OpenLookupsForTesting() { return DnsThread::Get().open(); }

SrvResult LookupSrv(std::string_view name, const LookupOptions& options) {
  return Await<SrvResult>([&](SrvCallback done) {
    StartSrvLookup(name, options, Clock::now() + options.timeout,
                   std::move(done));
  });
}

AddressResult LookupAddresses(std::string_view name,
                              const LookupOptions& options, Families families) {
  return Await<std::vector<AddressResult>>([&](AddressesCallback done) {
           StartAddressLookups({std::string(name)}, options,
                               Clock::now() + options.timeout, std::move(done),
                               families);
         })
      .front();
}

}  // namespace poise::dns
