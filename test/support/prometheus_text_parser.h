// A strict parser of Prometheus text exposition format 0.0.4, for tests of
// poise::grpc_lb::PrometheusText(). Include as
// "test/support/prometheus_text_parser.h"; needs no gRPC.
//
// Beyond the format's grammar (names, label escaping, values) it checks the
// rules a scraper relies on:
//   - every sample's family has its # HELP and # TYPE before the sample,
//     each at most once, and the family's samples come in one block;
//   - no series (name and label set) appears twice;
//   - counters are named *_total and never negative;
//   - a histogram series has buckets with ascending "le" and non-decreasing
//     (cumulative) counts, ending with le="+Inf", which equals its _count,
//     and a _sum.
#ifndef POISE_TEST_SUPPORT_PROMETHEUS_TEXT_PARSER_H_
#define POISE_TEST_SUPPORT_PROMETHEUS_TEXT_PARSER_H_

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace poise::test_support {

using PromLabels = std::map<std::string, std::string>;  // values unescaped

// `labels` with `name` set to `value`.
inline PromLabels With(PromLabels labels, const std::string& name,
                       const std::string& value) {
  labels[name] = value;
  return labels;
}

struct PromSample {
  std::string name;
  PromLabels labels;
  double value = 0;
};

struct PromFamily {
  std::string type;  // counter, gauge, histogram, summary or untyped
  std::string help;  // unescaped
  std::vector<PromSample> samples;
};

struct PromExposition {
  std::map<std::string, PromFamily> families;

  // Every sample named `name` whose labels include `labels`.
  std::vector<const PromSample*> Find(const std::string& name,
                                      const PromLabels& labels = {}) const {
    std::vector<const PromSample*> out;
    for (const auto& [family_name, family] : families) {
      for (const PromSample& s : family.samples) {
        if (s.name != name) continue;
        bool match = true;
        for (const auto& [k, v] : labels) {
          const auto it = s.labels.find(k);
          match &= it != s.labels.end() && it->second == v;
        }
        if (match) out.push_back(&s);
      }
    }
    return out;
  }
  // The value of the one sample Find() returns; nullopt for none or several.
  std::optional<double> Value(const std::string& name,
                              const PromLabels& labels = {}) const {
    const auto found = Find(name, labels);
    if (found.size() != 1) return std::nullopt;
    return found[0]->value;
  }
};

struct PromParse {
  PromExposition exposition;
  std::string error;  // "line N: ..."; empty when the text is valid
  bool ok() const { return error.empty(); }
};

namespace prom_internal {

inline bool IsMetricName(std::string_view s) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        c == '_' || c == ':';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

inline bool IsLabelName(std::string_view s) {
  return IsMetricName(s) && s.find(':') == std::string_view::npos &&
         s.substr(0, 2) != "__";
}

// A float as Prometheus writes one: decimal (with optional exponent), or
// +Inf, -Inf, Inf, NaN.
inline std::optional<double> ParseValue(std::string_view s) {
  if (s == "+Inf" || s == "Inf") return HUGE_VAL;
  if (s == "-Inf") return -HUGE_VAL;
  if (s == "NaN") return std::nan("");
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  size_t digits = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++digits;
  }
  if (digits == 0) return std::nullopt;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exponent = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i, ++exponent;
    if (exponent == 0) return std::nullopt;
  }
  if (i != s.size()) return std::nullopt;
  return std::strtod(std::string(s).c_str(), nullptr);
}

inline bool IsTimestamp(std::string_view s) {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  return !s.empty() && std::all_of(s.begin(), s.end(),
                                   [](char c) { return c >= '0' && c <= '9'; });
}

// Unescapes `s` allowing the escapes `allowed` (a character after '\'
// among "\\\"n"); nullopt on any other escape or a trailing '\'.
inline std::optional<std::string> Unescape(std::string_view s,
                                           std::string_view allowed) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (i + 1 == s.size() || allowed.find(s[i + 1]) == std::string_view::npos) {
      return std::nullopt;
    }
    ++i;
    out += s[i] == 'n' ? '\n' : s[i];
  }
  return out;
}

