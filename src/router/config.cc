#include "src/router/config.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace poise::router {
namespace {

// ---------------------------------------------------------------------------
// Addresses

// A port as gRPC's parsers read an IP literal's, but digits only: 0..65535,
// leading zeros allowed, so that the normalised address is the one gRPC
// prints for it. Laxer than src/dns/target.cc's ParsePortAsListed, whose
// port is printed back into the backends' identities as the text listed.
std::optional<uint16_t> ParsePortAsGrpcReadsIt(std::string_view text) {
  if (text.empty()) return std::nullopt;
  uint32_t port = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + static_cast<uint32_t>(c - '0');
    if (port > 65535) return std::nullopt;
  }
  return static_cast<uint16_t>(port);
}

// A zone as gRPC reads it: a decimal index, else an interface name.
std::optional<uint32_t> ParseZone(const std::string& zone) {
  if (zone.empty()) return std::nullopt;
  if (std::all_of(zone.begin(), zone.end(),
                  [](char c) { return c >= '0' && c <= '9'; })) {
    uint64_t index = 0;
    for (const char c : zone) {
      index = index * 10 + static_cast<uint64_t>(c - '0');
      if (index > UINT32_MAX) return std::nullopt;
    }
    return static_cast<uint32_t>(index);
  }
  const unsigned int index = if_nametoindex(zone.c_str());
  if (index == 0) return std::nullopt;
  return static_cast<uint32_t>(index);
}

// "a.b.c.d:port": exactly one colon, as gRPC's SplitHostPort requires.
std::optional<std::string> NormalizeIpv4(std::string_view text) {
  const size_t colon = text.find(':');
  if (colon == std::string_view::npos ||
      text.find(':', colon + 1) != std::string_view::npos) {
    return std::nullopt;
  }
  const std::string host(text.substr(0, colon));
  const std::optional<uint16_t> port =
      ParsePortAsGrpcReadsIt(text.substr(colon + 1));
  in_addr ip{};
  if (!port.has_value() || inet_pton(AF_INET, host.c_str(), &ip) != 1) {
    return std::nullopt;
  }
  char buffer[INET_ADDRSTRLEN];
  if (inet_ntop(AF_INET, &ip, buffer, sizeof(buffer)) == nullptr) {
    return std::nullopt;
  }
  return absl::StrCat(buffer, ":", *port);
}

// "[addr]:port" or "[addr%zone]:port" (RFC 6874 without the %25 escape, as
// gRPC takes it).
std::optional<std::string> NormalizeIpv6(std::string_view text) {
  const size_t close = text.find(']', 1);
  if (close == std::string_view::npos || close + 1 >= text.size() ||
      text[close + 1] != ':') {
    return std::nullopt;
  }
  const std::string_view host = text.substr(1, close - 1);
  const std::optional<uint16_t> port =
      ParsePortAsGrpcReadsIt(text.substr(close + 2));
  if (!port.has_value() || host.find(':') == std::string_view::npos) {
    return std::nullopt;
  }
  const size_t percent = host.rfind('%');
  const std::string ip_text(host.substr(0, percent));
  uint32_t zone = 0;
  if (percent != std::string_view::npos) {
    if (ip_text.size() > INET6_ADDRSTRLEN) return std::nullopt;
    const std::optional<uint32_t> index =
        ParseZone(std::string(host.substr(percent + 1)));
    if (!index.has_value()) return std::nullopt;
    zone = *index;
  }
  in6_addr ip{};
  if (inet_pton(AF_INET6, ip_text.c_str(), &ip) != 1) return std::nullopt;
  char buffer[INET6_ADDRSTRLEN];
  if (inet_ntop(AF_INET6, &ip, buffer, sizeof(buffer)) == nullptr) {
    return std::nullopt;
  }
  if (zone != 0) return absl::StrCat("[", buffer, "%", zone, "]:", *port);
  return absl::StrCat("[", buffer, "]:", *port);
}

// ---------------------------------------------------------------------------
// Rules

