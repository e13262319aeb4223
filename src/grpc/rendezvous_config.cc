#include "src/grpc/rendezvous_config.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
// One table of fields per JSON object

enum class Presence : uint8_t { kOptional, kRequired };

// Which policies have a field.
enum class KnownBy : uint8_t {
  kBoth,
  // weighted_rendezvous: an unknown field, not loaded.
  kBounded,
  // weighted_rendezvous: accepted and loaded all the same, so that the
  // router's rule on it says where it belongs (C8); listed with the
  // bounded-only fields.
  kBoundedByRule,
};

// One member of a JSON object: its name, and how its value is loaded into
// the object's result. The loader scopes its errors to the member.
template <typename Result>
struct JsonField {
  using Load = std::function<void(const Json& value, const JsonArgs& args,
                                  Result& out, ValidationErrors* errors)>;
  const char* name;
  Load load;
  Presence presence = Presence::kOptional;
  KnownBy known_by = KnownBy::kBoth;
};

// The names of `fields` a policy has, for the unknown-field error.
template <typename Result>
std::string KnownList(const std::vector<JsonField<Result>>& fields,
                      bool bounded) {
  std::vector<absl::string_view> known;
  std::vector<absl::string_view> elsewhere;
  for (const JsonField<Result>& field : fields) {
    (bounded || field.known_by == KnownBy::kBoth ? known : elsewhere)
        .push_back(field.name);
  }
  std::string list = absl::StrJoin(known, ", ");
  if (!elsewhere.empty()) {
    absl::StrAppend(&list, "; ", absl::StrJoin(elsewhere, " and "),
                    elsewhere.size() == 1 ? " belongs" : " belong",
                    " to bounded_load_rendezvous");
  }
  return list;
}

// What gRPC's loader reads a Result from: an object of Result's field table.
template <typename Result>
struct Loaded {
  Result value;
  static const grpc_core::JsonLoaderInterface* JsonLoader(const JsonArgs& args);
};

// A JSON object read by its table: each member in the table loaded (null is
// absent, as in the proto3 JSON mapping, except for a required member), a
// required one missing or a member not in the table (or not the policy's)
// an error. gRPC's own object loader ignores unknown members, and a
// misspelt "hashheader" must not silently leave a field at its default.
template <typename Result>
class FieldTable final : public grpc_core::JsonLoaderInterface {
 public:
  explicit FieldTable(std::vector<JsonField<Result>> fields)
      : fields_(std::move(fields)),
        bounded_list_(KnownList(fields_, true)),
        weighted_list_(KnownList(fields_, false)) {}

  void LoadInto(const Json& json, const JsonArgs& args, void* dst,
                ValidationErrors* errors) const override {
    if (json.type() != Json::Type::OBJECT) {
      errors->AddError("is not an object");
      return;
    }
    const bool bounded = args.IsEnabled(kBoundedKey);
    const Json::Object& members = json.object_value();
    for (const auto& [name, value] : members) {
      const JsonField<Result>* field = Find(name);
      if (field != nullptr && Has(*field, bounded)) {
        continue;
      }
      ValidationErrors::ScopedField scope(errors, absl::StrCat(".", name));
      errors->AddError(absl::StrCat(
          "unknown field (known: ", bounded ? bounded_list_ : weighted_list_,
          ")"));
    }
    Result& out = static_cast<Loaded<Result>*>(dst)->value;
    for (const JsonField<Result>& field : fields_) {
      if (!Has(field, bounded)) continue;
      ValidationErrors::ScopedField scope(errors,
                                          absl::StrCat(".", field.name));
      const auto it = members.find(field.name);
      const bool required = field.presence == Presence::kRequired;
      if (it == members.end() ||
          (!required && it->second.type() == Json::Type::JSON_NULL)) {
        if (required) errors->AddError("field not present");
        continue;
      }
      field.load(it->second, args, out, errors);
    }
  }

 private:
  const JsonField<Result>* Find(absl::string_view name) const {
    for (const JsonField<Result>& field : fields_) {
      if (field.name == name) return &field;
    }
    return nullptr;
  }
  static bool Has(const JsonField<Result>& field, bool bounded) {
    return bounded || field.known_by != KnownBy::kBounded;
  }

