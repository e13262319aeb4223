// poise-grpc: the public API of the gRPC load-balancing policies.
//
// Call RegisterPolicies() (any time: the policies register when this library
// is loaded, and it reports how that went), then select a policy in the
// channel's service config:
//
//   {"loadBalancingConfig": [{"bounded_load_rendezvous": {
//       "hashHeader": "x-session-id", "balanceFactorPercent": 150}}]}
//
// This header needs no gRPC internals.
#ifndef POISE_GRPC_LB_H_
#define POISE_GRPC_LB_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace poise::grpc_lb {

inline constexpr char kWeightedRendezvousPolicy[] = "weighted_rendezvous";
inline constexpr char kBoundedLoadRendezvousPolicy[] =
    "bounded_load_rendezvous";

// Channel argument (string) naming a channel in StatsSnapshot(); without it
// the channel's target is used. Any bytes; kept to 256 of them (a longer
// label is its first bytes, "~" and a hash of the whole: docs/metrics.md).
// gRPC passes string arguments as C strings, so one ends at its first NUL.
inline constexpr char kStatsLabelArg[] = "poise.stats_label";

// Per-address channel argument (string): the identity a resolver gives an
// address (grpc_core::ServerAddress's args). The policies hash, in order: the
// service config's endpoints[].identity for that address, this argument, the
// address text. Addresses with one identity are one backend (the first one
// listed is used). The poise-dns and poise-srv resolvers set it; any resolver
// may.
inline constexpr char kIdentityAddressArg[] = "poise.identity";

// Per-address channel argument (string): the zone a resolver gives an
// address, 1 to 64 printable ASCII characters (another value is ignored).
// The service config's endpoints[].zone for that address comes first.
inline constexpr char kZoneAddressArg[] = "poise.zone";

// Channel argument (string): the client's zone (1 to 64 printable ASCII
// characters), for example from the pod's topology.kubernetes.io/zone
// through the downward API. It replaces the policy config's localZone, so
// one service config serves every zone. Keys then stay on their owner among
// the zone's backends while the zone has room (docs/zones.md). A value that
// is not a zone is refused (logged, naming the argument): the config's
// localZone, if any, routes.
inline constexpr char kLocalZoneArg[] = "poise.local_zone";

// Channel argument (int, milliseconds): how often the poise-dns and poise-srv
// resolvers re-resolve even when no backend failed (default 30000; 0: never).
// Re-resolutions keep GRPC_ARG_DNS_MIN_TIME_BETWEEN_RESOLUTIONS_MS (default
// 30000) apart, so a shorter refresh also needs that argument lowered.
inline constexpr char kDnsRefreshIntervalArg[] =
    "poise.dns_refresh_interval_ms";

// Channel argument (int, 0 or 1; default 0): poise-srv gives each backend
// its SRV record's weight, as if the resolver had set a weight attribute:
// an endpoints[] entry's weight still comes first and defaultWeight applies
// to records of weight 0. Priorities are not used: every record is a
// backend, whatever its priority.
inline constexpr char kSrvWeightsArg[] = "poise.srv_weights";

// Target schemes of the resolvers RegisterPolicies() registers:
//   poise-dns:[//dns-server/]host:port[,host:port...]  identity "host:port"
//   poise-srv:[//dns-server/]srv-name                  identity "target:port"
// dns-server: "127.0.0.1", "127.0.0.1:5353", "[::1]:53"; none or empty: the
// system's resolver configuration.
inline constexpr char kDnsResolverScheme[] = "poise-dns";
inline constexpr char kSrvResolverScheme[] = "poise-srv";

// Both policies and both resolvers register with gRPC's core configuration
// when this library is loaded (static initialization, before main()), so the
// order of RegisterPolicies(), ValidateServiceConfig(), channels and servers
// does not matter. RegisterPolicies() returns how that went; idempotent and
// thread-safe. FailedPrecondition when the gRPC library loaded at run time is
// not the version this library was compiled against (the policies depend on
// that version's internal ABI), or when gRPC had built its configuration
// before this library was loaded (code that used gRPC during static
// initialization): registering then would abort the process.
absl::Status RegisterPolicies();

// Parses a whole service config (the JSON given to
// grpc::ChannelArguments::SetServiceConfigJSON) exactly as a channel would and
// returns its errors. gRPC turns an invalid service config into a channel that
// fails every call while the real error only reaches the log; call this first.
// Requires RegisterPolicies().
absl::Status ValidateServiceConfig(std::string_view service_config_json);