// A gRPC metadata key: [0-9a-z_.-]+ (upper case is not allowed on the wire).
bool IsValidHeaderName(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

// Metadata keys a gRPC 1.51 pick never sees with the application's value:
// the transport sets them after the pick (over whatever the application
// set), or gRPC keeps them for its own load-balancing protocols.
struct HiddenHeader {
  const char* name;
  const char* why;
};
constexpr HiddenHeader kHiddenHeaders[] = {
    {"user-agent", "gRPC's transport sets it after the pick"},
    {"content-type", "gRPC's transport sets it after the pick"},
    {"te", "gRPC's transport sets it after the pick"},
    {"host", "gRPC's transport keeps it out of the pick (it sends :authority)"},
    {"endpoint-load-metrics-bin", "it is the backends' ORCA load report"},
    {"lb-token", "gRPC's grpclb policy owns it"},
    {"lb-cost-bin", "gRPC's grpclb policy owns it"},
    {"grpclb_client_stats", "gRPC's grpclb policy owns it"},
};

void CheckEndpoint(EndpointConfig& endpoint, const std::string& field,
                   std::vector<ConfigError>& errors) {
  if (!endpoint.address.has_value()) {
    if (!endpoint.identity.has_value()) {
      errors.push_back(
          {absl::StrCat(field, ".address"),
           "missing: an entry needs an address (an IP literal with a port) or "
           "an identity (matched against the resolver's identities, like a "
           "poise-dns host:port)"});
    }
  } else if (std::optional<std::string> address =
                 NormalizeAddress(*endpoint.address);
             address.has_value()) {
    endpoint.address = std::move(*address);
  } else {
    errors.push_back({absl::StrCat(field, ".address"),
                      "must be an IP literal with a port, like 10.0.0.7:8443 "
                      "or [2001:db8::7]:8443"});
  }
  if (endpoint.weight.has_value() && *endpoint.weight == 0) {
    errors.push_back({absl::StrCat(field, ".weight"), "must be at least 1"});
  }
  if (endpoint.identity.has_value() && endpoint.identity->empty()) {
    errors.push_back({absl::StrCat(field, ".identity"),
                      "must not be empty (omit it to hash the address)"});
  }
  // C10.
  if (endpoint.zone.has_value() && !IsValidZone(*endpoint.zone)) {
    errors.push_back({absl::StrCat(field, ".zone"), kZoneRule});
  }
}

// C6: each address and each identity names one endpoint. One hash map
// each: linear in the number of endpoints.
void CheckEndpointsUnique(const std::vector<EndpointConfig>& endpoints,
                          std::vector<ConfigError>& errors) {
  absl::flat_hash_map<std::string_view, size_t> addresses;
  absl::flat_hash_map<std::string_view, size_t> identities;
  addresses.reserve(endpoints.size());
  identities.reserve(endpoints.size());
  for (size_t i = 0; i < endpoints.size(); ++i) {
    const EndpointConfig& endpoint = endpoints[i];
    const std::string field = absl::StrCat("endpoints[", i, "]");
    if (endpoint.address.has_value()) {
      const auto address = addresses.emplace(*endpoint.address, i);
      if (!address.second) {
        errors.push_back({absl::StrCat(field, ".address"),
                          absl::StrCat("duplicate of endpoints[",
                                       address.first->second, "]")});
      }
    }
    // Without either, C5 reported the entry.
    if (!endpoint.address.has_value() && !endpoint.identity.has_value()) {
      continue;
    }
    const std::string_view identity =
        endpoint.identity.has_value() ? *endpoint.identity : *endpoint.address;
    const auto id = identities.emplace(identity, i);
    if (!id.second) {
      errors.push_back(
          {absl::StrCat(field, ".identity"),
           absl::StrCat("identity \"",
                        absl::string_view(identity.data(), identity.size()),
                        "\" is also used by endpoints[", id.first->second,
                        "]")});
    }
  }
}

// C8. serverLoad, on the bounded policy.
void CheckServerLoad(const ServerLoadConfig& load,
                     std::vector<ConfigError>& errors) {
  using Limits = ServerLoadConfig;
  if (!internal::IsMetricName(load.metric)) {
    errors.push_back({"serverLoad.metric", internal::kMetricNameRule});
  }
  const absl::Duration interval = load.out_of_band_interval;
  const bool interval_valid = interval == absl::ZeroDuration() ||
                              (interval >= Limits::kMinOutOfBandInterval &&
                               interval <= Limits::kMaxDuration);
  if (!interval_valid) {
    errors.push_back({"serverLoad.outOfBandInterval", kOutOfBandIntervalRule});
  }
  const absl::Duration age = load.max_report_age;
  if (age <= absl::ZeroDuration() || age > Limits::kMaxDuration) {
    errors.push_back({"serverLoad.maxReportAge", kMaxReportAgeRule});
  } else if (interval_valid && interval != absl::ZeroDuration() &&
             age <= interval) {
    errors.push_back({"serverLoad.maxReportAge",
                      "must be longer than outOfBandInterval (else every "
                      "report expires before the next)"});
  }
}

}  // namespace