// The family a sample named `name` belongs to among `families`, with the
// suffix it has there ("" for the family's own name); nullopt for none.
inline std::optional<std::pair<std::string, std::string>> FamilyOf(
    const std::string& name,
    const std::map<std::string, PromFamily>& families) {
  if (const auto it = families.find(name); it != families.end() &&
                                           !it->second.type.empty() &&
                                           it->second.type != "histogram") {
    return std::make_pair(name, std::string());
  }
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string_view sv(suffix);
    if (name.size() <= sv.size() ||
        name.compare(name.size() - sv.size(), sv.size(), sv) != 0) {
      continue;
    }
    const std::string base = name.substr(0, name.size() - sv.size());
    const auto it = families.find(base);
    if (it == families.end()) continue;
    const std::string& type = it->second.type;
    if (type == "histogram" || (type == "summary" && sv != "_bucket")) {
      return std::make_pair(base, std::string(sv));
    }
  }
  return std::nullopt;
}

// Checks every histogram series of `family` (named `name`).
inline std::string CheckHistogram(const std::string& name,
                                  const PromFamily& family) {
  struct Series {
    std::vector<std::pair<double, double>> buckets;  // (le, count) in order
    std::optional<double> sum, count;
  };
  std::map<PromLabels, Series> series;
  for (const PromSample& s : family.samples) {
    PromLabels key = s.labels;
    if (s.name == name + "_bucket") {
      const auto le = key.find("le");
      if (le == key.end()) return s.name + ": a bucket without le";
      const std::optional<double> bound = ParseValue(le->second);
      if (!bound.has_value() || std::isnan(*bound)) {
        return s.name + ": le \"" + le->second + "\" is not a number";
      }
      key.erase(le);
      series[key].buckets.emplace_back(*bound, s.value);
    } else if (s.labels.count("le") != 0) {
      return s.name + ": le on a sample other than a bucket";
    } else if (s.name == name + "_sum") {
      series[key].sum = s.value;
    } else if (s.name == name + "_count") {
      series[key].count = s.value;
    } else {
      return s.name + ": not a sample of histogram " + name;
    }
  }
  for (const auto& [labels, h] : series) {
    std::string where = name;
    for (const auto& [k, v] : labels) {
      where.append(" ").append(k).append("=").append(v);
    }
    if (h.buckets.empty() || !std::isinf(h.buckets.back().first) ||
        h.buckets.back().first < 0) {
      return where + ": the last bucket is not le=\"+Inf\"";
    }
    for (size_t i = 1; i < h.buckets.size(); ++i) {
      if (!(h.buckets[i].first > h.buckets[i - 1].first)) {
        return where + ": le not ascending";
      }
      if (h.buckets[i].second < h.buckets[i - 1].second) {
        return where + ": bucket counts not cumulative";
      }
    }
    if (!h.count.has_value() || !h.sum.has_value()) {
      return where + ": no _count or no _sum";
    }
    if (*h.count != h.buckets.back().second) {
      return where + ": le=\"+Inf\" differs from _count";
    }
  }
  return "";
}

}  // namespace prom_internal

namespace prom_internal {

// The parser's state across lines; each method returns an error or "".
class Parser {
 public:
  explicit Parser(std::map<std::string, PromFamily>& families)
      : families_(families) {}

  // "# HELP name text" or "# TYPE name type"; other comments are ignored.
  std::string Comment(std::string_view line) {
    std::string_view rest = line.substr(1);
    while (!rest.empty() && rest[0] == ' ') rest.remove_prefix(1);
    const bool help = rest.substr(0, 5) == "HELP ";
    if (!help && rest.substr(0, 5) != "TYPE ") return "";
    rest.remove_prefix(5);
    const size_t space = rest.find(' ');
    const std::string name(rest.substr(0, space));
    const std::string_view value =
        space == std::string_view::npos ? "" : rest.substr(space + 1);
    if (!IsMetricName(name)) return "bad metric name \"" + name + "\"";
    if (sampled_.count(name) != 0) {
      return std::string(help ? "HELP" : "TYPE") + " of " + name +
             " after its samples";
    }
    return help ? Help(name, value) : Type(name, value);
  }

  // "name[{labels}] value [timestamp]"
  std::string Sample(std::string_view line) {
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ') ++i;
    PromSample sample;
    sample.name = std::string(line.substr(0, i));
    if (!IsMetricName(sample.name)) {
      return "bad metric name \"" + sample.name + "\"";
    }
    if (i < line.size() && line[i] == '{') {
      if (std::string why = Labels(line, i, sample.labels); !why.empty()) {
        return why;
      }
    }
    if (i >= line.size() || line[i] != ' ') return "no value";
    const std::string_view rest = line.substr(i + 1);
    const size_t space = rest.find(' ');
    const std::optional<double> value = ParseValue(rest.substr(0, space));
    if (!value.has_value()) return "bad value";
    if (space != std::string_view::npos &&
        !IsTimestamp(rest.substr(space + 1))) {
      return "bad timestamp";
    }
    sample.value = *value;
    return Add(std::move(sample));
  }