  const std::vector<JsonField<Result>> fields_;
  const std::string bounded_list_;
  const std::string weighted_list_;
};

// Each object's table, defined below (in the order they nest).
template <typename Result>
const FieldTable<Result>& FieldsOf();

template <typename Result>
const grpc_core::JsonLoaderInterface* Loaded<Result>::JsonLoader(
    const JsonArgs& /*args*/) {
  return &FieldsOf<Result>();
}

template <typename T>
struct Unwrapped {
  using type = T;
};
template <typename T>
struct Unwrapped<std::optional<T>> {
  using type = T;
};

// A value of a type gRPC's loader reads (a string or a number) into
// `member`, left as it was when the value fails to load.
template <typename Result, typename T>
typename JsonField<Result>::Load Value(T Result::*member) {
  return [member](const Json& value, const JsonArgs& args, Result& out,
                  ValidationErrors* errors) {
    const size_t before = errors->size();
    auto loaded = grpc_core::LoadFromJson<typename Unwrapped<T>::type>(
        value, args, errors);
    if (errors->size() == before) out.*member = std::move(loaded);
  };
}

// A string read by `parse` into `member`, or the field's rule as its error.
// Enums by their spelling; durations by router::ParseDuration (exact to the
// nanosecond, unlike gRPC's Duration), whose rule states the limits.
template <typename Result, typename T>
typename JsonField<Result>::Load Text(
    T Result::*member, std::optional<T> (*parse)(std::string_view),
    const char* rule) {
  return [member, parse, rule](const Json& value, const JsonArgs& args,
                               Result& out, ValidationErrors* errors) {
    const size_t before = errors->size();
    const auto text = grpc_core::LoadFromJson<std::string>(value, args, errors);
    if (errors->size() != before) return;
    if (const std::optional<T> parsed = parse(text); parsed.has_value()) {
      out.*member = *parsed;
    } else {
      errors->AddError(rule);
    }
  };
}

// An object of its own table, into `member`; left unset when any of its
// fields fails to load.
template <typename Result, typename Sub>
typename JsonField<Result>::Load Object(std::optional<Sub> Result::*member) {
  return [member](const Json& value, const JsonArgs& args, Result& out,
                  ValidationErrors* errors) {
    const size_t before = errors->size();
    auto loaded = grpc_core::LoadFromJson<Loaded<Sub>>(value, args, errors);
    if (errors->size() == before) out.*member = std::move(loaded.value);
  };
}

// A list of objects of their own table, every one kept (the router's rules
// then skip the fields that failed to load: AddRuleErrors).
template <typename Result, typename Sub>
typename JsonField<Result>::Load Objects(std::vector<Sub> Result::*member) {
  return [member](const Json& value, const JsonArgs& args, Result& out,
                  ValidationErrors* errors) {
    auto loaded =
        grpc_core::LoadFromJson<std::vector<Loaded<Sub>>>(value, args, errors);
    std::vector<Sub>& list = out.*member;
    list.clear();
    list.reserve(loaded.size());
    for (Loaded<Sub>& item : loaded) list.push_back(std::move(item.value));
  };
}

