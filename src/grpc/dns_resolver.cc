// The poise-dns and poise-srv resolvers.
//
// Both are gRPC PollingResolvers: re-resolution when the policy asks, with
// GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS (30 s by default) between two
// resolutions and gRPC's DNS backoff after a failed one, plus a periodic
// refresh every kDnsRefreshIntervalArg (30 s by default).
//
// A resolution round (LookupRequest) blocks no thread: every name of the
// target is looked up at once and the round has one deadline, the query
// timeout (GRPC_ARG_DNS_ARES_QUERY_TIMEOUT_MS, 5 s by default); poise-srv
// looks its SRV name up first, then the targets within what is left. With a
// DNS server in the target, c-ares on the poise-dns thread does the lookups
// (poise::dns); without one, SRV likewise (with the system's configuration)
// and A/AAAA through gRPC's own asynchronous DNS resolver interface
// (GetDNSResolver()->LookupHostname, which honours GRPC_DNS_RESOLVER). Each
// step continues on gRPC's event engine; the result reaches the channel
// through PollingResolver::OnRequestComplete (the work serializer). Shutting
// the resolver down cancels the lookups in flight and drops their result.
//
// With a server, c-ares tells "no records" from "no answer"; gRPC's interface
// reports failures as text only (ClassifyGrpcError). SRV always uses c-ares
// (gRPC 1.51's LookupSRV drops the target names).
//
// Every address gets the per-address channel arg kIdentityAddressArg.
#include "src/grpc/dns_resolver.h"

#include <grpc/impl/codegen/grpc_types.h>
#include <grpc/support/log.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "poise/grpc_lb.h"
#include "src/core/ext/filters/client_channel/resolver/polling_resolver.h"
#include "src/core/lib/address_utils/parse_address.h"
#include "src/core/lib/backoff/backoff.h"
#include "src/core/lib/channel/channel_args.h"
#include "src/core/lib/debug/trace.h"
#include "src/core/lib/event_engine/default_event_engine.h"
#include "src/core/lib/gprpp/debug_location.h"
#include "src/core/lib/gprpp/orphanable.h"
#include "src/core/lib/gprpp/ref_counted_ptr.h"
#include "src/core/lib/gprpp/time.h"
#include "src/core/lib/gprpp/work_serializer.h"
#include "src/core/lib/iomgr/closure.h"
#include "src/core/lib/iomgr/error.h"
#include "src/core/lib/iomgr/exec_ctx.h"
#include "src/core/lib/iomgr/resolve_address.h"
#include "src/core/lib/iomgr/resolved_address.h"
#include "src/core/lib/iomgr/timer.h"
#include "src/core/lib/resolver/resolver.h"
#include "src/core/lib/resolver/resolver_factory.h"
#include "src/core/lib/resolver/server_address.h"
#include "src/core/lib/uri/uri_parser.h"
#include "src/dns/lookup.h"
#include "src/dns/target.h"

