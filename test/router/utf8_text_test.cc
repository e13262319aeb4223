// Well-formed UTF-8: the library's check against the tests' own decoder
// (test/support/strict_json.h) over every 1- and 2-byte text and every
// 3- and 4-byte text of a multi-byte lead, and the test parsers' rules.
#include "src/router/utf8_text.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "test/support/strict_json.h"

namespace poise::router {
namespace {

using test_support::IsStrictUtf8;
using test_support::JsonParse;
using test_support::JsonValue;
using test_support::ParseStrictJson;

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (const int b : bytes) out += static_cast<char>(b);
  return out;
}

TEST(Utf8Text, SequenceLengthsFollowTheStandardsTable) {
  EXPECT_EQ(Utf8SequenceLength(""), 0u);
  EXPECT_EQ(Utf8SequenceLength(std::string(1, '\0')), 1u);
  EXPECT_EQ(Utf8SequenceLength("a"), 1u);
  EXPECT_EQ(Utf8SequenceLength("\xC3\xBC"), 2u);          // U+00FC
  EXPECT_EQ(Utf8SequenceLength("\xE2\x82\xAC"), 3u);      // U+20AC
  EXPECT_EQ(Utf8SequenceLength("\xF0\x9F\x98\x80"), 4u);  // U+1F600
  EXPECT_EQ(Utf8SequenceLength("\xF4\x8F\xBF\xBF"), 4u);  // U+10FFFF
  for (const std::string& bad : {
           Bytes({0x80}),                    // a continuation byte alone
           Bytes({0xC0, 0x80}),              // overlong NUL
           Bytes({0xC1, 0xBF}),              // overlong
           Bytes({0xE0, 0x9F, 0xBF}),        // overlong
           Bytes({0xED, 0xA0, 0x80}),        // U+D800, a surrogate
           Bytes({0xF0, 0x8F, 0xBF, 0xBF}),  // overlong
           Bytes({0xF4, 0x90, 0x80, 0x80}),  // past U+10FFFF
           Bytes({0xF5, 0x80, 0x80, 0x80}),  // past U+10FFFF
           Bytes({0xFF}), Bytes({0xFE}), Bytes({0xC3}),  // cut short
           Bytes({0xE2, 0x82}),                          // cut short
           Bytes({0xC3, 0x41}),  // not a continuation byte
       }) {
    EXPECT_EQ(Utf8SequenceLength(bad), 0u) << testing::PrintToString(bad);
  }
}

// Two implementations written apart agree, so neither holds the other's
// mistake.
TEST(Utf8Text, AgreesWithTheTestsDecoderOnEveryShortText) {
  std::string text;
  for (int a = 0; a < 256; ++a) {
    text = Bytes({a});
    ASSERT_EQ(IsUtf8(text), IsStrictUtf8(text)) << a;
    for (int b = 0; b < 256; ++b) {
      text = Bytes({a, b});
      ASSERT_EQ(IsUtf8(text), IsStrictUtf8(text)) << a << " " << b;
    }
  }
  for (int a = 0xE0; a < 0x100; ++a) {
    for (int b = 0; b < 256; ++b) {
      for (int c = 0; c < 256; ++c) {
        text = Bytes({a, b, c});
        ASSERT_EQ(IsUtf8(text), IsStrictUtf8(text))
            << a << " " << b << " " << c;
      }
    }
  }
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200000; ++i) {
    const uint64_t r = rng();
    text = Bytes({0xF0 + static_cast<int>(r & 7),
                  static_cast<int>((r >> 8) & 0xFF),
                  static_cast<int>((r >> 16) & 0xFF),
                  static_cast<int>((r >> 24) & 0xFF)});
    ASSERT_EQ(IsUtf8(text), IsStrictUtf8(text)) << testing::PrintToString(text);
  }
}

TEST(Utf8Text, EachByteOutsideASequenceIsOneReplacementCharacter) {
  const auto replaced = [](std::string_view text) {
    std::string out;
    ForEachUtf8Character(text, [&out](std::string_view c) { out += c; });
    return out;
  };
  const std::string fffd(kReplacementCharacter);
  EXPECT_EQ(replaced("a\xC3\xBC"
                     "b"),
            "a\xC3\xBC"
            "b");
  EXPECT_EQ(replaced(std::string("a\0b", 3)), std::string("a\0b", 3));
  EXPECT_EQ(replaced("\xFF\xFE"), fffd + fffd);
  EXPECT_EQ(replaced("ok\xC3"), "ok" + fffd);
  EXPECT_EQ(replaced("\xED\xA0\x80"
                     "x"),
            fffd + fffd + fffd + "x");
  EXPECT_TRUE(IsStrictUtf8(fffd));
}

TEST(StrictJson, ReadsValidText) {
  const JsonParse parsed = ParseStrictJson(
      " {\"a\":[1,-0.5e+3,true,false,null],\"b\":\"q\\\"\\\\\\/\\b\\f\\n\\r\\t"
      "\\u00fc\\ud83d\\ude00\xC3\xBC\"} ");
  ASSERT_TRUE(parsed.ok()) << parsed.error;
  const JsonValue* a = parsed.value.Get("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items.size(), 5u);
  EXPECT_EQ(a->items[1].number, "-0.5e+3");
  EXPECT_TRUE(a->items[2].boolean);
  EXPECT_EQ(a->items[4].type, JsonValue::Type::kNull);
  EXPECT_EQ(parsed.value.Get("b")->string,
            "q\"\\/\b\f\n\r\t\xC3\xBC\xF0\x9F\x98\x80\xC3\xBC");
}

// Each case breaks one rule.
TEST(StrictJson, RefusesEachBrokenRule) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"\"\xFF\"", "not UTF-8"},
      {"\"\xED\xA0\x80\"", "not UTF-8"},
      {"\"\xC0\x80\"", "not UTF-8"},
      {"\"a\x01\"", "raw control"},
      {R"("\q")", "bad escape"},
      {R"("\u12")", R"(bad \u)"},
      {R"("\ud800")", "high surrogate"},
      {R"("\udc00")", "low surrogate"},
      {R"({"a":1,"a":2})", "twice"},
      {"{\"a\":1} x", "after the value"},
      {"{\"a\" 1}", "':'"},
      {"{\"a\":1,}", "member name"},
      {"[1 2]", "','"},
      {"[1", "unterminated"},
      {"\"abc", "unterminated"},
      {"01", "after the value"},
      {"1.", "after '.'"},
      {"1e", "exponent"},
      {"-", "bad value"},
      {"nul", "bad word"},
      {"", "no value"},
      {std::string(100, '['), "too deep"},
  };
  for (const auto& [text, why] : cases) {
    const JsonParse parsed = ParseStrictJson(text);
    EXPECT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.error.find(why), std::string::npos)
        << text << " -> " << parsed.error;
  }
}

}  // namespace
}  // namespace poise::router