// "keyCache": false, true or a number of entries (a JSON value of either
// type, which gRPC's loader has no field type for: read here).
void LoadKeyCache(const Json& value, const JsonArgs& /*args*/,
                  router::Config& config, ValidationErrors* errors) {
  router::KeyCacheConfig& out = config.key_cache;
  switch (value.type()) {
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
  errors->AddError(router::kKeyCacheRule);
}

// ---------------------------------------------------------------------------
// The JSON objects (schema: proto/poise_config.proto)

using router::Config;
using router::EndpointConfig;
using router::ServerLoadConfig;
using router::SlowStartConfig;
using router::ZoneSuffixConfig;

// "endpoints": [{"address": "10.0.0.1:80", "weight": 2, "identity": "a"}].
template <>
const FieldTable<EndpointConfig>& FieldsOf<EndpointConfig>() {
  static const auto* table = new FieldTable<EndpointConfig>({
      {"address", Value(&EndpointConfig::address)},
      {"weight", Value(&EndpointConfig::weight)},
      {"identity", Value(&EndpointConfig::identity)},
      {"zone", Value(&EndpointConfig::zone)},
  });
  return *table;
}

// "zoneByIdentitySuffix": [{"suffix": ".cache-a.svc:50070", "zone": "a"}].
template <>
const FieldTable<ZoneSuffixConfig>& FieldsOf<ZoneSuffixConfig>() {
  static const auto* table = new FieldTable<ZoneSuffixConfig>({
      {"suffix", Value(&ZoneSuffixConfig::suffix), Presence::kRequired},
      {"zone", Value(&ZoneSuffixConfig::zone), Presence::kRequired},
  });
  return *table;
}

// "slowStart": {"window": "60s", "minWeightPercent": 10}.
template <>
const FieldTable<SlowStartConfig>& FieldsOf<SlowStartConfig>() {
  static const auto* table = new FieldTable<SlowStartConfig>({
      {"window",
       Text(&SlowStartConfig::window, router::ParseDuration,
            router::kWindowRule),
       Presence::kRequired},
      {"minWeightPercent", Value(&SlowStartConfig::min_weight_percent)},
  });
  return *table;
}

// "serverLoad": {"metric": "rif", "outOfBandInterval": "0.1s",
// "maxReportAge": "1s", "admission": false}; every member optional.
template <>
const FieldTable<ServerLoadConfig>& FieldsOf<ServerLoadConfig>() {
  static const auto* table = new FieldTable<ServerLoadConfig>({
      {"metric", Value(&ServerLoadConfig::metric)},
      {"outOfBandInterval",
       Text(&ServerLoadConfig::out_of_band_interval, router::ParseDuration,
            router::kOutOfBandIntervalRule)},
      {"maxReportAge", Text(&ServerLoadConfig::max_report_age,
                            router::ParseDuration, router::kMaxReportAgeRule)},
      {"admission", Value(&ServerLoadConfig::admission)},
  });
  return *table;
}

// The policy's config object.
template <>
const FieldTable<Config>& FieldsOf<Config>() {
  static const auto* table = new FieldTable<Config>({
      {"hashHeader", Value(&Config::hash_header), Presence::kRequired},
      {"balanceFactorPercent", Value(&Config::balance_factor_percent),
       Presence::kOptional, KnownBy::kBounded},
      {"endpoints", Objects(&Config::endpoints)},
      {"defaultWeight", Value(&Config::default_weight)},
      {"missingKey", Text(&Config::missing_key, router::ParseMissingKey,
                          router::kMissingKeyRule)},
      {"maxInFlightPerBackend", Value(&Config::max_in_flight_per_backend)},
      {"retryRouting", Text(&Config::retry_routing, router::ParseRetryRouting,
                            router::kRetryRoutingRule)},
      {"slowStart", Object(&Config::slow_start)},
      {"loadScope", Text(&Config::load_scope, router::ParseLoadScope,
                         router::kLoadScopeRule)},
      {"serverLoad", Object(&Config::server_load), Presence::kOptional,
       KnownBy::kBoundedByRule},
      {"keyCache", LoadKeyCache},
      {"localZone", Value(&Config::local_zone)},
      {"zoneByIdentitySuffix", Objects(&Config::zone_by_identity_suffix)},
  });
  return *table;
}

}  // namespace

absl::StatusOr<router::Config> ParseRendezvousConfig(const Json& json,
                                                     bool bounded) {
  ValidationErrors errors;
  auto loaded = grpc_core::LoadFromJson<Loaded<Config>>(
      json, PolicyJsonArgs(bounded), &errors);
  router::Config& config = loaded.value;
  config.bounded = bounded;
  // Rules only on an object: on anything else the one error is that.
  if (json.type() == Json::Type::OBJECT) {
    AddRuleErrors(router::NormalizeAndValidate(config), &errors);
  }
  if (!errors.ok()) {
    return errors.status(absl::StrCat(
        "errors validating ",
        bounded ? "bounded_load_rendezvous" : "weighted_rendezvous",
        " LB policy config"));
  }
  return std::move(config);
}

}  // namespace poise::grpc_lb