namespace poise::grpc_lb {
namespace {

using grpc_core::ChannelArgs;
using grpc_core::Duration;
using grpc_core::OrphanablePtr;
using grpc_core::RefCountedPtr;
using grpc_core::Resolver;
using grpc_core::ResolverArgs;
using grpc_core::ServerAddress;
using grpc_core::ServerAddressList;
using grpc_core::Timestamp;

// GRPC_TRACE=poise_dns: every resolution, what it kept and what it dropped.
grpc_core::TraceFlag poise_dns_trace(false, "poise_dns");

#define POISE_DNS_TRACE(...)                        \
  do {                                              \
    if (GRPC_TRACE_FLAG_ENABLED(poise_dns_trace)) { \
      gpr_log(GPR_INFO, __VA_ARGS__);               \
    }                                               \
  } while (0)

static_assert(std::string_view(kDnsResolverScheme) == dns::kDnsScheme &&
                  std::string_view(kSrvResolverScheme) == dns::kSrvScheme,
              "the public scheme names are the parser's");

// A failed round's message names at most this many names: it goes on every
// call that fails for it (300 names made 9.8 KB per call).
constexpr size_t kMaxNamesInFailure = 10;

// "a:1, b:2, ... and N more".
std::string FirstNames(const std::vector<std::string>& names) {
  const size_t shown = std::min(names.size(), kMaxNamesInFailure);
  std::string out = absl::StrJoin(
      names.begin(), names.begin() + static_cast<std::ptrdiff_t>(shown), ", ");
  if (names.size() > shown) {
    absl::StrAppend(&out, " and ", names.size() - shown, " more");
  }
  return out;
}

constexpr Duration kDefaultMinTimeBetweenResolutions = Duration::Seconds(30);
constexpr Duration kDefaultRefreshInterval = Duration::Seconds(30);
constexpr std::chrono::milliseconds kDefaultQueryTimeout{5000};

// One name of a round: what to look up, and the identity of its backend.
struct HostToFind {
  std::string host;
  uint16_t port = 0;
  std::string identity;
  uint32_t weight = 0;  // kSrvWeightsArg: the SRV record's; 0: none
};

// One backend as one resolution saw it.
struct NameResult {
  std::string identity;
  uint32_t weight = 0;  // its addresses' weight attribute; 0: none
  dns::Outcome outcome = dns::Outcome::kError;
  std::vector<grpc_resolved_address> addresses;  // kFound: never empty
  std::string message;
};

// What one resolution round found.
struct RoundResult {
  std::vector<NameResult> names;
  std::string srv_error;  // the SRV name did not resolve: why
  bool srv_no_answer = false;
};

// gRPC's interface reports failures as text only: getaddrinfo's EAI_AGAIN
// ("Temporary failure in name resolution") and timeouts are "no answer",
// anything else "the name does not resolve".
dns::Outcome ClassifyGrpcError(const absl::Status& status) {
  const std::string text = status.ToString();
  if (absl::StrContains(text, "Temporary failure") ||
      absl::StrContains(text, "try again") ||
      absl::StrContains(text, "timeout") ||
      absl::StrContains(text, "Timeout") ||
      status.code() == absl::StatusCode::kDeadlineExceeded) {
    return dns::Outcome::kNoAnswer;
  }
  return dns::Outcome::kNoRecords;
}

// A name found without a usable address is an error, not a backend.
NameResult Checked(NameResult result) {
  if (result.outcome == dns::Outcome::kFound && result.addresses.empty()) {
    result.outcome = dns::Outcome::kError;
    result.message += " (no usable address)";
  }
  return result;
}

// `host` as c-ares answered for it.
NameResult FromDnsAnswer(const HostToFind& host, dns::AddressResult found) {
  NameResult result;
  result.identity = host.identity;
  result.weight = host.weight;
  result.outcome = found.outcome;
  result.message = std::move(found.message);
  for (const dns::Address& address : found.addresses) {
    auto parsed = grpc_core::StringToSockaddr(address.ip, host.port);
    if (parsed.ok()) result.addresses.push_back(*parsed);
  }
  return Checked(std::move(result));
}

// `host` as gRPC's DNS resolver interface answered for it.
NameResult FromGrpcAnswer(
    const HostToFind& host,
    absl::StatusOr<std::vector<grpc_resolved_address>> found) {
  NameResult result;
  result.identity = host.identity;
  result.weight = host.weight;
  if (found.ok()) {
    result.addresses = *std::move(found);
    result.outcome = result.addresses.empty() ? dns::Outcome::kNoRecords
                                              : dns::Outcome::kFound;
    result.message = absl::StrCat(host.host, ": ", result.addresses.size(),
                                  " addresses (system resolver)");
  } else {
    result.outcome = ClassifyGrpcError(found.status());
    result.message = absl::StrCat(host.host, ": ", found.status().ToString());
  }
  return Checked(std::move(result));
}

class PoiseResolver;

// One resolution round (see the top of the file). Orphaning it (the channel
// shut the resolver down) cancels its lookups and drops their result.
class LookupRequest final
    : public grpc_core::InternallyRefCounted<LookupRequest> {
 public:
  explicit LookupRequest(RefCountedPtr<PoiseResolver> resolver);
  void Orphan() override;

 private:
  using SystemAnswer = absl::StatusOr<std::vector<grpc_resolved_address>>;

  // Looks `hosts` up, all at once.
  void StartHostsLocked(std::vector<HostToFind> hosts)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The steps, each on gRPC's event engine (OnSystemAnswer: where gRPC's
  // DNS resolver calls back).
  void OnSrv(dns::SrvResult&& srv);
  void OnAddresses(std::vector<dns::AddressResult>&& found);
  void OnSystemAnswer(size_t index, SystemAnswer found);
  // Hands the round to the resolver (callbacks of a cancelled request
  // return before this).
  void Deliver(RoundResult round);

  // A callback for the poise-dns thread that runs `step` with its result on
  // gRPC's event engine, under an ExecCtx, holding a ref to this request.
  template <typename Result>
  std::function<void(Result)> OnEventEngine(
      void (LookupRequest::*step)(Result&&));

  const RefCountedPtr<PoiseResolver> resolver_;
  const dns::LookupClock::time_point deadline_;
  grpc_core::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  std::shared_ptr<dns::PendingLookup> lookup_ ABSL_GUARDED_BY(mu_);
  std::vector<grpc_core::DNSResolver::TaskHandle> system_lookups_
      ABSL_GUARDED_BY(mu_);
  // The names of the address step and, on the system path, their results.
  std::vector<HostToFind> hosts_ ABSL_GUARDED_BY(mu_);
  std::vector<NameResult> names_ ABSL_GUARDED_BY(mu_);
  size_t system_pending_ ABSL_GUARDED_BY(mu_) = 0;
};

class PoiseResolver final : public grpc_core::PollingResolver {
 public:
  struct Settings {
    Duration min_time_between_resolutions = kDefaultMinTimeBetweenResolutions;
    Duration refresh_interval = kDefaultRefreshInterval;
    std::chrono::milliseconds query_timeout = kDefaultQueryTimeout;
    bool srv_weights = false;  // kSrvWeightsArg
  };

