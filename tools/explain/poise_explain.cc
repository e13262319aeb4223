// poise-explain: where does a key go, and why.
//
//   poise-explain --key KEY --backend ID[=WEIGHT[:LOAD]][@ZONE] ...
//                 [--factor PCT] [--zone ZONE]
//   poise-explain --key KEY --from FILE [--factor PCT]
//
// Prints one JSON object with the bounded-load decision and every backend's
// place in the key's weighted-rendezvous order, using the same core as the
// gRPC policies. Bad arguments print the usage and exit 2.
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "poise/rendezvous.h"
#include "src/router/config.h"
#include "src/router/explain.h"

namespace {

constexpr char kUsage[] =
    "usage: poise-explain --key KEY --backend ID[=WEIGHT[:LOAD]][@ZONE] "
    "[--backend ...] [--factor PCT] [--zone ZONE]\n"
    "  ID: the backend's identity (its address text unless configured)\n"
    "  WEIGHT: integer 1..4294967295 (default 1)   LOAD: in-flight count "
    "(default 0)\n"
    "  ZONE: the backend's zone (after the last @); --zone ZONE: the "
    "client's,\n"
    "  which adds the key's order in that zone and why it leaves it\n"
    "  (local_zone, zone_order, zone_owner, zone_selection, left_zone)\n"
    "  PCT: balance factor percent, >= 100 (default 150)\n"
    "       poise-explain --key KEY --from FILE [--factor PCT]\n"
    "  FILE: a saved explanation (poise::grpc_lb::ExplainKey's answer for a\n"
    "  live channel, or this tool's output; - reads stdin): its backends,\n"
    "  weights, loads and factor, for another key\n";

int Usage(const std::string& problem) {
  std::fprintf(stderr, "poise-explain: %s\n%s", problem.c_str(), kUsage);
  return 2;
}

// Parses all of `text` as an unsigned decimal no greater than `max`.
bool ParseUnsigned(std::string_view text, uint64_t max, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  unsigned __int128 value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value > max) return false;
  *out = static_cast<uint64_t>(value);
  return true;
}

int Run(int argc, char** argv) {
  std::string key;
  bool have_key = false;
  uint32_t factor = poise::BoundedLoadRendezvous::kDefaultFactorPercent;
  std::vector<poise::router::ExplainedBackend> backends;
  std::optional<std::string> from;
  bool have_factor = false;
  std::optional<std::string> local_zone;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (flag != "--key" && flag != "--backend" && flag != "--factor" &&
        flag != "--from" && flag != "--zone") {
      return Usage("unknown argument '" + std::string(flag) + "'");
    }
    if (i + 1 >= argc) return Usage(std::string(flag) + " needs a value");
    std::string_view value = argv[++i];
    if (flag == "--key") {
      key = std::string(value);
      have_key = true;
    } else if (flag == "--from") {
      from = std::string(value);
    } else if (flag == "--zone") {
      if (!poise::router::IsValidZone(value)) {
        return Usage("--zone " + std::string(poise::router::kZoneRule) +
                     ", not '" + std::string(value) + "'");
      }
      local_zone = std::string(value);
    } else if (flag == "--factor") {
      uint64_t parsed;
      if (!ParseUnsigned(value, std::numeric_limits<uint32_t>::max(),
                         &parsed) ||
          parsed < poise::BoundedLoadRendezvous::kMinFactorPercent) {
        return Usage(
            "--factor must be an integer from 100 to 4294967295, not '" +
            std::string(value) + "'");
      }
      factor = static_cast<uint32_t>(parsed);
      have_factor = true;
    } else {
      // The zone: after the last '@'.
      std::string zone;
      if (const size_t at = value.rfind('@'); at != std::string_view::npos) {
        zone = std::string(value.substr(at + 1));
        if (!poise::router::IsValidZone(zone)) {
          return Usage("backend zone " + std::string(poise::router::kZoneRule) +
                       " in '" + std::string(value) + "'");
        }
        value = value.substr(0, at);
      }
      // ID alone: weight 1, load 0.
      const size_t eq = value.rfind('=');
      if (eq == std::string_view::npos) {
        if (value.empty()) return Usage("--backend needs an identity");
        backends.push_back({std::string(value), 1, 0, zone});
        continue;
      }
      if (eq == 0) {
        return Usage("--backend wants ID[=WEIGHT[:LOAD]], not '" +
                     std::string(value) + "'");
      }
      std::string_view spec = value.substr(eq + 1);
      std::string_view load_text = "0";
      if (const size_t colon = spec.find(':');
          colon != std::string_view::npos) {
        load_text = spec.substr(colon + 1);
        spec = spec.substr(0, colon);
      }
      uint64_t weight;
      uint64_t load;
      if (!ParseUnsigned(spec, std::numeric_limits<uint32_t>::max(), &weight) ||
          weight == 0) {
        return Usage(
            "backend weight must be an integer from 1 to 4294967295 in '" +
            std::string(value) + "'");
      }
      if (!ParseUnsigned(load_text, std::numeric_limits<uint64_t>::max(),
                         &load)) {
        return Usage("backend load must be a non-negative integer in '" +
                     std::string(value) + "'");
      }
      backends.push_back({std::string(value.substr(0, eq)),
                          static_cast<uint32_t>(weight), load, zone});
    }
  }
  if (!have_key) return Usage("--key is required");
  if (from.has_value()) {
    if (!backends.empty())
      return Usage("--from and --backend exclude each other");
    std::ifstream file;
    if (*from != "-") {
      file.open(*from);
      if (!file) return Usage("cannot read '" + *from + "'");
    }
    std::stringstream text;
    text << (*from == "-" ? std::cin.rdbuf() : file.rdbuf());
    absl::StatusOr<poise::router::ExplainedInputs> inputs =
        poise::router::ReadExplainJson(text.str());
    if (!inputs.ok()) {
      return Usage(*from + ": " + std::string(inputs.status().message()));
    }
    backends = std::move(inputs->backends);
    if (!have_factor) factor = inputs->factor_percent;
  }
  if (backends.empty()) return Usage("at least one --backend is required");

  bool zone_listed = false;
  for (const poise::router::ExplainedBackend& b : backends) {
    zone_listed |= local_zone.has_value() && b.zone == *local_zone;
  }
  const absl::StatusOr<std::string> json = poise::router::ExplainJson(
      key, factor, backends, /*bounded=*/true,
      local_zone.has_value()
          ? poise::router::ExplainZoneMembers(key, factor, backends,
                                              *local_zone, zone_listed,
                                              /*bounded=*/true)
          : std::string());
  if (!json.ok()) {
    std::fprintf(stderr, "poise-explain: %s\n",
                 std::string(json.status().message()).c_str());
    return 1;
  }
  std::printf("%s\n", json->c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {  // out of memory: say so, do not abort
    std::fprintf(stderr, "poise-explain: %s\n", e.what());
    return 1;
  }
}
