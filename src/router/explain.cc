#include "src/router/explain.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "poise/bound.h"
#include "poise/rendezvous.h"
#include "src/router/utf8_text.h"

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

// A reader of ExplainJson's own text: members in the order it writes them.
class ExplainReader {
 public:
  explicit ExplainReader(std::string_view text) : text_(text) {}

  // Moves past the next `token`; false when there is none.
  bool Skip(std::string_view token) {
    const size_t at = text_.find(token, pos_);
    if (at == std::string_view::npos) return false;
    pos_ = at + token.size();
    return true;
  }
  bool At(std::string_view token) const {
    return text_.substr(pos_, token.size()) == token;
  }
  // Moves past `token` at the position; false when it is not there.
  bool Expect(std::string_view token) {
    if (!At(token)) return false;
    pos_ += token.size();
    return true;
  }
  // A member `"name":"..."` as JsonMember writes it, at the position: its
  // bytes, from its "name_base64" member when it has one.
  bool Member(std::string_view name, std::string* out) {
    const absl::string_view name_view(name.data(), name.size());
    if (!Expect(absl::StrCat("\"", name_view, "\":")) || !String(out)) {
      return false;
    }
    if (!Expect(absl::StrCat(",\"", name_view, "_base64\":"))) return true;
    std::string base64;
    return String(&base64) && absl::Base64Unescape(base64, out);
  }
  // A decimal number no greater than `max`, at the position.
  bool Number(uint64_t max, uint64_t* out) {
    uint64_t value = 0;
    const size_t start = pos_;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const auto digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (value > (max - digit) / 10) return false;
      value = value * 10 + digit;
      ++pos_;
    }
    *out = value;
    return pos_ > start;
  }
  // A JSON string as JsonString writes it, at the position.
  bool String(std::string* out) {
    if (!At("\"")) return false;
    ++pos_;
    out->clear();
    while (pos_ < text_.size() && text_[pos_] != '"') {
      char c = text_[pos_++];
      if (c == '\\') {
        if (pos_ >= text_.size()) return false;
        c = text_[pos_++];
        if (c == 'u') {
          uint64_t code = 0;
          for (int i = 0; i < 4; ++i, ++pos_) {
            if (pos_ >= text_.size()) return false;
            const char h = text_[pos_];
            const int v = h >= '0' && h <= '9'   ? h - '0'
                          : h >= 'a' && h <= 'f' ? h - 'a' + 10
                          : h >= 'A' && h <= 'F' ? h - 'A' + 10
                                                 : -1;
            if (v < 0) return false;
            code = code * 16 + static_cast<uint64_t>(v);
          }
          if (code >= 0x20) return false;  // JsonString escapes controls only
          c = static_cast<char>(code);
        } else if (c != '"' && c != '\\') {
          return false;
        }
      }
      out->push_back(c);
    }
    if (pos_ >= text_.size()) return false;
    ++pos_;
    return true;
  }

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace

std::string ExplainZoneMembers(std::string_view key, uint32_t factor_percent,
                               const std::vector<ExplainedBackend>& backends,
                               std::string_view local_zone, bool zone_listed,
                               bool bounded) {
  // The zone's backends, and their order: the key's order over the subset
  // (K5 compares each pair on its own).
  std::vector<Candidate> candidates;
  std::vector<size_t> index;
  uint64_t zone_load = 0;
  uint64_t zone_weight = 0;
  for (size_t i = 0; i < backends.size(); ++i) {
    if (backends[i].zone != local_zone) continue;
    candidates.push_back({backends[i].identity, backends[i].weight, true});
    index.push_back(i);
    zone_load += backends[i].load;
    zone_weight += backends[i].weight;
  }
  std::string out =
      absl::StrCat(JsonMember("local_zone", local_zone), ",\"zone_order\":[");
  std::optional<size_t> owner;
  std::optional<size_t> selection;
  if (!candidates.empty()) {
    const Result<std::vector<Rank>> ranking =
        WeightedRendezvous::Ranking(key, candidates);
    if (ranking.ok()) {
      bool first = true;
      for (const Rank& r : ranking.value()) {
        const ExplainedBackend& b = backends[index[r.index]];
        const Bound bound(factor_percent, zone_load, b.weight, zone_weight);
        const UInt128 capacity = bound.Capacity();
        absl::StrAppend(&out, first ? "" : ",", "{",
                        JsonMember("identity", b.identity), ",\"capacity\":",
                        capacity > UINT64_MAX ? UINT64_MAX
                                              : static_cast<uint64_t>(capacity),
                        "}");
        first = false;
        if (!owner.has_value()) owner = index[r.index];
        if (!selection.has_value() && (!bounded || bound.HasRoom(b.load))) {
          selection = index[r.index];
        }
      }
    }
  }
  const auto identity_or_null = [&](std::optional<size_t> i) {
    return i.has_value() ? JsonString(backends[*i].identity)
                         : std::string("null");
  };
  absl::StrAppend(&out, "],\"zone_owner\":", identity_or_null(owner),
                  ",\"zone_selection\":", identity_or_null(selection),
                  ",\"left_zone\":");
  if (!zone_listed) {
    absl::StrAppend(&out, JsonString("no listed backend is in the zone: "
                                     "every pick is as without zones"));
  } else if (!owner.has_value()) {
    absl::StrAppend(&out, JsonString("no READY backend in the zone: the key "
                                     "goes to its first READY choice"));
  } else if (!selection.has_value()) {
    // Only where the loads' sum was read in parts (K7 leaves room).
    absl::StrAppend(&out, JsonString("every backend of the zone is over the "
                                     "zone's bound"));
  } else {
    absl::StrAppend(&out, "null");
  }
  return out;
}