  PoiseResolver(ResolverArgs args, const ChannelArgs& channel_args,
                std::shared_ptr<grpc_core::WorkSerializer> work_serializer,
                dns::Target target, const Settings& settings)
      : PollingResolver(std::move(args), channel_args,
                        settings.min_time_between_resolutions,
                        grpc_core::BackOff::Options()
                            .set_initial_backoff(Duration::Seconds(1))
                            .set_multiplier(1.6)
                            .set_jitter(0.2)
                            .set_max_backoff(Duration::Seconds(120)),
                        &poise_dns_trace),
        work_serializer_(std::move(work_serializer)),
        target_(std::move(target)),
        refresh_interval_(settings.refresh_interval),
        srv_weights_(settings.srv_weights) {
    options_.server = target_.server;
    options_.timeout = settings.query_timeout;
  }

  void StartLocked() override {
    PollingResolver::StartLocked();
    ArmRefreshTimerLocked();
  }

  void ShutdownLocked() override {
    shutdown_ = true;
    if (have_refresh_timer_) grpc_timer_cancel(&refresh_timer_);
    PollingResolver::ShutdownLocked();
  }

  const dns::Target& target() const { return target_; }
  const dns::LookupOptions& options() const { return options_; }
  bool srv_weights() const { return srv_weights_; }
  grpc_pollset_set* pollset_set() const { return interested_parties(); }
  grpc_event_engine::experimental::EventEngine& event_engine() const {
    return *event_engine_;
  }

  // A round's result: merged with the last good list, to the channel.
  void OnRoundDone(RoundResult round) { OnRequestComplete(Merge(round)); }

