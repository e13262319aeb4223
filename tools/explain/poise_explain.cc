// poise-explain: where does a key go, and why.
//
//   poise-explain --key KEY --backend ID=WEIGHT[:LOAD] ... [--factor PCT]
//
// Prints one JSON object with the bounded-load decision and every backend's
// place in the key's weighted-rendezvous order, using the same core as the
// gRPC policies. Bad arguments print the usage and exit 2.
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "poise/rendezvous.h"

namespace {

constexpr char kUsage[] =
    "usage: poise-explain --key KEY --backend ID=WEIGHT[:LOAD] "
    "[--backend ...] [--factor PCT]\n"
    "  WEIGHT: integer 1..4294967295   LOAD: in-flight count (default 0)\n"
    "  PCT: balance factor percent, >= 100 (default 150)\n";

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

std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string Hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "\"0x%016" PRIx64 "\"", value);
  return text;
}

// The decimal digits of a capacity: a JSON integer of any size.
std::string Decimal(poise::UInt128 value) {
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + value % 10));
    value /= 10;
  } while (value != 0);
  return digits;
}

uint64_t Bits(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

struct Backend {
  std::string identity;
  uint32_t weight;
  uint64_t load;
};

int Run(int argc, char** argv) {
  std::string key;
  bool have_key = false;
  uint32_t factor = poise::BoundedLoadRendezvous::kDefaultFactorPercent;
  std::vector<Backend> backends;
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (flag != "--key" && flag != "--backend" && flag != "--factor") {
      return Usage("unknown argument '" + std::string(flag) + "'");
    }
    if (i + 1 >= argc) return Usage(std::string(flag) + " needs a value");
    const std::string_view value = argv[++i];
    if (flag == "--key") {
      key = std::string(value);
      have_key = true;
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
    } else {
      const size_t eq = value.rfind('=');
      if (eq == std::string_view::npos || eq == 0) {
        return Usage("--backend wants ID=WEIGHT[:LOAD], not '" +
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
      backends.push_back(Backend{std::string(value.substr(0, eq)),
                                 static_cast<uint32_t>(weight), load});
    }
  }
  if (!have_key) return Usage("--key is required");
  if (backends.empty()) return Usage("at least one --backend is required");

  std::vector<poise::Candidate> candidates;
  candidates.reserve(backends.size());
  for (const Backend& b : backends) {
    candidates.push_back(poise::Candidate{b.identity, b.weight, true});
  }
  const poise::BoundedLoadRendezvous policy =
      *poise::BoundedLoadRendezvous::Create(factor);
  poise::DecisionScratch scratch;
  const auto decision = policy.Decide(
      key, candidates, [&](size_t i) { return backends[i].load; }, scratch);
  if (!decision.ok()) {
    std::fprintf(stderr, "poise-explain: cannot decide: %s\n",
                 poise::ToString(decision.error()));
    return 1;
  }
  const auto ranking = poise::WeightedRendezvous::Ranking(key, candidates);
  uint64_t total_load = 0;
  uint64_t total_weight = 0;
  for (const Backend& b : backends) {
    total_load += b.load;  // Decide proved neither sum overflows
    total_weight += b.weight;
  }

  const poise::Decision& d = decision.value();
  std::printf(
      "{\"key\":%s,\"factor\":%u,\"affinity\":%s,\"selection\":%s,"
      "\"spilled\":%s,\"selected_load\":%" PRIu64
      ",\"selected_capacity\":%s,\"ranking\":[",
      JsonString(key).c_str(), factor,
      JsonString(backends[d.affinity].identity).c_str(),
      JsonString(backends[d.selection].identity).c_str(),
      d.spilled ? "true" : "false", d.selected_load,
      Decimal(d.selected_capacity).c_str());
  const char* separator = "";
  for (const poise::Rank& r : ranking.value()) {
    const Backend& b = backends[r.index];
    std::printf(
        "%s{\"identity\":%s,\"weight\":%u,\"load\":%" PRIu64
        ",\"hash\":%s,\"score\":%.17g,\"score_bits\":%s,\"capacity\":%s}",
        separator, JsonString(b.identity).c_str(), b.weight, b.load,
        Hex(r.z).c_str(), r.score, Hex(Bits(r.score)).c_str(),
        Decimal(poise::BoundedLoadRendezvous::Capacity(factor, total_load,
                                                       b.weight, total_weight))
            .c_str());
    separator = ",";
  }
  std::printf("]}\n");
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
