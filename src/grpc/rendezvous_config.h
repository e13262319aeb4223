// The service config of the rendezvous policies (schema:
// proto/poise_config.proto).
#ifndef POISE_SRC_GRPC_RENDEZVOUS_CONFIG_H_
#define POISE_SRC_GRPC_RENDEZVOUS_CONFIG_H_

#include "src/grpc/internal_guard.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/optional.h"
#include "src/core/lib/gprpp/validation_errors.h"
#include "src/core/lib/json/json.h"
#include "src/core/lib/json/json_args.h"
#include "src/core/lib/json/json_object_loader.h"

namespace poise::grpc_lb {

enum class MissingKey { kRandom, kFail };

struct EndpointConfig {
  std::string address;  // normalised "host:port" text, as the resolver prints
  absl::optional<uint32_t> weight;
  absl::optional<std::string> identity;

  static const grpc_core::JsonLoaderInterface* JsonLoader(
      const grpc_core::JsonArgs& args);
  void JsonPostLoad(const grpc_core::Json& json,
                    const grpc_core::JsonArgs& args,
                    grpc_core::ValidationErrors* errors);
};

struct RendezvousConfig {
  static constexpr uint32_t kDefaultBalanceFactorPercent = 150;

  bool bounded = false;  // set from the policy name, not from JSON
  std::string hash_header;
  uint32_t balance_factor_percent = kDefaultBalanceFactorPercent;
  std::vector<EndpointConfig> endpoints;
  uint32_t default_weight = 1;
  MissingKey missing_key = MissingKey::kRandom;
  uint64_t max_in_flight_per_backend = 0;  // 0: no limit

  // Parses one policy's config object (the value under the policy name).
  // Errors read like "errors validating bounded_load_rendezvous LB policy
  // config: [field:hashHeader error:field not present]".
  static absl::StatusOr<RendezvousConfig> Parse(const grpc_core::Json& json,
                                                bool bounded);

  static const grpc_core::JsonLoaderInterface* JsonLoader(
      const grpc_core::JsonArgs& args);
  void JsonPostLoad(const grpc_core::Json& json,
                    const grpc_core::JsonArgs& args,
                    grpc_core::ValidationErrors* errors);

 private:
  absl::optional<uint32_t> balance_factor_percent_json_;
  absl::optional<uint64_t> max_in_flight_json_;
  absl::optional<uint32_t> default_weight_json_;
  absl::optional<std::string> missing_key_json_;
};

}  // namespace poise::grpc_lb

#endif  // POISE_SRC_GRPC_RENDEZVOUS_CONFIG_H_
