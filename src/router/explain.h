// Where a key goes and why, as JSON: what poise-explain prints for backends
// given on its command line, and poise::grpc_lb::ExplainKey for a live
// channel's READY backends.
#ifndef POISE_SRC_ROUTER_EXPLAIN_H_
#define POISE_SRC_ROUTER_EXPLAIN_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace poise::router {

// One backend of the key's candidates: its identity, the weight routing
// uses, and its calls in flight.
struct ExplainedBackend {
  std::string identity;
  uint32_t weight = 1;
  uint64_t load = 0;
  std::string zone = std::string();  // its zone (B5); empty: none
};

// One JSON object (one line, no trailing newline):
//   {"key", "factor", "affinity" (the key's owner), "selection" (the
//    bounded decision: the first in the key's order with room),
//    "spilled", "selected_load", "selected_capacity",
//    "ranking": [{"identity", "weight", "load", "hash", "score",
//                 "score_bits", "capacity"}, ...]}   (the key's order)
// with the bound's L the sum of the loads and W of the weights. Unless
// `bounded` (weighted_rendezvous), the selection is the owner, never a
// spill; the capacities are still given. The key and the identities are
// written by JsonMember (valid UTF-8 whatever their bytes). `extra_members`,
// when not empty, is appended to the object as is (`"name":value,...`).
// INVALID_ARGUMENT when the core cannot decide (no backend, or a sum past
// its limits).
absl::StatusOr<std::string> ExplainJson(
    std::string_view key, uint32_t factor_percent,
    const std::vector<ExplainedBackend>& backends, bool bounded = true,
    std::string_view extra_members = {});

// `text` as a JSON string, quotes included, always valid UTF-8: each
// well-formed UTF-8 character as it is except '"' and '\' (escaped with a
// backslash) and U+0000 to U+001F (\u00XX); each byte that is not part of a
// well-formed sequence as U+FFFD.
std::string JsonString(std::string_view text);

// The member `"name":JsonString(bytes)`, and when `bytes` are not valid
// UTF-8 (so U+FFFD stands for some of them), right after it the member
// `"name_base64"` with the exact bytes in base64 (RFC 4648, padded): the
// bytes are the string's text, or else the base64's.
std::string JsonMember(std::string_view name, std::string_view bytes);

// What ExplainKey appends to ExplainJson for a live channel: "channel" (its
// stats label, by JsonMember), "policy", "not_ready" (the identities not
// READY, as JsonString) and, when any of those is not valid UTF-8,
// "not_ready_base64": every one of them in base64, in the same order.
std::string ExplainChannelMembers(std::string_view label,
                                  std::string_view policy,
                                  const std::vector<std::string>& not_ready);

// P8's members, appended to ExplainJson for a client in `local_zone`:
//   "local_zone"; "zone_order": the backends of the zone in the key's order,
//   each {"identity", "capacity"} (capacity by the zone's bound
//   ceil(f (L_Z + 1) w / (100 W_Z)), L_Z and W_Z the zone's loads and
//   weights summed); "zone_owner" (the first of them, null when none);
//   "zone_selection" (where the zone's rule sends the key: the owner under
//   weighted_rendezvous, else the first with room; null when it leaves the
//   zone); "left_zone": null, or why the key leaves its zone. `zone_listed`:
//   some listed backend is in the zone, READY or not (else every pick is as
//   without zones). The fleet-wide check of serverLoad and the hard limit
//   are not replayed here: their loads change at every call.
std::string ExplainZoneMembers(std::string_view key, uint32_t factor_percent,
                               const std::vector<ExplainedBackend>& backends,
                               std::string_view local_zone, bool zone_listed,
                               bool bounded);

// What an ExplainJson object was computed from, read back from its text (an
// ExplainKey answer saved from a live channel, or poise-explain's output):
// the factor and, in the ranking's order, every backend's identity (its
// bytes: from "identity_base64" when there is one), weight and load.
// INVALID_ARGUMENT naming what is missing for any other text.
struct ExplainedInputs {
  uint32_t factor_percent = 0;
  std::vector<ExplainedBackend> backends;
};
absl::StatusOr<ExplainedInputs> ReadExplainJson(std::string_view json);

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_EXPLAIN_H_
