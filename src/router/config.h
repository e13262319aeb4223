// The rendezvous policies' configuration and its rules, without gRPC.
//
// src/grpc loads the service config's JSON into Config (schema:
// proto/poise_config.proto) and NormalizeAndValidate() checks it, so one set
// of rules and messages serves the channel's own parse and
// ValidateServiceConfig() alike.
#ifndef POISE_SRC_ROUTER_CONFIG_H_
#define POISE_SRC_ROUTER_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "src/core/metric_name.h"

namespace poise::router {

// What a call without the hash header gets.
enum class MissingKey : uint8_t {
  kRandom,  // routed by a random key (still bounded under the bounded policy)
  kFail,    // failed with INTERNAL, naming the header
};

// The config's spelling ("RANDOM", "FAIL"); nullopt for anything else.
std::optional<MissingKey> ParseMissingKey(std::string_view name);
// The rule a spelling ParseMissingKey refuses breaks, for "missingKey".
inline constexpr char kMissingKeyRule[] = R"(must be "RANDOM" or "FAIL")";

// Where attempt k + 1 of a call (a configured retry, after k attempts) goes.
enum class RetryRouting : uint8_t {
  kNextChoice,  // to the key's (k + 1)-th choice (picker.h, P6)
  kSameOwner,   // like the first attempt
};

// The config's spelling ("NEXT_CHOICE", "SAME_OWNER"); nullopt otherwise.
std::optional<RetryRouting> ParseRetryRouting(std::string_view name);
// The rule a spelling ParseRetryRouting refuses breaks, for "retryRouting".
inline constexpr char kRetryRoutingRule[] =
    R"(must be "NEXT_CHOICE" or "SAME_OWNER")";

// Which calls in flight the bounds and maxInFlightPerBackend count
// (src/router/load_scope.h).
enum class LoadScopeKind : uint8_t {
  kChannel,  // the channel's own calls
  kProcess,  // the calls of every channel in the process of the same scope
             // name: the stats label if set, else the target
};

// The config's spelling ("CHANNEL", "PROCESS"); nullopt otherwise.
std::optional<LoadScopeKind> ParseLoadScope(std::string_view name);
// The rule a spelling ParseLoadScope refuses breaks, for "loadScope".
inline constexpr char kLoadScopeRule[] = R"(must be "CHANNEL" or "PROCESS")";

// One endpoints[] entry: settings for the resolved backend it names, by its
// address, or (no address) by its identity, which then matches the identity
// the backend gets from the resolver (a poise-dns "host:port", a poise-srv
// "target:port") or its address text.
struct EndpointConfig {
  // Normalised by NormalizeAndValidate (NormalizeAddress); nullopt: matched
  // by `identity`, which is then required.
  std::optional<std::string> address;
  std::optional<uint32_t> weight;
  std::optional<std::string> identity;
  // The backend's zone (C10), before the resolver's zone attribute (B5).
  std::optional<std::string> zone = std::nullopt;
};

// A zone (C10): 1 to kMaxZoneLength printable ASCII characters (0x20 to
// 0x7e), compared byte for byte.
inline constexpr size_t kMaxZoneLength = 64;
bool IsValidZone(std::string_view zone);
inline constexpr char kZoneRule[] =
    "must be 1 to 64 printable ASCII characters (0x20 to 0x7e)";

// zoneByIdentitySuffix[]: the zone of every backend whose identity ends
// with `suffix` (B5), so DNS-named backends (a zonal StatefulSet's pods,
// "cache-a-0.cache-a.default.svc.cluster.local:50070") get their zone
// without an endpoints[] entry each.
struct ZoneSuffixConfig {
  std::string suffix;
  std::string zone;
  bool operator==(const ZoneSuffixConfig& other) const {
    return suffix == other.suffix && zone == other.zone;
  }
};

// slowStart: a backend that becomes READY while the channel already serves
// traffic goes from minWeightPercent of its weight to all of it over
// `window` (src/router/slow_start.h).
struct SlowStartConfig {
  static constexpr uint32_t kDefaultMinWeightPercent = 10;
  static constexpr absl::Duration kMaxWindow = absl::Hours(1);