 private:
  std::string Help(const std::string& name, std::string_view value) {
    PromFamily& family = families_[name];
    if (!family.help.empty()) return "second HELP of " + name;
    const std::optional<std::string> unescaped = Unescape(value, "\\n");
    if (!unescaped.has_value()) return "bad escape in HELP";
    if (unescaped->empty()) return "empty HELP of " + name;
    family.help = *unescaped;
    return "";
  }

  std::string Type(const std::string& name, std::string_view type) {
    PromFamily& family = families_[name];
    if (!family.type.empty()) return "second TYPE of " + name;
    if (type != "counter" && type != "gauge" && type != "histogram" &&
        type != "summary" && type != "untyped") {
      return "unknown type \"" + std::string(type) + "\"";
    }
    constexpr std::string_view kTotal = "_total";
    if (type == "counter" && (name.size() < kTotal.size() ||
                              name.compare(name.size() - kTotal.size(),
                                           kTotal.size(), kTotal) != 0)) {
      return "counter " + name + " is not named *_total";
    }
    family.type = type;
    return "";
  }

  // The label set opening at line[i] ('{'), up to and past its '}'.
  static std::string Labels(std::string_view line, size_t& i,
                            PromLabels& labels) {
    ++i;
    while (i >= line.size() || line[i] != '}') {
      const size_t eq = line.find('=', i);
      if (eq == std::string_view::npos) return "bad label set";
      const std::string label(line.substr(i, eq - i));
      if (!IsLabelName(label)) return "bad label name \"" + label + "\"";
      if (eq + 1 >= line.size() || line[eq + 1] != '"') {
        return "label " + label + " without a quoted value";
      }
      size_t j = eq + 2;
      while (j < line.size() && line[j] != '"') j += line[j] == '\\' ? 2 : 1;
      if (j >= line.size()) return "unterminated value of " + label;
      const std::optional<std::string> value =
          Unescape(line.substr(eq + 2, j - eq - 2), "\\\"n");
      if (!value.has_value()) return "bad escape in " + label;
      if (!labels.emplace(label, *value).second) {
        return "label " + label + " twice";
      }
      i = j + 1;
      if (i < line.size() && line[i] == ',') {
        ++i;
      } else if (i >= line.size() || line[i] != '}') {
        return "bad label set";
      }
    }
    ++i;
    return "";
  }

  // Files `sample` under its family, checking the family's rules.
  std::string Add(PromSample sample) {
    const auto family_name = FamilyOf(sample.name, families_);
    if (!family_name.has_value()) {
      return "sample " + sample.name + " before its family's TYPE";
    }
    const std::string& name = family_name->first;
    PromFamily& family = families_[name];
    if (family.help.empty()) {
      return "sample " + sample.name + " before its family's HELP";
    }
    if (name != current_ && sampled_.count(name) != 0) {
      return "samples of " + name + " in two blocks";
    }
    current_ = name;
    sampled_.insert(name);
    if (family.type == "counter" && !(sample.value >= 0)) {
      return "counter " + sample.name + " below zero or NaN";
    }
    if (!series_.emplace(sample.name, sample.labels).second) {
      return "series " + sample.name + " twice with the same labels";
    }
    family.samples.push_back(std::move(sample));
    return "";
  }

  std::map<std::string, PromFamily>& families_;
  std::set<std::string> sampled_;  // families whose samples began
  std::string current_;            // the family of the last sample
  std::set<std::pair<std::string, PromLabels>> series_;
};

}  // namespace prom_internal

inline PromParse ParsePrometheusText(std::string_view text) {
  PromParse out;
  prom_internal::Parser parser(out.exposition.families);
  if (!text.empty() && text.back() != '\n') {
    out.error = "the text does not end with a line feed";
    return out;
  }
  for (size_t line_number = 1; !text.empty(); ++line_number) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text.remove_prefix(end + 1);
    if (line.empty()) continue;
    std::string why =
        line[0] == '#' ? parser.Comment(line) : parser.Sample(line);
    if (!why.empty()) {
      out.error = "line " + std::to_string(line_number) + ": " + why;
      return out;
    }
  }
  for (const auto& [name, family] : out.exposition.families) {
    if (family.type != "histogram") continue;
    if (std::string why = prom_internal::CheckHistogram(name, family);
        !why.empty()) {
      out.error = why;
      return out;
    }
  }
  return out;
}

}  // namespace poise::test_support

#endif  // POISE_TEST_SUPPORT_PROMETHEUS_TEXT_PARSER_H_