 private:
  // Combines this resolution with the last good list: found names replace
  // theirs, names without records are dropped, names without an answer keep
  // their last good addresses.
  Result Merge(RoundResult& round) {
    const std::string scheme(dns::SchemeName(target_.scheme));
    const grpc_core::MutexLock lock(&mu_);
    Result result;
    result.args = channel_args();
    if (!round.srv_error.empty()) {
      result.addresses =
          SrvFailureLocked(scheme, round.srv_error, round.srv_no_answer);
      return result;
    }
    std::vector<NameResult> kept;
    std::vector<std::string> failures;
    for (NameResult& name : round.names) {
      MergeNameLocked(scheme, name, &kept, &failures);
    }
    if (kept.empty()) {
      const std::string what =
          round.names.empty()
              ? absl::StrCat("SRV name ", target_.srv_name,
                             " has no usable records")
              : absl::StrCat("no name resolved: ", FirstNames(failures));
      result.addresses = absl::UnavailableError(
          absl::StrCat(scheme, " resolution failed: ", what));
      last_good_.clear();
      return result;
    }
    last_good_ = std::move(kept);
    result.addresses = AddressesOf(last_good_);
    return result;
  }

  // The SRV name did not resolve: without an answer the last good list is
  // kept, if there is one; otherwise the resolution fails (and without
  // records the last good list is forgotten).
  absl::StatusOr<ServerAddressList> SrvFailureLocked(
      const std::string& scheme, const std::string& srv_error,
      bool srv_no_answer) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (srv_no_answer && !last_good_.empty()) {
      POISE_DNS_TRACE(
          "[poise_dns %p] %s: keeping the last good list (%zu backends): "
          "%s",
          this, scheme.c_str(), last_good_.size(), srv_error.c_str());
      return AddressesOf(last_good_);
    }
    if (!srv_no_answer) last_good_.clear();
    return absl::UnavailableError(
        absl::StrCat(scheme, " resolution failed: ", srv_error));
  }

  // One name of this resolution into `kept`: found, with its new addresses;
  // without an answer, with its last good addresses if it has some. Else it
  // is dropped and named in `failures`.
  void MergeNameLocked(const std::string& scheme, NameResult& name,
                       std::vector<NameResult>* kept,
                       std::vector<std::string>* failures)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (name.outcome == dns::Outcome::kFound) {
      POISE_DNS_TRACE("[poise_dns %p] %s: %s -> %zu addresses", this,
                      scheme.c_str(), name.identity.c_str(),
                      name.addresses.size());
      kept->push_back(std::move(name));
      return;
    }
    const auto previous = std::find_if(
        last_good_.begin(), last_good_.end(),
        [&](const NameResult& p) { return p.identity == name.identity; });
    if (name.outcome != dns::Outcome::kNoRecords &&
        previous != last_good_.end()) {
      POISE_DNS_TRACE(
          "[poise_dns %p] %s: %s: %s; keeping its last good addresses: %s",
          this, scheme.c_str(), name.identity.c_str(),
          std::string(dns::OutcomeName(name.outcome)).c_str(),
          name.message.c_str());
      kept->push_back(*previous);
      return;
    }
    POISE_DNS_TRACE("[poise_dns %p] %s: %s: %s; dropped: %s", this,
                    scheme.c_str(), name.identity.c_str(),
                    std::string(dns::OutcomeName(name.outcome)).c_str(),
                    name.message.c_str());
    failures->push_back(absl::StrCat(
        name.identity, " (", std::string(dns::OutcomeName(name.outcome)), ")"));
  }

  static ServerAddressList AddressesOf(const std::vector<NameResult>& names) {
    ServerAddressList list;
    for (const NameResult& name : names) {
      const ChannelArgs args =
          ChannelArgs().Set(kIdentityAddressArg, name.identity);
      for (const grpc_resolved_address& address : name.addresses) {
        std::map<const char*,
                 std::unique_ptr<ServerAddress::AttributeInterface>>
            attributes;
        if (name.weight > 0) {
          attributes[grpc_core::ServerAddressWeightAttribute::
                         kServerAddressWeightAttributeKey] =
              std::make_unique<grpc_core::ServerAddressWeightAttribute>(
                  name.weight);
        }
        list.emplace_back(address, args, std::move(attributes));
      }
    }
    return list;
  }