  absl::Duration window = absl::Seconds(60);
  uint32_t min_weight_percent = kDefaultMinWeightPercent;

  bool operator==(const SlowStartConfig& other) const {
    return window == other.window &&
           min_weight_percent == other.min_weight_percent;
  }
};

// serverLoad: bounds from the backends' own reports of their calls in
// flight (ORCA), so they hold across a fleet of clients
// (src/router/fleet_load.h).
struct ServerLoadConfig {
  static constexpr absl::Duration kMaxDuration = absl::Hours(1);
  static constexpr absl::Duration kMinOutOfBandInterval =
      absl::Milliseconds(10);
  static constexpr size_t kMaxMetricLength = internal::kMaxMetricNameLength;

  std::string metric = "rif";  // the OrcaLoadReport.utilization key to read
  // How often a backend is asked for a report out of band (StreamCoreMetrics);
  // zero: per-call reports only.
  absl::Duration out_of_band_interval = absl::Milliseconds(100);
  // A report older than this is ignored (the backend counts only this
  // client's calls, as without serverLoad).
  absl::Duration max_report_age = absl::Seconds(1);
  // Every call carries the bound its pick used for its backend (header
  // poise-bound), which a backend with poise::server's admission enforces;
  // a refusal updates the backend's estimate (docs/fleet-bounds.md).
  bool admission = false;
  bool operator==(const ServerLoadConfig& other) const;  // all fields
};
// The duration fields' rules (C7, C8): broken by a value out of range and by
// text that is not a duration, so both errors state the limits.
inline constexpr char kWindowRule[] =
    "must be a duration in seconds with an s suffix (like \"60s\"), longer "
    "than 0s and at most 3600s (1 h)";
inline constexpr char kOutOfBandIntervalRule[] =
    "must be a duration in seconds with an s suffix: 0s (per-call reports "
    "only) or between 0.01s and 3600s (1 h)";
inline constexpr char kMaxReportAgeRule[] =
    "must be a duration in seconds with an s suffix (like \"1s\"), longer "
    "than 0s and at most 3600s (1 h)";

// NormalizeAndValidate lists at most this many errors of one kind (one field
// of every list entry, say endpoints[].address) and counts the rest in one
// more error on the list ("endpoints").
inline constexpr size_t kMaxErrorsPerKind = 10;

// A duration in the JSON form of google.protobuf.Duration: an optional '-',
// whole seconds (at most 315,576,000,000), an optional '.' with 1 to 9
// digits, and 's' ("60s", "0.25s", "-1.000000001s"); exact to the
// nanosecond, so a limit holds for every value (gRPC's own parse keeps whole
// milliseconds). nullopt for anything else ("2h", "1e3s", "60").
std::optional<absl::Duration> ParseDuration(std::string_view text);

// keyCache: a cache of key orders, shared by the channels whose backend lists
// have the same identities and weights (src/router/key_cache.h). Off unless
// asked for: on keys that never repeat it costs a little (docs/performance.md).
struct KeyCacheConfig {
  static constexpr uint32_t kDefaultEntries = 16384;
  static constexpr uint32_t kMinEntries = 64;
  static constexpr uint32_t kMaxEntries = uint32_t{1} << 20;
  // The default cache serves lists of at least this many backends: on
  // shorter ones a pick costs about what a lookup does.
  static constexpr size_t kDefaultMinBackends = 64;

  bool enabled = false;  // "keyCache": true or a size
  // A size ("keyCache": N): N entries, for lists of any size; nullopt
  // ("keyCache": true): kDefaultEntries from kDefaultMinBackends backends.
  std::optional<uint32_t> entries;

  // The entries of the cache of a list of `backends` backends; 0: none.
  size_t EntriesFor(size_t backends) const {
    if (!enabled || backends == 0) return 0;
    if (entries.has_value()) return *entries;
    return backends >= kDefaultMinBackends ? kDefaultEntries : 0;
  }
  bool operator==(const KeyCacheConfig& other) const {
    return enabled == other.enabled && entries == other.entries;
  }
};
// The rule keyCache breaks (C9), also for a value of another JSON type.
inline constexpr char kKeyCacheRule[] =
    "must be false, true or a number of entries from 64 to 1048576";

struct Config {
  static constexpr uint32_t kDefaultBalanceFactorPercent = 150;

