// The poise-dns and poise-srv resolvers.
//
// Both are gRPC PollingResolvers: re-resolution when the policy asks, with
// GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS (30 s by default) between two
// resolutions and gRPC's DNS backoff after a failed one, plus a periodic
// refresh every kDnsRefreshIntervalArg (30 s by default). The lookups block,
// so they run on gRPC's resolver executor, never on the work serializer;
// OnRequestComplete() hops back.
//
// A/AAAA: with an authority, c-ares against that server (poise::dns), which
// tells "no records" from "no answer"; without one, gRPC's own DNS resolver
// interface (GetDNSResolver(), which honours GRPC_DNS_RESOLVER). SRV: always
// c-ares (gRPC 1.51's LookupSRV drops the target names).
//
// Every address gets the per-address channel arg kIdentityAddressArg.
#include "src/grpc/dns_resolver.h"

#include <grpc/impl/codegen/grpc_types.h>
#include <grpc/support/log.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
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
#include "src/core/lib/gprpp/debug_location.h"
#include "src/core/lib/gprpp/orphanable.h"
#include "src/core/lib/gprpp/ref_counted_ptr.h"
#include "src/core/lib/gprpp/time.h"
#include "src/core/lib/gprpp/work_serializer.h"
#include "src/core/lib/iomgr/closure.h"
#include "src/core/lib/iomgr/error.h"
#include "src/core/lib/iomgr/exec_ctx.h"
#include "src/core/lib/iomgr/executor.h"
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

constexpr Duration kDefaultMinTimeBetweenResolutions = Duration::Seconds(30);
constexpr Duration kDefaultRefreshInterval = Duration::Seconds(30);
constexpr std::chrono::milliseconds kDefaultQueryTimeout{5000};

