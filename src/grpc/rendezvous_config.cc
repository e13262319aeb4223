#include "src/grpc/rendezvous_config.h"

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/types/optional.h"
#include "src/core/lib/gprpp/time.h"
#include "src/core/lib/gprpp/validation_errors.h"
#include "src/core/lib/json/json_args.h"
#include "src/core/lib/json/json_object_loader.h"

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

// Whether `field` ("endpoints[0].address") or a field containing it
// ("endpoints[0]", "endpoints") failed to load.
bool LoadFailedAt(absl::string_view field, ValidationErrors* errors) {
  for (size_t end = 1; end <= field.size(); ++end) {
    if (end < field.size() && field[end] != '.' && field[end] != '[') {
      continue;
    }
    ValidationErrors::ScopedField scope(
        errors, absl::StrCat(".", field.substr(0, end)));
    if (errors->FieldHasErrors()) return true;
  }
  return false;
}

// The router's rule errors as gRPC's field errors, except on a field that
// failed to load: its load error says what is wrong, and a rule checked
// against the default left in its place would only add noise.
void AddRuleErrors(const std::vector<router::ConfigError>& broken,
                   ValidationErrors* errors) {
  std::vector<bool> keep(broken.size());
  for (size_t i = 0; i < broken.size(); ++i) {
    keep[i] = !LoadFailedAt(broken[i].field, errors);
  }
  for (size_t i = 0; i < broken.size(); ++i) {
    if (!keep[i]) continue;
    ValidationErrors::ScopedField field(errors,
                                        absl::StrCat(".", broken[i].field));
    errors->AddError(broken[i].message);
  }
}

// ---------------------------------------------------------------------------
// The JSON shapes

struct JsonEndpoint {
  absl::optional<std::string> address;
  absl::optional<uint32_t> weight;
  absl::optional<std::string> identity;

  static const grpc_core::JsonLoaderInterface* JsonLoader(
      const JsonArgs& /*args*/) {
    static const auto* loader =
        grpc_core::JsonObjectLoader<JsonEndpoint>()
            .OptionalField("address", &JsonEndpoint::address)
            .OptionalField("weight", &JsonEndpoint::weight)
            .OptionalField("identity", &JsonEndpoint::identity)
            .Finish();
    return loader;
  }
  // A member: gRPC's loader calls it on the loaded object.
  // NOLINTNEXTLINE(readability-convert-member-functions-to-static)
  void JsonPostLoad(const Json& json, const JsonArgs& /*args*/,
                    ValidationErrors* errors) {
    RejectUnknownFields(json, {"address", "weight", "identity"},
                        "address, weight, identity", errors);
  }
};

// A field given as text: `parse` of `text` into `out`, or the field's rule
// as its error. Enums by their spelling; durations by router::ParseDuration
// (exact to the nanosecond, unlike gRPC's Duration), whose rule states the
// limits.
template <typename T>
void ParseText(const absl::optional<std::string>& text,
               std::optional<T> (*parse)(std::string_view), const char* field,
               const char* rule, T& out, ValidationErrors* errors) {
  if (!text.has_value()) return;
  if (const std::optional<T> value = parse(*text); value.has_value()) {
    out = *value;
  } else {
    ValidationErrors::ScopedField scoped(errors, field);
    errors->AddError(rule);
  }
}

// "slowStart": {"window": "60s", "minWeightPercent": 10}.
struct JsonSlowStart {
  absl::optional<std::string> window;  // required: see JsonLoader
  absl::optional<uint32_t> min_weight_percent;
  router::SlowStartConfig config;  // the result, made by JsonPostLoad

  static const grpc_core::JsonLoaderInterface* JsonLoader(
      const JsonArgs& /*args*/) {
    static const auto* loader =
        grpc_core::JsonObjectLoader<JsonSlowStart>()
            .Field("window", &JsonSlowStart::window)
            .OptionalField("minWeightPercent",
                           &JsonSlowStart::min_weight_percent)
            .Finish();
    return loader;
  }
  void JsonPostLoad(const Json& json, const JsonArgs& /*args*/,
                    ValidationErrors* errors) {
    RejectUnknownFields(json, {"window", "minWeightPercent"},
                        "window, minWeightPercent", errors);
    ParseText(window, router::ParseDuration, ".window", router::kWindowRule,
              config.window, errors);
    if (min_weight_percent.has_value()) {
      config.min_weight_percent = *min_weight_percent;
    }
  }
};

