// A strict UTF-8 check and a strict JSON parser, for tests of text the
// library writes (ExplainKey, poise-explain, PrometheusText). Include as
// "test/support/strict_json.h"; needs no gRPC.
//
// UTF-8 as RFC 3629 defines it: each character decoded, then refused when
// its form is longer than its value needs, when it is a surrogate
// (U+D800 to U+DFFF) or past U+10FFFF. JSON as RFC 8259's grammar, held to
// I-JSON (RFC 7493): the whole text UTF-8, no raw control character in a
// string, only the grammar's escapes, \u surrogates only in pairs, no
// member name twice in one object, nothing after the value but whitespace.
#ifndef POISE_TEST_SUPPORT_STRICT_JSON_H_
#define POISE_TEST_SUPPORT_STRICT_JSON_H_

#include <cstdint>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace poise::test_support {

inline bool IsStrictUtf8(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<uint8_t>(text[i]);
    size_t continuation = 0;
    uint32_t value = 0;
    if (lead < 0x80) {
      value = lead;
    } else if ((lead & 0xE0) == 0xC0) {
      continuation = 1;
      value = lead & 0x1Fu;
    } else if ((lead & 0xF0) == 0xE0) {
      continuation = 2;
      value = lead & 0x0Fu;
    } else if ((lead & 0xF8) == 0xF0) {
      continuation = 3;
      value = lead & 0x07u;
    } else {
      return false;
    }
    if (text.size() - i - 1 < continuation) return false;
    for (size_t k = 1; k <= continuation; ++k) {
      const auto byte = static_cast<uint8_t>(text[i + k]);
      if ((byte & 0xC0) != 0x80) return false;
      value = (value << 6) | (byte & 0x3Fu);
    }
    // The smallest value each length may hold: below it, a shorter form
    // exists (an overlong form).
    constexpr uint32_t kSmallest[] = {0, 0x80, 0x800, 0x10000};
    if (value < kSmallest[continuation]) return false;
    if (value >= 0xD800 && value <= 0xDFFF) return false;
    if (value > 0x10FFFF) return false;
    i += continuation + 1;
  }
  return true;
}

struct JsonValue {
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  Type type = Type::kNull;
  bool boolean = false;
  std::string number;  // the number's text
  std::string string;  // unescaped, UTF-8
  std::vector<JsonValue> items;
  std::vector<std::pair<std::string, JsonValue>> members;  // in order

  // The member named `name`; null when there is none (or this is not an
  // object).
  const JsonValue* Get(std::string_view name) const {
    for (const auto& [member, value] : members) {
      if (member == name) return &value;
    }
    return nullptr;
  }
};

struct JsonParse {
  JsonValue value;
  std::string error;  // "at byte N: ..."; empty when the text is valid
  bool ok() const { return error.empty(); }
};

namespace json_internal {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  std::string Document(JsonValue& out) {
    if (!IsStrictUtf8(text_)) return "the text is not UTF-8";
    Whitespace();
    if (std::string why = Value(out, 0); !why.empty()) return why;
    Whitespace();
    if (pos_ != text_.size()) return Where("text after the value");
    return "";
  }

 private:
  static constexpr int kMaxDepth = 64;

