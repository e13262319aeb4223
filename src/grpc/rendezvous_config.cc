#include "src/grpc/rendezvous_config.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/core/lib/address_utils/parse_address.h"
#include "src/core/lib/address_utils/sockaddr_utils.h"
#include "src/core/lib/iomgr/resolved_address.h"

namespace poise::grpc_lb {
namespace {

using grpc_core::Json;
using grpc_core::JsonArgs;
using grpc_core::ValidationErrors;

// Enables the bounded-only fields when parsing bounded_load_rendezvous.
constexpr char kBoundedKey[] = "poise.bounded";

class PolicyJsonArgs final : public JsonArgs {
 public:
  explicit PolicyJsonArgs(bool bounded) : bounded_(bounded) {}
  bool IsEnabled(absl::string_view key) const override {
    return key != kBoundedKey || bounded_;
  }

 private:
  bool bounded_;
};

// A gRPC metadata key: [0-9a-z_.-]+ (upper case is not allowed on the wire).
bool IsValidHeaderName(absl::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

// Rejects members the schema does not have: gRPC's loader ignores them, and a
// misspelt "hashheader" must not silently leave a field at its default.
void RejectUnknownFields(const Json& json,
                         const std::set<absl::string_view>& known,
                         absl::string_view known_list,
                         ValidationErrors* errors) {
  if (json.type() != Json::Type::OBJECT) return;
  for (const auto& member : json.object_value()) {
    if (known.count(member.first) != 0) continue;
    ValidationErrors::ScopedField field(errors,
                                        absl::StrCat(".", member.first));
    errors->AddError(absl::StrCat("unknown field (known: ", known_list, ")"));
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// EndpointConfig

const grpc_core::JsonLoaderInterface* EndpointConfig::JsonLoader(
    const JsonArgs& /*args*/) {
  static const auto* loader =
      grpc_core::JsonObjectLoader<EndpointConfig>()
          .Field("address", &EndpointConfig::address)
          .OptionalField("weight", &EndpointConfig::weight)
          .OptionalField("identity", &EndpointConfig::identity)
          .Finish();
  return loader;
}

void EndpointConfig::JsonPostLoad(const Json& json, const JsonArgs& /*args*/,
                                  ValidationErrors* errors) {
  RejectUnknownFields(json, {"address", "weight", "identity"},
                      "address, weight, identity", errors);
  {
    ValidationErrors::ScopedField field(errors, ".address");
    if (!errors->FieldHasErrors()) {
      // Normalise to the text the resolver's addresses print as, so
      // "[::1]:80" and "[0:0::1]:80" match.
      grpc_resolved_address resolved;
      if (!grpc_parse_ipv4_hostport(address, &resolved, false) &&
          !grpc_parse_ipv6_hostport(address, &resolved, false)) {
        errors->AddError(
            "must be an IP literal with a port, like 10.0.0.7:8443 or "
            "[2001:db8::7]:8443");
      } else {
        auto text = grpc_sockaddr_to_string(&resolved, false);
        if (text.ok()) address = std::move(*text);
      }
    }
  }
  if (weight.has_value() && *weight == 0) {
    ValidationErrors::ScopedField field(errors, ".weight");
    errors->AddError("must be at least 1");
  }
  if (identity.has_value() && identity->empty()) {
    ValidationErrors::ScopedField field(errors, ".identity");
    errors->AddError("must not be empty (omit it to hash the address)");
  }
}

// ---------------------------------------------------------------------------
// RendezvousConfig

const grpc_core::JsonLoaderInterface* RendezvousConfig::JsonLoader(
    const JsonArgs& /*args*/) {
  static const auto* loader =
      grpc_core::JsonObjectLoader<RendezvousConfig>()
          .Field("hashHeader", &RendezvousConfig::hash_header)
          .OptionalField("balanceFactorPercent",
                         &RendezvousConfig::balance_factor_percent_json_,
                         kBoundedKey)
          .OptionalField("endpoints", &RendezvousConfig::endpoints)
          .OptionalField("defaultWeight",
                         &RendezvousConfig::default_weight_json_)
          .OptionalField("missingKey", &RendezvousConfig::missing_key_json_)
          .OptionalField("maxInFlightPerBackend",
                         &RendezvousConfig::max_in_flight_json_)
          .Finish();
  return loader;
}

void RendezvousConfig::JsonPostLoad(const Json& json, const JsonArgs& args,
                                    ValidationErrors* errors) {
  bounded = args.IsEnabled(kBoundedKey);
  if (bounded) {
    RejectUnknownFields(
        json,
        {"hashHeader", "balanceFactorPercent", "endpoints", "defaultWeight",
         "missingKey", "maxInFlightPerBackend"},
        "hashHeader, balanceFactorPercent, endpoints, "
        "defaultWeight, missingKey, maxInFlightPerBackend",
        errors);
  } else {
    RejectUnknownFields(json,
                        {"hashHeader", "endpoints", "defaultWeight",
                         "missingKey", "maxInFlightPerBackend"},
                        "hashHeader, endpoints, defaultWeight, missingKey, "
                        "maxInFlightPerBackend; balanceFactorPercent belongs "
                        "to bounded_load_rendezvous",
                        errors);
  }
  {
    ValidationErrors::ScopedField field(errors, ".hashHeader");
    if (!errors->FieldHasErrors()) {
      if (!IsValidHeaderName(hash_header)) {
        errors->AddError(
            "must be a lower-case metadata key of characters [0-9a-z_.-]");
      } else if (absl::StartsWith(hash_header, "grpc-")) {
        errors->AddError("keys starting with \"grpc-\" are reserved by gRPC");
      }
    }
  }
  if (balance_factor_percent_json_.has_value()) {
    ValidationErrors::ScopedField field(errors, ".balanceFactorPercent");
    if (*balance_factor_percent_json_ < 100) {
      errors->AddError(
          "must be at least 100 (a smaller factor can leave no backend with "
          "room)");
    }
    balance_factor_percent = *balance_factor_percent_json_;
  }
  if (default_weight_json_.has_value()) {
    ValidationErrors::ScopedField field(errors, ".defaultWeight");
    if (*default_weight_json_ == 0) errors->AddError("must be at least 1");
    default_weight = *default_weight_json_;
  }
  if (missing_key_json_.has_value()) {
    ValidationErrors::ScopedField field(errors, ".missingKey");
    if (*missing_key_json_ == "RANDOM") {
      missing_key = MissingKey::kRandom;
    } else if (*missing_key_json_ == "FAIL") {
      missing_key = MissingKey::kFail;
    } else {
      errors->AddError(R"(must be "RANDOM" or "FAIL")");
    }
  }
  if (max_in_flight_json_.has_value()) {
    ValidationErrors::ScopedField field(errors, ".maxInFlightPerBackend");
    if (*max_in_flight_json_ == 0) {
      errors->AddError("must be at least 1 (omit it for no limit)");
    }
    max_in_flight_per_backend = *max_in_flight_json_;
  }
  // Endpoints: unique addresses and identities, and a weight sum the core
  // can represent (it sums eligible weights in 32 bits).
  std::map<std::string, size_t> addresses;
  std::map<std::string, size_t> identities;
  uint64_t weight_sum = 0;
  for (size_t i = 0; i < endpoints.size(); ++i) {
    const EndpointConfig& endpoint = endpoints[i];
    ValidationErrors::ScopedField field(errors,
                                        absl::StrCat(".endpoints[", i, "]"));
    if (!addresses.emplace(endpoint.address, i).second) {
      ValidationErrors::ScopedField address(errors, ".address");
      errors->AddError(absl::StrCat("duplicate of endpoints[",
                                    addresses[endpoint.address], "]"));
    }
    const std::string& identity = endpoint.identity.value_or(endpoint.address);
    if (!identities.emplace(identity, i).second) {
      ValidationErrors::ScopedField id(errors, ".identity");
      errors->AddError(absl::StrCat("identity \"", identity,
                                    "\" is also used by endpoints[",
                                    identities[identity], "]"));
    }
    weight_sum += endpoint.weight.value_or(default_weight);
  }
  if (weight_sum > UINT32_MAX) {
    ValidationErrors::ScopedField field(errors, ".endpoints");
    errors->AddError(
        absl::StrCat("weights sum to ", weight_sum, ", more than 4294967295"));
  }
}

absl::StatusOr<RendezvousConfig> RendezvousConfig::Parse(const Json& json,
                                                         bool bounded) {
  return grpc_core::LoadFromJson<RendezvousConfig>(
      json, PolicyJsonArgs(bounded),
      absl::StrCat("errors validating ",
                   bounded ? "bounded_load_rendezvous" : "weighted_rendezvous",
                   " LB policy config"));
}

}  // namespace poise::grpc_lb