// "serverLoad": {"metric": "rif", "outOfBandInterval": "0.1s",
// "maxReportAge": "1s"}; every member optional.
struct JsonServerLoad {
  absl::optional<std::string> metric;
  absl::optional<std::string> out_of_band_interval;
  absl::optional<std::string> max_report_age;
  router::ServerLoadConfig config;  // the result, made by JsonPostLoad

  static const grpc_core::JsonLoaderInterface* JsonLoader(
      const JsonArgs& /*args*/) {
    static const auto* loader =
        grpc_core::JsonObjectLoader<JsonServerLoad>()
            .OptionalField("metric", &JsonServerLoad::metric)
            .OptionalField("outOfBandInterval",
                           &JsonServerLoad::out_of_band_interval)
            .OptionalField("maxReportAge", &JsonServerLoad::max_report_age)
            .Finish();
    return loader;
  }
  void JsonPostLoad(const Json& json, const JsonArgs& /*args*/,
                    ValidationErrors* errors) {
    RejectUnknownFields(json, {"metric", "outOfBandInterval", "maxReportAge"},
                        "metric, outOfBandInterval, maxReportAge", errors);
    if (metric.has_value()) config.metric = *metric;
    ParseText(out_of_band_interval, router::ParseDuration, ".outOfBandInterval",
              router::kOutOfBandIntervalRule, config.out_of_band_interval,
              errors);
    ParseText(max_report_age, router::ParseDuration, ".maxReportAge",
              router::kMaxReportAgeRule, config.max_report_age, errors);
  }
};

struct JsonConfig {
  std::string hash_header;
  absl::optional<uint32_t> balance_factor_percent;
  std::vector<JsonEndpoint> endpoints;
  absl::optional<uint32_t> default_weight;
  absl::optional<std::string> missing_key;
  absl::optional<uint64_t> max_in_flight_per_backend;
  absl::optional<std::string> retry_routing;
  absl::optional<JsonSlowStart> slow_start;
  absl::optional<std::string> load_scope;
  absl::optional<JsonServerLoad> server_load;

  router::Config config;  // the result, made by JsonPostLoad

  static const grpc_core::JsonLoaderInterface* JsonLoader(
      const JsonArgs& /*args*/) {
    static const auto* loader =
        grpc_core::JsonObjectLoader<JsonConfig>()
            .Field("hashHeader", &JsonConfig::hash_header)
            .OptionalField("balanceFactorPercent",
                           &JsonConfig::balance_factor_percent, kBoundedKey)
            .OptionalField("endpoints", &JsonConfig::endpoints)
            .OptionalField("defaultWeight", &JsonConfig::default_weight)
            .OptionalField("missingKey", &JsonConfig::missing_key)
            .OptionalField("maxInFlightPerBackend",
                           &JsonConfig::max_in_flight_per_backend)
            .OptionalField("retryRouting", &JsonConfig::retry_routing)
            .OptionalField("slowStart", &JsonConfig::slow_start)
            .OptionalField("loadScope", &JsonConfig::load_scope)
            .OptionalField("serverLoad", &JsonConfig::server_load)
            .Finish();
    return loader;
  }
  void JsonPostLoad(const Json& json, const JsonArgs& args,
                    ValidationErrors* errors);
};