  OrphanablePtr<Orphanable> StartRequest() override {
    return grpc_core::MakeOrphanable<LookupRequest>(
        RefCountedPtr<PoiseResolver>(static_cast<PoiseResolver*>(
            Ref(DEBUG_LOCATION, "lookup").release())));
  }

  void ArmRefreshTimerLocked() {
    if (shutdown_ || refresh_interval_ <= Duration::Zero()) return;
    Ref(DEBUG_LOCATION, "refresh-timer").release();
    GRPC_CLOSURE_INIT(&on_refresh_, OnRefresh, this, nullptr);
    have_refresh_timer_ = true;
    grpc_timer_init(&refresh_timer_, Timestamp::Now() + refresh_interval_,
                    &on_refresh_);
  }

  // NOLINTNEXTLINE(performance-unnecessary-value-param): grpc_iomgr_cb_func
  static void OnRefresh(void* arg, grpc_error_handle error) {
    auto* self = static_cast<PoiseResolver*>(arg);
    self->work_serializer_->Run([self, error] { self->OnRefreshLocked(error); },
                                DEBUG_LOCATION);
  }

  void OnRefreshLocked(const grpc_error_handle& error) {
    have_refresh_timer_ = false;
    if (error.ok() && !shutdown_) {
      POISE_DNS_TRACE("[poise_dns %p] periodic refresh", this);
      RequestReresolutionLocked();
      ArmRefreshTimerLocked();
    }
    Unref(DEBUG_LOCATION, "refresh-timer");
  }

  const std::shared_ptr<grpc_core::WorkSerializer> work_serializer_;
  // gRPC's default event engine, held: the rounds continue on it.
  const std::shared_ptr<grpc_event_engine::experimental::EventEngine>
      event_engine_ = grpc_event_engine::experimental::GetDefaultEventEngine();
  const dns::Target target_;
  const Duration refresh_interval_;
  const bool srv_weights_;
  dns::LookupOptions options_;

  // Serializer state.
  bool shutdown_ = false;
  bool have_refresh_timer_ = false;
  grpc_timer refresh_timer_;
  grpc_closure on_refresh_;

  // The last good list, by the one round at a time.
  grpc_core::Mutex mu_;
  std::vector<NameResult> last_good_ ABSL_GUARDED_BY(mu_);
};

LookupRequest::LookupRequest(RefCountedPtr<PoiseResolver> resolver)
    : resolver_(std::move(resolver)),
      deadline_(dns::LookupClock::now() + resolver_->options().timeout) {
  const dns::Target& target = resolver_->target();
  const grpc_core::MutexLock lock(&mu_);
  if (target.scheme == dns::Scheme::kSrv) {
    lookup_ =
        dns::StartSrvLookup(target.srv_name, resolver_->options(), deadline_,
                            OnEventEngine(&LookupRequest::OnSrv));
    return;
  }
  std::vector<HostToFind> hosts;
  hosts.reserve(target.names.size());
  for (const dns::NamedBackend& name : target.names) {
    hosts.push_back({name.host, name.port, name.identity});
  }
  StartHostsLocked(std::move(hosts));
}

void LookupRequest::Orphan() {
  std::shared_ptr<dns::PendingLookup> lookup;
  std::vector<grpc_core::DNSResolver::TaskHandle> system_lookups;
  {
    const grpc_core::MutexLock lock(&mu_);
    cancelled_ = true;
    lookup = std::move(lookup_);
    system_lookups = std::move(system_lookups_);
  }
  if (lookup != nullptr) lookup->Cancel();
  for (const auto& handle : system_lookups) {
    grpc_core::GetDNSResolver()->Cancel(handle);
  }
  Unref(DEBUG_LOCATION, "Orphan");
}

template <typename Result>
std::function<void(Result)> LookupRequest::OnEventEngine(
    void (LookupRequest::*step)(Result&&)) {
  return [self = Ref(DEBUG_LOCATION, "lookup"), step](Result result) mutable {
    // Runs once, on the poise-dns thread: the ref moves on with the step.
    grpc_event_engine::experimental::EventEngine& engine =
        self->resolver_->event_engine();
    engine.Run(
        [self = std::move(self), step, result = std::move(result)]() mutable {
          grpc_core::ApplicationCallbackExecCtx app_exec_ctx;
          grpc_core::ExecCtx exec_ctx;
          ((*self).*step)(std::move(result));
          self.reset();
        });
  };
}