// One backend as one resolution saw it.
struct NameResult {
  std::string identity;
  dns::Outcome outcome = dns::Outcome::kError;
  std::vector<grpc_resolved_address> addresses;  // kFound: never empty
  std::string message;
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

NameResult LookupHost(const dns::Target& target, const std::string& host,
                      uint16_t port, std::string identity,
                      const dns::LookupOptions& options) {
  NameResult result;
  result.identity = std::move(identity);
  if (target.server.has_value()) {
    dns::AddressResult found = dns::LookupAddresses(host, options);
    result.outcome = found.outcome;
    result.message = std::move(found.message);
    for (const dns::Address& address : found.addresses) {
      auto parsed = grpc_core::StringToSockaddr(address.ip, port);
      if (parsed.ok()) result.addresses.push_back(*parsed);
    }
  } else {
    auto found = grpc_core::GetDNSResolver()->LookupHostnameBlocking(
        host, std::to_string(port));
    if (found.ok()) {
      result.addresses = std::move(*found);
      result.outcome = result.addresses.empty() ? dns::Outcome::kNoRecords
                                                : dns::Outcome::kFound;
      result.message = absl::StrCat(host, ": ", result.addresses.size(),
                                    " addresses (system resolver)");
    } else {
      result.outcome = ClassifyGrpcError(found.status());
      result.message = absl::StrCat(host, ": ", found.status().ToString());
    }
  }
  if (result.outcome == dns::Outcome::kFound && result.addresses.empty()) {
    result.outcome = dns::Outcome::kError;
    result.message += " (no usable address)";
  }
  return result;
}

class PoiseResolver;

// One resolution in flight, on gRPC's resolver executor. Orphaning it (the
// channel shut the resolver down) lets the lookup finish and its result be
// dropped by PollingResolver (which then knows it is shut down).
class LookupRequest final
    : public grpc_core::InternallyRefCounted<LookupRequest> {
 public:
  explicit LookupRequest(RefCountedPtr<PoiseResolver> resolver);
  void Orphan() override { Unref(); }

 private:
  // NOLINTNEXTLINE(performance-unnecessary-value-param): grpc_iomgr_cb_func
  static void Run(void* arg, grpc_error_handle error);

  RefCountedPtr<PoiseResolver> resolver_;
  grpc_closure closure_;
};

class PoiseResolver final : public grpc_core::PollingResolver {
 public:
  struct Settings {
    Duration min_time_between_resolutions = kDefaultMinTimeBetweenResolutions;
    Duration refresh_interval = kDefaultRefreshInterval;
    std::chrono::milliseconds query_timeout = kDefaultQueryTimeout;
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
        refresh_interval_(settings.refresh_interval) {
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

  // On the executor: looks every name up and reports the result.
  void ResolveBlocking() {
    std::vector<NameResult> names;
    std::string srv_error;
    bool srv_no_answer = false;
    if (target_.scheme == dns::Scheme::kDns) {
      for (const dns::NamedBackend& name : target_.names) {
        names.push_back(
            LookupHost(target_, name.host, name.port, name.identity, options_));
      }
    } else {
      dns::SrvResult srv = dns::LookupSrv(target_.srv_name, options_);
      if (srv.outcome == dns::Outcome::kFound) {
        std::set<std::string> seen;
        for (const dns::SrvRecord& record : srv.records) {
          std::string identity = record.Identity();
          if (!seen.insert(identity).second) continue;
          names.push_back(LookupHost(target_, record.target, record.port,
                                     std::move(identity), options_));
        }
      } else if (srv.outcome == dns::Outcome::kNoRecords) {
        srv_error = absl::StrCat("SRV name ", target_.srv_name,
                                 " has no records (", srv.message, ")");
      } else {
        srv_no_answer = true;
        srv_error = absl::StrCat("SRV name ", target_.srv_name, ": ",
                                 std::string(dns::OutcomeName(srv.outcome)),
                                 " (", srv.message, ")");
      }
    }
    OnRequestComplete(Merge(std::move(names), srv_error, srv_no_answer));
  }

 private:
  // Combines this resolution with the last good list: found names replace
  // theirs, names without records are dropped, names without an answer keep
  // their last good addresses.
  Result Merge(std::vector<NameResult> names, const std::string& srv_error,
               bool srv_no_answer) {
    const std::string scheme(dns::SchemeName(target_.scheme));
    const grpc_core::MutexLock lock(&mu_);
    Result result;
    result.args = channel_args();
    if (!srv_error.empty()) {
      result.addresses = SrvFailureLocked(scheme, srv_error, srv_no_answer);
      return result;
    }
    std::vector<NameResult> kept;
    std::vector<std::string> failures;
    for (NameResult& name : names) {
      MergeNameLocked(scheme, name, &kept, &failures);
    }
    if (kept.empty()) {
      const std::string what =
          names.empty() ? absl::StrCat("SRV name ", target_.srv_name,
                                       " has no usable records")
                        : absl::StrCat("no name resolved: ",
                                       absl::StrJoin(failures, ", "));
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
        list.emplace_back(address, args);
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
  const dns::Target target_;
  const Duration refresh_interval_;
  dns::LookupOptions options_;

  // Serializer state.
  bool shutdown_ = false;
  bool have_refresh_timer_ = false;
  grpc_timer refresh_timer_;
  grpc_closure on_refresh_;

  // The last good list, by the one request at a time on the executor.
  grpc_core::Mutex mu_;
  std::vector<NameResult> last_good_ ABSL_GUARDED_BY(mu_);
};

LookupRequest::LookupRequest(RefCountedPtr<PoiseResolver> resolver)
    : resolver_(std::move(resolver)) {
  Ref().release();  // For Run().
  GRPC_CLOSURE_INIT(&closure_, Run, this, nullptr);
  grpc_core::Executor::Run(&closure_, absl::OkStatus(),
                           grpc_core::ExecutorType::RESOLVER,
                           grpc_core::ExecutorJobType::LONG);
}

// NOLINTNEXTLINE(performance-unnecessary-value-param): grpc_iomgr_cb_func
void LookupRequest::Run(void* arg, grpc_error_handle /*error*/) {
  auto* self = static_cast<LookupRequest*>(arg);
  self->resolver_->ResolveBlocking();
  self->Unref();
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