// "keyCache": false, true or a number of entries (a JSON value of either
// type, which gRPC's loader has no field type for: read here). null: absent.
void LoadKeyCache(const Json& json, router::KeyCacheConfig& out,
                  ValidationErrors* errors) {
  if (json.type() != Json::Type::OBJECT) return;
  const auto it = json.object_value().find("keyCache");
  if (it == json.object_value().end()) return;
  const Json& value = it->second;
  switch (value.type()) {
    case Json::Type::JSON_NULL:
      return;
    case Json::Type::JSON_TRUE:
      out.enabled = true;
      return;
    case Json::Type::JSON_FALSE:
      out.enabled = false;
      return;
    case Json::Type::NUMBER: {
      // Whole decimal digits only; the range is rule C9's.
      const std::string& digits = value.string_value();
      uint64_t entries = 0;
      bool whole = !digits.empty() && digits.size() <= 10;
      for (const char c : digits) {
        whole &= c >= '0' && c <= '9';
        if (whole) entries = entries * 10 + static_cast<uint64_t>(c - '0');
      }
      if (whole && entries <= UINT32_MAX) {
        out.enabled = true;
        out.entries = static_cast<uint32_t>(entries);
        return;
      }
      break;
    }
    default:
      break;
  }
  ValidationErrors::ScopedField field(errors, ".keyCache");
  errors->AddError(router::kKeyCacheRule);
}

void JsonConfig::JsonPostLoad(const Json& json, const JsonArgs& args,
                              ValidationErrors* errors) {
  config.bounded = args.IsEnabled(kBoundedKey);
  if (config.bounded) {
    RejectUnknownFields(
        json,
        {"hashHeader", "balanceFactorPercent", "endpoints", "defaultWeight",
         "missingKey", "maxInFlightPerBackend", "retryRouting", "slowStart",
         "loadScope", "serverLoad", "keyCache"},
        "hashHeader, balanceFactorPercent, endpoints, "
        "defaultWeight, missingKey, maxInFlightPerBackend, retryRouting, "
        "slowStart, loadScope, serverLoad, keyCache",
        errors);
  } else {
    // serverLoad is loaded here too, for rule C8's message on it.
    RejectUnknownFields(
        json,
        {"hashHeader", "endpoints", "defaultWeight", "missingKey",
         "maxInFlightPerBackend", "retryRouting", "slowStart", "loadScope",
         "serverLoad", "keyCache"},
        "hashHeader, endpoints, defaultWeight, missingKey, "
        "maxInFlightPerBackend, retryRouting, slowStart, loadScope, keyCache; "
        "balanceFactorPercent and serverLoad belong to "
        "bounded_load_rendezvous",
        errors);
  }
  config.hash_header = hash_header;
  if (balance_factor_percent.has_value()) {
    config.balance_factor_percent = *balance_factor_percent;
  }
  config.endpoints.reserve(endpoints.size());
  for (JsonEndpoint& e : endpoints) {
    router::EndpointConfig endpoint;
    if (e.address.has_value()) endpoint.address = std::move(*e.address);
    if (e.weight.has_value()) endpoint.weight = *e.weight;
    if (e.identity.has_value()) endpoint.identity = std::move(*e.identity);
    config.endpoints.push_back(std::move(endpoint));
  }
  if (default_weight.has_value()) config.default_weight = *default_weight;
  ParseText(missing_key, router::ParseMissingKey, ".missingKey",
            router::kMissingKeyRule, config.missing_key, errors);
  if (max_in_flight_per_backend.has_value()) {
    config.max_in_flight_per_backend = *max_in_flight_per_backend;
  }
  ParseText(retry_routing, router::ParseRetryRouting, ".retryRouting",
            router::kRetryRoutingRule, config.retry_routing, errors);
  if (slow_start.has_value()) config.slow_start = slow_start->config;
  ParseText(load_scope, router::ParseLoadScope, ".loadScope",
            router::kLoadScopeRule, config.load_scope, errors);
  if (server_load.has_value()) config.server_load = server_load->config;
  LoadKeyCache(json, config.key_cache, errors);
  AddRuleErrors(router::NormalizeAndValidate(config), errors);
}

}  // namespace

absl::StatusOr<router::Config> ParseRendezvousConfig(const Json& json,
                                                     bool bounded) {
  auto loaded = grpc_core::LoadFromJson<JsonConfig>(
      json, PolicyJsonArgs(bounded),
      absl::StrCat("errors validating ",
                   bounded ? "bounded_load_rendezvous" : "weighted_rendezvous",
                   " LB policy config"));
  if (!loaded.ok()) return loaded.status();
  return std::move(loaded->config);
}

}  // namespace poise::grpc_lb