// Checks a target as a channel created with it would, with the same parsers:
// gRPC's URI parser (percent-decoding; a query or fragment is ignored, as the
// resolvers ignore it), then for poise-dns and poise-srv the resolver's own
// rules, where a bad target would only show as a TRANSIENT_FAILURE channel.
// INVALID_ARGUMENT naming the part at fault, e.g.
//   poise-dns target "poise-dns:///a.example": name 1 of 1 "a.example":
//   missing port
// Any other target (dns:, ipv4:, unix:, a bare "host:port") is checked only by
// gRPC's resolver for its scheme, as the channel checks it: OK when that
// resolver accepts it, else INVALID_ARGUMENT saying no resolver does.
absl::Status ValidateTarget(std::string_view target);

// Statistics, safe to export as metrics: request keys never appear here.

// The upper bounds of the call duration histogram's buckets, in nanoseconds
// (0.5 ms to 10 s, Prometheus-style steps); a duration equal to a bound
// counts in that bound's bucket, as Prometheus' "le" means.
inline constexpr std::array<uint64_t, 14> kCallDurationBucketBoundsNs = {
    500'000,       1'000'000,     2'500'000,     5'000'000,     10'000'000,
    25'000'000,    50'000'000,    100'000'000,   250'000'000,   500'000'000,
    1'000'000'000, 2'500'000'000, 5'000'000'000, 10'000'000'000};
// gRPC's status codes, OK (0) to UNAUTHENTICATED (16).
inline constexpr size_t kStatusCodeCount = 17;

// Calls (attempts: a configured retry is a call of its own) the policy
// routed that have ended, as gRPC reported them to the policy's call
// tracker: by status, and how long each took from the tracker's Start()
// (gRPC calls it as the pick completes) to its Finish() (the status
// arrived; CANCELLED when the call went without one).
struct CallStats {
  // by_status[c]: calls that ended with status code c (absl::StatusCode and
  // grpc_status_code share the values).
  std::array<uint64_t, kStatusCodeCount> by_status{};
  // duration_buckets[i]: calls that took at most kCallDurationBucketBoundsNs[i]
  // and more than the bound before it; the last: more than every bound.
  std::array<uint64_t, kCallDurationBucketBoundsNs.size() + 1>
      duration_buckets{};
  uint64_t duration_sum_ns = 0;  // their durations added up
};

struct BackendStats {
  std::string identity;  // the hashed identity (address text unless configured)
  std::string address;   // host:port
  uint64_t weight = 0;
  // The weight routing decides with now: weight * weight_scale, less while
  // the backend is in slow start (then the exact integer the picker uses,
  // so poise-explain can replay a decision with it).
  uint64_t effective_weight = 0;
  uint64_t weight_scale = 1;  // 1 unless some backend is in slow start
  // Calls started and not finished, in the channel's load scope: its own
  // (loadScope CHANNEL) or every channel's of the scope (PROCESS).
  uint64_t in_flight = 0;
  uint64_t peak_in_flight = 0;  // highest in_flight since the counter existed
  uint64_t picks = 0;           // calls routed here
  uint64_t spilled_in = 0;      // of those, calls whose key's owner was full
  uint64_t retried_in = 0;      // of those, retries (attempt 2 and later)
  // serverLoad: the calls in flight the backend last reported (over every
  // client) and that report's age in milliseconds; -1: no report yet.
  uint64_t reported_load = 0;
  int64_t report_age_ms = -1;
  // serverLoad: how often the fleet's total L (summed again at most once a
  // millisecond) counted this backend only up to its own bound, its
  // reports claiming more calls than that bound holds: a backend that
  // lies, or one the fleet overfilled (docs/fleet-bounds.md, "One backend's
  // word"). 0 for an honest backend within its bound.
  uint64_t capped_load_reports = 0;
  // serverLoad.admission: this channel's calls the backend refused, being
  // at the bound the call carried (not in `calls`: no failure of the
  // backend's).
  uint64_t admission_refusals = 0;
  // gRPC's connectivity state of the backend's subchannel as last reported
  // to the policy: "IDLE", "CONNECTING", "READY", "TRANSIENT_FAILURE" or
  // "SHUTDOWN".
  std::string connectivity;
  // This channel's calls to the backend that have ended, since it was listed
  // (a backend that leaves the list and returns starts from zero).
  CallStats calls;
};