void LookupRequest::StartHostsLocked(std::vector<HostToFind> hosts) {
  hosts_ = std::move(hosts);
  // No names (not expected): c-ares's lookup of none ends the round too.
  if (resolver_->target().server.has_value() || hosts_.empty()) {
    std::vector<std::string> names;
    names.reserve(hosts_.size());
    for (const HostToFind& host : hosts_) names.push_back(host.host);
    lookup_ =
        dns::StartAddressLookups(names, resolver_->options(), deadline_,
                                 OnEventEngine(&LookupRequest::OnAddresses));
    return;
  }
  // gRPC's resolver interface, one lookup per name, all started now.
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(
      deadline_ - dns::LookupClock::now());
  const Duration timeout =
      Duration::Milliseconds(std::max<int64_t>(1, left.count()));
  names_.resize(hosts_.size());
  system_pending_ = hosts_.size();
  for (size_t i = 0; i < hosts_.size(); ++i) {
    system_lookups_.push_back(grpc_core::GetDNSResolver()->LookupHostname(
        [self = Ref(DEBUG_LOCATION, "system lookup"), i](SystemAnswer found) {
          self->OnSystemAnswer(i, std::move(found));
        },
        hosts_[i].host, std::to_string(hosts_[i].port), timeout,
        resolver_->pollset_set(), /*name_server=*/""));
  }
}

void LookupRequest::OnSrv(dns::SrvResult&& srv) {
  RoundResult round;
  {
    const grpc_core::MutexLock lock(&mu_);
    if (cancelled_) return;
    lookup_.reset();
    const dns::Target& target = resolver_->target();
    if (srv.outcome == dns::Outcome::kFound) {
      std::set<std::string> seen;
      std::vector<HostToFind> hosts;
      for (const dns::SrvRecord& record : srv.records) {
        // Port 0 is no port a backend listens on: never connectable.
        if (record.port == 0) {
          POISE_DNS_TRACE("[poise_dns %p] SRV %s: %s port 0 is not a backend",
                          resolver_.get(), target.srv_name.c_str(),
                          record.target.c_str());
          continue;
        }
        std::string identity = record.Identity();
        if (!seen.insert(identity).second) continue;
        // SRV weights (kSrvWeightsArg): a record's weight is its backend's;
        // weight 0 leaves it to endpoints[] or defaultWeight.
        hosts.push_back({record.target, record.port, std::move(identity),
                         resolver_->srv_weights() ? record.weight : 0u});
      }
      StartHostsLocked(std::move(hosts));
      return;
    }
    if (srv.outcome == dns::Outcome::kNoRecords) {
      round.srv_error = absl::StrCat("SRV name ", target.srv_name,
                                     " has no records (", srv.message, ")");
    } else {
      round.srv_no_answer = true;
      round.srv_error = absl::StrCat("SRV name ", target.srv_name, ": ",
                                     std::string(dns::OutcomeName(srv.outcome)),
                                     " (", srv.message, ")");
    }
  }
  Deliver(std::move(round));
}

void LookupRequest::OnAddresses(std::vector<dns::AddressResult>&& found) {
  RoundResult round;
  {
    const grpc_core::MutexLock lock(&mu_);
    if (cancelled_) return;
    lookup_.reset();
    for (size_t i = 0; i < hosts_.size() && i < found.size(); ++i) {
      round.names.push_back(FromDnsAnswer(hosts_[i], std::move(found[i])));
    }
  }
  Deliver(std::move(round));
}

void LookupRequest::OnSystemAnswer(size_t index, SystemAnswer found) {
  RoundResult round;
  {
    const grpc_core::MutexLock lock(&mu_);
    if (cancelled_) return;
    names_[index] = FromGrpcAnswer(hosts_[index], std::move(found));
    if (--system_pending_ > 0) return;
    system_lookups_.clear();
    round.names = std::move(names_);
  }
  Deliver(std::move(round));
}