  bool bounded = false;  // bounded_load_rendezvous (from the policy's name)
  std::string hash_header;
  uint32_t balance_factor_percent = kDefaultBalanceFactorPercent;
  KeyCacheConfig key_cache;
  std::vector<EndpointConfig> endpoints;
  uint32_t default_weight = 1;
  MissingKey missing_key = MissingKey::kRandom;
  std::optional<uint64_t> max_in_flight_per_backend;  // nullopt: no limit
  RetryRouting retry_routing = RetryRouting::kNextChoice;
  std::optional<SlowStartConfig> slow_start;  // nullopt: off
  LoadScopeKind load_scope = LoadScopeKind::kChannel;
  std::optional<ServerLoadConfig> server_load;  // nullopt: off
  // The client's zone (C10; the channel argument poise.local_zone replaces
  // it): keys stay on its backends (picker.h, P8). nullopt: no zone rule.
  std::optional<std::string> local_zone;
  std::vector<ZoneSuffixConfig> zone_by_identity_suffix;

  // Whether calls hold an in-flight slot: the bounded policy reads the loads,
  // a hard limit counts against them, and a process scope counts every
  // channel's calls, weighted ones too, for the bounded channels sharing it.
  bool tracks_load() const {
    return bounded || max_in_flight_per_backend.has_value() ||
           load_scope == LoadScopeKind::kProcess;
  }
};

// One broken rule: the field's path from the policy's config object, as
// gRPC's ValidationErrors spells it ("endpoints[0].weight"), and what is
// wrong with it ("must be at least 1").
struct ConfigError {
  std::string field;
  std::string message;

  bool operator==(const ConfigError& other) const {
    return field == other.field && message == other.message;
  }
};

// Checks every rule of `config`, in field order, and rewrites each
// endpoint's address to NormalizeAddress() of it where it has one (so
// "[0:0::1]:80" and "[::1]:80" are found to be the same address). Empty when
// the config is valid. The rules (with their tests: docs/rules.md):
//   C1. hashHeader: a lower-case metadata key [0-9a-z_.-]+, not "grpc-...";
//   C2. balanceFactorPercent >= 100 (below, the bounds can leave no backend
//       with room);
//   C3. defaultWeight >= 1;
//   C4. maxInFlightPerBackend >= 1 when given (omitted: no limit);
//   C5. endpoints[i]: an IP literal address with a port, weight >= 1,
//       identity non-empty;
//   C6. endpoints' addresses unique, and their identities (the address when
//       none is given) unique;
//   C7. slowStart.window in (0, 1 h]; slowStart.minWeightPercent in 1..100;
//   C8. serverLoad only on bounded_load_rendezvous, the only policy that
//       bounds loads (on weighted_rendezvous its members are not checked);
//       serverLoad.metric 1..64 printable ASCII characters without spaces;
//       serverLoad.outOfBandInterval 0 (per-call reports only) or in
//       [10 ms, 1 h]; serverLoad.maxReportAge in (0, 1 h], and longer than a
//       valid non-zero outOfBandInterval (else every report would expire
//       before the next);
//   C9. keyCache as a size: KeyCacheConfig::kMinEntries to kMaxEntries;
//   C10. localZone, endpoints[i].zone and zoneByIdentitySuffix[i].zone:
//        IsValidZone; zoneByIdentitySuffix[i].suffix not empty.
// missingKey, retryRouting and loadScope have no rule here: their spellings are
// checked where they are read (ParseMissingKey, ParseRetryRouting,
// ParseLoadScope).
std::vector<ConfigError> NormalizeAndValidate(Config& config);

// The text gRPC prints for a resolved IP address (grpc_sockaddr_to_string
// without normalisation): "a.b.c.d:port" for IPv4, "[addr]:port" for IPv6 in
// inet_ntop's canonical form, with "%<zone index>" inside the brackets for a
// scoped address. Accepts what gRPC's ipv4:/ipv6: address parsers accept,
// except that the port must be decimal digits only (gRPC's sscanf would also
// take "+80", " 80" and "80x"). nullopt for anything else.
std::optional<std::string> NormalizeAddress(std::string_view text);

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_CONFIG_H_