bool ServerLoadConfig::operator==(const ServerLoadConfig& other) const {
  return metric == other.metric &&
         out_of_band_interval == other.out_of_band_interval &&
         max_report_age == other.max_report_age && admission == other.admission;
}

std::optional<MissingKey> ParseMissingKey(std::string_view name) {
  if (name == "RANDOM") return MissingKey::kRandom;
  if (name == "FAIL") return MissingKey::kFail;
  return std::nullopt;
}

std::optional<RetryRouting> ParseRetryRouting(std::string_view name) {
  if (name == "NEXT_CHOICE") return RetryRouting::kNextChoice;
  if (name == "SAME_OWNER") return RetryRouting::kSameOwner;
  return std::nullopt;
}

std::optional<LoadScopeKind> ParseLoadScope(std::string_view name) {
  if (name == "CHANNEL") return LoadScopeKind::kChannel;
  if (name == "PROCESS") return LoadScopeKind::kProcess;
  return std::nullopt;
}

namespace {

// `field` with each [index] emptied: "endpoints[7].address" is of the kind
// "endpoints[].address".
std::string KindOf(std::string_view field) {
  std::string kind;
  kind.reserve(field.size());
  bool in_index = false;
  for (const char c : field) {
    if (c == ']') in_index = false;
    if (!in_index) kind.push_back(c);
    if (c == '[') in_index = true;
  }
  return kind;
}

// Keeps the first kMaxErrorsPerKind errors of each kind and reports the
// rest of the kind as one count, on the field the kind's list belongs to:
// 100,000 duplicate endpoints make a short message, not megabytes.
void KeepFirstOfEachKind(std::vector<ConfigError>& errors) {
  absl::flat_hash_map<std::string, size_t> count;
  std::vector<std::string> kinds;  // in order of first appearance
  std::vector<ConfigError> kept;
  for (ConfigError& e : errors) {
    std::string kind = KindOf(e.field);
    size_t& n = count[kind];
    if (n++ == 0) kinds.push_back(std::move(kind));
    if (n <= kMaxErrorsPerKind) kept.push_back(std::move(e));
  }
  for (const std::string& kind : kinds) {
    const size_t n = count[kind];
    if (n <= kMaxErrorsPerKind) continue;
    kept.push_back(
        {kind.substr(0, kind.find('[')),
         absl::StrCat(n - kMaxErrorsPerKind, " more errors on ", kind,
                      " (the first ", kMaxErrorsPerKind, " are listed)")});
  }
  errors = std::move(kept);
}

}  // namespace

std::optional<absl::Duration> ParseDuration(std::string_view text) {
  constexpr int64_t kMaxSeconds = 315'576'000'000;  // google.protobuf.Duration
  const auto all_digits = [](std::string_view digits) {
    return !digits.empty() &&
           std::all_of(digits.begin(), digits.end(),
                       [](char c) { return c >= '0' && c <= '9'; });
  };
  if (text.empty() || text.back() != 's') return std::nullopt;
  text.remove_suffix(1);
  const bool negative = !text.empty() && text.front() == '-';
  if (negative) text.remove_prefix(1);
  const size_t dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  if (!all_digits(whole) || whole.size() > 12 ||
      (dot != std::string_view::npos &&
       (!all_digits(fraction) || fraction.size() > 9))) {
    return std::nullopt;
  }
  int64_t seconds = 0;
  for (const char c : whole) seconds = seconds * 10 + (c - '0');
  if (seconds > kMaxSeconds) return std::nullopt;
  int64_t nanos = 0;
  for (size_t i = 0; i < 9; ++i) {
    nanos = nanos * 10 + (i < fraction.size() ? fraction[i] - '0' : 0);
  }
  const absl::Duration d = absl::Seconds(seconds) + absl::Nanoseconds(nanos);
  return negative ? -d : d;
}

std::optional<std::string> NormalizeAddress(std::string_view text) {
  // gRPC's parsers read the host as a C string; a NUL would cut it short.
  if (text.empty() || text.find('\0') != std::string_view::npos) {
    return std::nullopt;
  }
  return text.front() == '[' ? NormalizeIpv6(text) : NormalizeIpv4(text);
}