void LookupRequest::Deliver(RoundResult round) {
  // Outside mu_: the resolver takes its own lock. A round done just after
  // Orphan() reaches a resolver that has shut down, which drops it
  // (PollingResolver::OnRequestCompleteLocked).
  resolver_->OnRoundDone(std::move(round));
}

// A target that does not parse: the channel goes TRANSIENT_FAILURE with the
// parser's message, which names the part at fault.
class ErrorResolver final : public Resolver {
 public:
  ErrorResolver(ResolverArgs args, absl::Status status)
      : args_(std::move(args.args)),
        result_handler_(std::move(args.result_handler)),
        status_(std::move(status)) {}

  void StartLocked() override {
    Result result;
    result.addresses = absl::UnavailableError(status_.message());
    result.args = args_;
    result_handler_->ReportResult(std::move(result));
  }
  void ShutdownLocked() override {}

 private:
  ChannelArgs args_;
  std::unique_ptr<ResultHandler> result_handler_;
  absl::Status status_;
};

class PoiseResolverFactory final : public grpc_core::ResolverFactory {
 public:
  explicit PoiseResolverFactory(dns::Scheme scheme) : scheme_(scheme) {}

  absl::string_view scheme() const override {
    const std::string_view name = dns::SchemeName(scheme_);
    return {name.data(), name.size()};
  }

  // Every target is "valid" here: a bad one gets a resolver that reports the
  // part at fault, rather than gRPC's generic "invalid target" lame channel.
  bool IsValidUri(const grpc_core::URI& /*uri*/) const override { return true; }

  // The name TLS checks the backends' certificates against (and the calls'
  // :authority): the service's name or the first backend's (dns::
  // DefaultAuthority), not the path, which lists several names.
  std::string GetDefaultAuthority(const grpc_core::URI& uri) const override {
    auto target = dns::ParseTargetParts(scheme_, uri.authority(), uri.path(),
                                        uri.ToString());
    return target.ok() ? dns::DefaultAuthority(*target)
                       : ResolverFactory::GetDefaultAuthority(uri);
  }

  OrphanablePtr<Resolver> CreateResolver(ResolverArgs args) const override {
    auto target = dns::ParseTargetParts(scheme_, args.uri.authority(),
                                        args.uri.path(), args.uri.ToString());
    if (!target.ok()) {
      return grpc_core::MakeOrphanable<ErrorResolver>(std::move(args),
                                                      target.status());
    }
    PoiseResolver::Settings settings;
    settings.min_time_between_resolutions = std::max(
        Duration::Zero(), args.args
                              .GetDurationFromIntMillis(
                                  GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS)
                              .value_or(kDefaultMinTimeBetweenResolutions));
    settings.refresh_interval =
        args.args.GetDurationFromIntMillis(kDnsRefreshIntervalArg)
            .value_or(kDefaultRefreshInterval);
    const auto timeout =
        args.args.GetInt(GRPC_ARG_DNS_ARES_QUERY_TIMEOUT_MS).value_or(0);
    if (timeout > 0) {
      settings.query_timeout = std::chrono::milliseconds(timeout);
    }
    settings.srv_weights = args.args.GetInt(kSrvWeightsArg).value_or(0) != 0;
    const ChannelArgs channel_args = args.args;
    auto work_serializer = args.work_serializer;
    return grpc_core::MakeOrphanable<PoiseResolver>(
        std::move(args), channel_args, std::move(work_serializer),
        *std::move(target), settings);
  }

 private:
  dns::Scheme scheme_;
};

}  // namespace

void RegisterPoiseResolvers(grpc_core::CoreConfiguration::Builder* builder) {
  builder->resolver_registry()->RegisterResolverFactory(
      std::make_unique<PoiseResolverFactory>(dns::Scheme::kDns));
  builder->resolver_registry()->RegisterResolverFactory(
      std::make_unique<PoiseResolverFactory>(dns::Scheme::kSrv));
}

}  // namespace poise::grpc_lb
