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
};

// One JSON object (one line, no trailing newline):
//   {"key", "factor", "affinity" (the key's owner), "selection" (the
//    bounded decision: the first in the key's order with room),
//    "spilled", "selected_load", "selected_capacity",
//    "ranking": [{"identity", "weight", "load", "hash", "score",
//                 "score_bits", "capacity"}, ...]}   (the key's order)
// with the bound's L the sum of the loads and W of the weights. Unless
// `bounded` (weighted_rendezvous), the selection is the owner, never a
// spill; the capacities are still given. `extra_members`, when not empty,
// is appended to the object as is (`"name":value,...`). INVALID_ARGUMENT
// when the core cannot decide (no backend, or a sum past its limits).
absl::StatusOr<std::string> ExplainJson(
    std::string_view key, uint32_t factor_percent,
    const std::vector<ExplainedBackend>& backends, bool bounded = true,
    std::string_view extra_members = {});

// `text` as a JSON string, quotes included.
std::string JsonString(std::string_view text);

// What an ExplainJson object was computed from, read back from its text (an
// ExplainKey answer saved from a live channel, or poise-explain's output):
// the factor and, in the ranking's order, every backend's identity, weight
// and load. INVALID_ARGUMENT naming what is missing for any other text.
struct ExplainedInputs {
  uint32_t factor_percent = 0;
  std::vector<ExplainedBackend> backends;
};
absl::StatusOr<ExplainedInputs> ReadExplainJson(std::string_view json);

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_EXPLAIN_H_