bool IsValidZone(std::string_view zone) {
  return !zone.empty() && zone.size() <= kMaxZoneLength &&
         std::all_of(zone.begin(), zone.end(),
                     [](char c) { return c >= 0x20 && c <= 0x7e; });
}

std::vector<ConfigError> NormalizeAndValidate(Config& config) {
  std::vector<ConfigError> errors;
  // C1. hashHeader.
  if (!IsValidHeaderName(config.hash_header)) {
    errors.push_back(
        {"hashHeader",
         "must be a lower-case metadata key of characters [0-9a-z_.-]"});
  } else if (absl::StartsWith(config.hash_header, "grpc-")) {
    errors.push_back(
        {"hashHeader", "keys starting with \"grpc-\" are reserved by gRPC"});
  } else {
    for (const HiddenHeader& hidden : kHiddenHeaders) {
      if (config.hash_header == hidden.name) {
        errors.push_back(
            {"hashHeader",
             absl::StrCat("\"", hidden.name,
                          "\" is not visible to the pick: ", hidden.why)});
      }
    }
  }
  // C2. balanceFactorPercent.
  if (config.balance_factor_percent < 100) {
    errors.push_back({"balanceFactorPercent",
                      "must be at least 100 (a smaller factor can leave no "
                      "backend with room)"});
  }
  // C3. defaultWeight.
  if (config.default_weight == 0) {
    errors.push_back({"defaultWeight", "must be at least 1"});
  }
  // C4. maxInFlightPerBackend.
  if (config.max_in_flight_per_backend.has_value() &&
      *config.max_in_flight_per_backend == 0) {
    errors.push_back(
        {"maxInFlightPerBackend", "must be at least 1 (omit it for no limit)"});
  }
  // C5. Each endpoint on its own; addresses are normalised before C6
  // compares them. No rule bounds the weights' sum: the core sums eligible
  // weights in 64 bits, which fewer than 2^32 weights of 32 bits cannot
  // overflow.
  for (size_t i = 0; i < config.endpoints.size(); ++i) {
    CheckEndpoint(config.endpoints[i], absl::StrCat("endpoints[", i, "]"),
                  errors);
  }
  // C6. Unique addresses and identities.
  CheckEndpointsUnique(config.endpoints, errors);
  // C7. slowStart.
  if (config.slow_start.has_value()) {
    const SlowStartConfig& slow = *config.slow_start;
    if (slow.window <= absl::ZeroDuration() ||
        slow.window > SlowStartConfig::kMaxWindow) {
      errors.push_back({"slowStart.window", kWindowRule});
    }
    if (slow.min_weight_percent < 1 || slow.min_weight_percent > 100) {
      errors.push_back(
          {"slowStart.minWeightPercent", "must be between 1 and 100"});
    }
  }
  // C8. serverLoad.
  if (config.server_load.has_value()) {
    if (!config.bounded) {
      errors.push_back({"serverLoad",
                        "belongs to bounded_load_rendezvous (only it bounds "
                        "loads)"});
    } else {
      CheckServerLoad(*config.server_load, errors);
    }
  }
  // C9. keyCache.
  const std::optional<uint32_t>& entries = config.key_cache.entries;
  if (entries.has_value() && (*entries < KeyCacheConfig::kMinEntries ||
                              *entries > KeyCacheConfig::kMaxEntries)) {
    errors.push_back({"keyCache", kKeyCacheRule});
  }
  // C10. localZone and zoneByIdentitySuffix (the endpoints' zones: with
  // C5).
  if (config.local_zone.has_value() && !IsValidZone(*config.local_zone)) {
    errors.push_back({"localZone", kZoneRule});
  }
  for (size_t i = 0; i < config.zone_by_identity_suffix.size(); ++i) {
    const ZoneSuffixConfig& z = config.zone_by_identity_suffix[i];
    const std::string field = absl::StrCat("zoneByIdentitySuffix[", i, "]");
    if (z.suffix.empty()) {
      errors.push_back({absl::StrCat(field, ".suffix"),
                        "must not be empty (it would match every backend)"});
    }
    if (!IsValidZone(z.zone)) {
      errors.push_back({absl::StrCat(field, ".zone"), kZoneRule});
    }
  }
  KeepFirstOfEachKind(errors);
  return errors;
}

}  // namespace poise::router