struct ChannelStats {
  std::string label;  // kStatsLabelArg, or the channel target (256 bytes max)
  std::string
      policy;  // kWeightedRendezvousPolicy or kBoundedLoadRendezvousPolicy
  uint64_t picks = 0;         // completed picks
  uint64_t spills = 0;        // picks sent past a full owner
  uint64_t missing_key = 0;   // picks without the hash header
  uint64_t failed_picks = 0;  // picks failed by the policy (limit, missing key)
  // Completed picks of configured retries (the call's attempt 2 and later,
  // told by gRPC's grpc-previous-rpc-attempts; also counted in picks).
  uint64_t retries = 0;
  // Zones (localZone or kLocalZoneArg, docs/zones.md): completed picks to a
  // backend of the channel's zone, and to one outside it; both 0 without a
  // local zone or while no listed backend is in it.
  uint64_t zone_kept = 0;
  uint64_t zone_out = 0;
  // "CHANNEL" or "PROCESS" (the config's loadScope), and every call in flight
  // in that scope, to any backend: the L of the bounds.
  std::string load_scope;
  uint64_t scope_in_flight = 0;
  uint64_t scope_peak_in_flight = 0;  // the highest scope_in_flight so far
  // serverLoad (docs/fleet-bounds.md): whether it is on; the backends'
  // reports taken (per call and out of band) and refused (a value no backend
  // can report: negative, NaN, past 2^40); bounded picks that counted only
  // this client's calls for some READY backend, having no fresh report of it.
  bool server_load = false;
  uint64_t load_reports = 0;
  uint64_t refused_load_reports = 0;
  uint64_t picks_without_some_report = 0;
  // The backends' capped_load_reports, summed (BackendStats).
  uint64_t capped_load_reports = 0;
  // serverLoad.admission: calls refused by their backend at their bound,
  // to any backend (BackendStats::admission_refusals).
  uint64_t admission_refusals = 0;
  // The channel's connectivity state as the policy last reported it to gRPC
  // (the names of BackendStats::connectivity).
  std::string connectivity;
  // Every call of the channel that has ended, to any backend, including
  // backends no longer listed.
  CallStats calls;
  std::vector<BackendStats> backends;  // the current address list, in order
};

// One entry per live policy instance (one per channel using the policies).
std::vector<ChannelStats> StatsSnapshot();

// Where `key` goes on the live channel labelled `label` (kStatsLabelArg, else
// its target), and why: one JSON object on one line, as poise-explain prints
// it, with the members
//   "key"; "factor" (balanceFactorPercent); "affinity" (the key's owner);
//   "selection" (where the pick goes: the first backend in the key's order
//   with room, the owner under weighted_rendezvous); "spilled" (selection is
//   not the owner); "selected_load" and "selected_capacity";
//   "ranking": the key's order, each backend as {"identity", "weight",
//   "load", "hash", "score", "score_bits", "capacity"} (a capacity's bound
//   has L = the loads' sum, W = the weights' sum);
//   "channel" (the label), "policy", "not_ready" (the identities of the
//   backends that are not READY) and "connectivity" (the channel's state,
//   as in ChannelStats).
// The ranking is over the channel's READY backends as its current picker
// weighs them (effective weights during slow start, the loads a pick reads:
// the load scope's calls, the fleet's estimates under serverLoad).
// With no backend READY (a channel connecting, every backend failing, an
// address list replaced by one not connected yet), the object is over every
// backend ChannelStats lists, with the weights and calls in flight it shows,
// and "not_ready" names them all (but one turning READY as it is read): the
// key's order once they are READY (its calls wait or fail meanwhile, as
// "connectivity" says). The request key is used only for this answer.
// NOT_FOUND when no live channel has the label, FAILED_PRECONDITION when it
// lists no backend (no address list yet, or an empty one). Channels sharing
// a label (one loadScope PROCESS scope) are asked in turn: the first with a
// READY backend answers, else the first listing backends.
// The answer is valid UTF-8 whatever the bytes of the key, the identities
// and the label: a member whose bytes are not UTF-8 has U+FFFD for each
// byte outside a well-formed sequence and, right after it, the exact bytes
// in base64 ("key_base64", "identity_base64", ...; "not_ready_base64" lists
// every not_ready identity), so a -bin key is given back as it was.
absl::StatusOr<std::string> ExplainKey(std::string_view label,
                                       std::string_view key);
// The statistics as Prometheus text exposition format 0.0.4, for a
// /metrics endpoint (Content-Type "text/plain; version=0.0.4"): per backend
// its connectivity state, calls by status code, a call duration histogram
// and picks; per channel the same totals. Labels: "channel" (kStatsLabelArg,
// or the channel target) and "backend" (the identity), UTF-8 whatever their
// bytes (U+FFFD for each byte outside a well-formed sequence). Channels
// sharing a label are added together, and a label's channel totals keep
// counting after its channels are gone, so they never go backwards; past 32
// labels with no channel left, the oldest one's totals are added to the
// series channel="" instead.
// docs/metrics.md lists the metrics and how they map onto OpenTelemetry.
std::string PrometheusText();

}  // namespace poise::grpc_lb

#endif  // POISE_GRPC_LB_H_