  std::string Where(const std::string& what) const {
    return "at byte " + std::to_string(pos_) + ": " + what;
  }
  bool Done() const { return pos_ >= text_.size(); }
  char Peek() const { return text_[pos_]; }
  void Whitespace() {
    while (!Done() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' ||
                       Peek() == '\r')) {
      ++pos_;
    }
  }
  bool Literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  std::string Value(JsonValue& out, int depth) {
    if (depth > kMaxDepth) return Where("nested too deep");
    if (Done()) return Where("no value");
    switch (Peek()) {
      case '{':
        return Object(out, depth);
      case '[':
        return Array(out, depth);
      case '"':
        out.type = JsonValue::Type::kString;
        return String(out.string);
      case 't':
      case 'f':
        out.type = JsonValue::Type::kBool;
        out.boolean = Peek() == 't';
        return Literal(out.boolean ? "true" : "false") ? "" : Where("bad word");
      case 'n':
        out.type = JsonValue::Type::kNull;
        return Literal("null") ? "" : Where("bad word");
      default:
        out.type = JsonValue::Type::kNumber;
        return Number(out.number);
    }
  }

  std::string Object(JsonValue& out, int depth) {
    out.type = JsonValue::Type::kObject;
    ++pos_;
    Whitespace();
    if (!Done() && Peek() == '}') {
      ++pos_;
      return "";
    }
    std::set<std::string> names;
    for (;;) {
      Whitespace();
      if (Done() || Peek() != '"') return Where("no member name");
      std::string name;
      if (std::string why = String(name); !why.empty()) return why;
      if (!names.insert(name).second) {
        return Where("member \"" + name + "\" twice");
      }
      Whitespace();
      if (Done() || Peek() != ':') return Where("no ':' after a member name");
      ++pos_;
      Whitespace();
      JsonValue value;
      if (std::string why = Value(value, depth + 1); !why.empty()) return why;
      out.members.emplace_back(std::move(name), std::move(value));
      Whitespace();
      if (Done()) return Where("unterminated object");
      if (Peek() == '}') {
        ++pos_;
        return "";
      }
      if (Peek() != ',') return Where("no ',' or '}' after a member");
      ++pos_;
    }
  }

  std::string Array(JsonValue& out, int depth) {
    out.type = JsonValue::Type::kArray;
    ++pos_;
    Whitespace();
    if (!Done() && Peek() == ']') {
      ++pos_;
      return "";
    }
    for (;;) {
      Whitespace();
      JsonValue item;
      if (std::string why = Value(item, depth + 1); !why.empty()) return why;
      out.items.push_back(std::move(item));
      Whitespace();
      if (Done()) return Where("unterminated array");
      if (Peek() == ']') {
        ++pos_;
        return "";
      }
      if (Peek() != ',') return Where("no ',' or ']' after an item");
      ++pos_;
    }
  }

  // Four hex digits after "\u".
  bool Hex4(uint32_t& out) {
    if (text_.size() - pos_ < 4) return false;
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = text_[pos_++];
      uint32_t v = 0;
      if (h >= '0' && h <= '9') {
        v = static_cast<uint32_t>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        v = static_cast<uint32_t>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        v = static_cast<uint32_t>(h - 'A' + 10);
      } else {
        return false;
      }
      out = out * 16 + v;
    }
    return true;
  }

  static void AppendUtf8(uint32_t c, std::string& out) {
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }

  std::string String(std::string& out) {
    ++pos_;  // the opening quote
    out.clear();
    for (;;) {
      if (Done()) return Where("unterminated string");
      const auto c = static_cast<uint8_t>(text_[pos_]);
      if (c == '"') {
        ++pos_;
        return "";
      }
      if (c < 0x20) return Where("a raw control character in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (Done()) return Where("unterminated escape");
      const char e = text_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t unit = 0;
          if (!Hex4(unit)) return Where("bad \\u escape");
          if (unit >= 0xDC00 && unit <= 0xDFFF) {
            return Where("a low surrogate without its high one");
          }
          if (unit >= 0xD800 && unit <= 0xDBFF) {
            uint32_t low = 0;
            if (!Literal("\\u") || !Hex4(low) || low < 0xDC00 || low > 0xDFFF) {
              return Where("a high surrogate without its low one");
            }
            unit = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
          }
          AppendUtf8(unit, out);
          break;
        }
        default:
          return Where(std::string("bad escape \\") + e);
      }
    }
  }

  std::string Number(std::string& out) {
    const size_t start = pos_;
    const auto digits = [&] {
      const size_t from = pos_;
      while (!Done() && Peek() >= '0' && Peek() <= '9') ++pos_;
      return pos_ - from;
    };
    if (!Done() && Peek() == '-') ++pos_;
    if (!Done() && Peek() == '0') {
      ++pos_;
    } else if (digits() == 0) {
      return Where("bad value");
    }
    if (!Done() && Peek() == '.') {
      ++pos_;
      if (digits() == 0) return Where("no digits after '.'");
    }
    if (!Done() && (Peek() == 'e' || Peek() == 'E')) {
      ++pos_;
      if (!Done() && (Peek() == '+' || Peek() == '-')) ++pos_;
      if (digits() == 0) return Where("no digits in the exponent");
    }
    out = std::string(text_.substr(start, pos_ - start));
    return "";
  }

  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace json_internal

inline JsonParse ParseStrictJson(std::string_view text) {
  JsonParse out;
  json_internal::Parser parser(text);
  out.error = parser.Document(out.value);
  return out;
}

}  // namespace poise::test_support

#endif  // POISE_TEST_SUPPORT_STRICT_JSON_H_
