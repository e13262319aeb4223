#include "src/router/explain.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "poise/rendezvous.h"

namespace poise::router {
namespace {

std::string Hex(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "\"0x%016" PRIx64 "\"", value);
  return text;
}

// The decimal digits of a capacity: a JSON integer of any size.
std::string Decimal(UInt128 value) {
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + value % 10));
    value /= 10;
  } while (value != 0);
  return digits;
}

// A score with every bit: 17 significant digits read back as the same double.
std::string Score(double score) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.17g", score);
  return text;
}

uint64_t Bits(double value) {
  uint64_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

}  // namespace

std::string JsonString(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
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

absl::StatusOr<std::string> ExplainJson(
    std::string_view key, uint32_t factor_percent,
    const std::vector<ExplainedBackend>& backends, bool bounded,
    std::string_view extra_members) {
  const std::optional<BoundedLoadRendezvous> policy =
      BoundedLoadRendezvous::Create(factor_percent);
  if (!policy.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("balance factor ", factor_percent,
                     "% is below the minimum of ",
                     BoundedLoadRendezvous::kMinFactorPercent, "%"));
  }
  std::vector<Candidate> candidates;
  candidates.reserve(backends.size());
  for (const ExplainedBackend& b : backends) {
    candidates.push_back(Candidate{b.identity, b.weight, true});
  }
  DecisionScratch scratch;
  const Result<Decision> decision = policy->Decide(
      key, candidates, [&](size_t i) { return backends[i].load; }, scratch);
  const Result<std::vector<Rank>> ranking =
      WeightedRendezvous::Ranking(key, candidates);
  if (!decision.ok() || !ranking.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot decide: ",
        ToString(decision.ok() ? ranking.error() : decision.error())));
  }
  // Decide proved that neither sum overflows.
  uint64_t total_load = 0;
  uint64_t total_weight = 0;
  for (const ExplainedBackend& b : backends) {
    total_load += b.load;
    total_weight += b.weight;
  }
  Decision d = decision.value();
  if (!bounded) {
    d.selection = d.affinity;
    d.spilled = false;
    d.selected_load = backends[d.affinity].load;
    d.selected_capacity = BoundedLoadRendezvous::Capacity(
        factor_percent, total_load, backends[d.affinity].weight, total_weight);
  }
  std::string out = absl::StrCat(
      "{\"key\":", JsonString(key), ",\"factor\":", factor_percent,
      ",\"affinity\":", JsonString(backends[d.affinity].identity),
      ",\"selection\":", JsonString(backends[d.selection].identity),
      ",\"spilled\":", d.spilled ? "true" : "false",
      ",\"selected_load\":", d.selected_load,
      ",\"selected_capacity\":", Decimal(d.selected_capacity),
      ",\"ranking\":[");
  const char* separator = "";
  for (const Rank& r : ranking.value()) {
    const ExplainedBackend& b = backends[r.index];
    absl::StrAppend(&out, separator, "{\"identity\":", JsonString(b.identity),
                    ",\"weight\":", b.weight, ",\"load\":", b.load,
                    ",\"hash\":", Hex(r.z), ",\"score\":", Score(r.score),
                    ",\"score_bits\":", Hex(Bits(r.score)), ",\"capacity\":",
                    Decimal(BoundedLoadRendezvous::Capacity(
                        factor_percent, total_load, b.weight, total_weight)),
                    "}");
    separator = ",";
  }
  absl::StrAppend(&out, "]", extra_members.empty() ? "" : ",",
                  absl::string_view(extra_members.data(), extra_members.size()),
                  "}");
  return out;
}

}  // namespace poise::router