absl::StatusOr<ExplainedInputs> ReadExplainJson(std::string_view json) {
  const auto bad = [](std::string_view what) {
    return absl::InvalidArgumentError(
        absl::StrCat("not an explanation (poise-explain or ExplainKey JSON): ",
                     absl::string_view(what.data(), what.size())));
  };
  ExplainReader in(json);
  ExplainedInputs inputs;
  // Member by member where ExplainJson wrote them: the key and the
  // identities are any text, "factor" or "ranking" included.
  std::string unused;  // the key, the affinity and the selection
  uint64_t factor = 0;
  const bool keyed = in.Expect("{") && in.At("\"key\":");
  if (keyed && (!in.Member("key", &unused) || !in.Expect(","))) {
    return bad("a bad \"key\"");
  }
  // Text without a key (written by hand): its first "factor".
  if (!(keyed ? in.Expect("\"factor\":") : in.Skip("\"factor\":")) ||
      !in.Number(UINT32_MAX, &factor)) {
    return bad("no \"factor\"");
  }
  inputs.factor_percent = static_cast<uint32_t>(factor);
  if (in.Expect(",") && in.At("\"affinity\":") &&
      (!in.Member("affinity", &unused) || !in.Expect(",") ||
       !in.Member("selection", &unused))) {
    return bad(R"(a bad "affinity" or "selection")");
  }
  if (!in.Skip("\"ranking\":[")) return bad("no \"ranking\"");
  while (in.At("{\"identity\":")) {
    in.Expect("{");
    ExplainedBackend b;
    uint64_t weight = 0;
    if (!in.Member("identity", &b.identity) || !in.Skip(",\"weight\":") ||
        !in.Number(UINT32_MAX, &weight) || weight == 0 ||
        !in.Skip(",\"load\":") || !in.Number(UINT64_MAX, &b.load) ||
        !in.Skip("}")) {
      return bad(absl::StrCat("ranking entry ", inputs.backends.size() + 1,
                              " is not {\"identity\", \"weight\" >= 1, "
                              "\"load\", ...}"));
    }
    b.weight = static_cast<uint32_t>(weight);
    inputs.backends.push_back(std::move(b));
    if (in.At(",")) in.Skip(",");
  }
  if (inputs.backends.empty()) return bad("an empty \"ranking\"");
  return inputs;
}

std::string JsonString(std::string_view text) {
  std::string out = "\"";
  ForEachUtf8Character(text, [&out](std::string_view character) {
    const auto byte = static_cast<unsigned char>(character[0]);
    if (character == "\"" || character == "\\") {
      out += '\\';
      out += character;
    } else if (byte < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", byte);
      out += escaped;
    } else {
      out += character;
    }
  });
  return out + "\"";
}

std::string JsonMember(std::string_view name, std::string_view bytes) {
  const absl::string_view name_view(name.data(), name.size());
  std::string out = absl::StrCat("\"", name_view, "\":", JsonString(bytes));
  if (!IsUtf8(bytes)) {
    absl::StrAppend(
        &out, ",\"", name_view, "_base64\":\"",
        absl::Base64Escape(absl::string_view(bytes.data(), bytes.size())),
        "\"");
  }
  return out;
}

std::string ExplainChannelMembers(std::string_view label,
                                  std::string_view policy,
                                  const std::vector<std::string>& not_ready) {
  std::string out = absl::StrCat(JsonMember("channel", label), ",",
                                 JsonMember("policy", policy), ",");
  std::string text = "\"not_ready\":[";
  std::string base64 = ",\"not_ready_base64\":[";
  bool all_utf8 = true;
  const char* separator = "";
  for (const std::string& identity : not_ready) {
    absl::StrAppend(&text, separator, JsonString(identity));
    absl::StrAppend(&base64, separator, "\"", absl::Base64Escape(identity),
                    "\"");
    all_utf8 = all_utf8 && IsUtf8(identity);
    separator = ",";
  }
  absl::StrAppend(&out, text, "]");
  if (!all_utf8) absl::StrAppend(&out, base64, "]");
  return out;
}

absl::StatusOr<std::string> ExplainJson(
    std::string_view key, uint32_t factor_percent,
    const std::vector<ExplainedBackend>& backends, bool bounded,
    std::string_view extra_members) {
  const std::optional<BoundedLoadRendezvous> policy =
      BoundedLoadRendezvous::Create(factor_percent);
  if (!policy.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "balance factor ", factor_percent, "% is below the minimum of ",
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
  std::string out =
      absl::StrCat("{", JsonMember("key", key), ",\"factor\":", factor_percent,
                   ",", JsonMember("affinity", backends[d.affinity].identity),
                   ",", JsonMember("selection", backends[d.selection].identity),
                   ",\"spilled\":", d.spilled ? "true" : "false",
                   ",\"selected_load\":", d.selected_load,
                   ",\"selected_capacity\":", Decimal(d.selected_capacity),
                   ",\"ranking\":[");
  const char* separator = "";
  for (const Rank& r : ranking.value()) {
    const ExplainedBackend& b = backends[r.index];
    absl::StrAppend(&out, separator, "{", JsonMember("identity", b.identity),
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
