// The explanation's JSON: written by ExplainJson, read back by
// ReadExplainJson (poise-explain --from), identities of any bytes included;
// valid UTF-8 a strict parser accepts, keeping every byte, whatever the
// bytes of the key, the identities and the label.
#include "src/router/explain.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "poise/rendezvous.h"
#include "test/router/router_test_util.h"
#include "test/support/strict_json.h"

namespace poise::router {
namespace {

TEST(Explain, ReadsBackWhatItWrites) {
  const std::vector<ExplainedBackend> backends = {
      {"10.0.0.1:80", 1, 0},
      {"quote\"back\\slash", 3, 5},
      {std::string("ctl\x01\n\x1f") + "end", 4294967295u, 123456u},
      {"web-0.web.test:8443", 7, 2}};

  const absl::StatusOr<std::string> json =
      ExplainJson("k", 125, backends, true, "\"channel\":\"c\"");
  ASSERT_TRUE(json.ok()) << json.status();
  const absl::StatusOr<ExplainedInputs> read = ReadExplainJson(*json);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->factor_percent, 125u);
  ASSERT_EQ(read->backends.size(), backends.size());
  // In the key's order: each read entry is one of the written ones, once.
  std::vector<bool> seen(backends.size(), false);
  for (const ExplainedBackend& b : read->backends) {
    size_t i = 0;
    while (i < backends.size() && backends[i].identity != b.identity) ++i;
    ASSERT_LT(i, backends.size()) << b.identity;
    EXPECT_FALSE(seen[i]);
    seen[i] = true;
    EXPECT_EQ(b.weight, backends[i].weight);
    EXPECT_EQ(b.load, backends[i].load);
  }
  // The same inputs explain the same decision.
  EXPECT_EQ(ExplainJson("k", read->factor_percent, read->backends, true,
                        "\"channel\":\"c\"")
                .value(),
            *json);
}

TEST(Explain, OtherTextIsRefusedSayingWhat) {
  for (const char* text :
       {"", "{}", "{\"factor\":150}", "{\"factor\":150,\"ranking\":[]}",
        "{\"factor\":150,\"ranking\":[{\"identity\":\"a\",\"weight\":0,"
        "\"load\":0}]}",
        "{\"factor\":150,\"ranking\":[{\"identity\":\"a\\q\",\"weight\":1,"
        "\"load\":0}]}",
        "{\"factor\":99999999999,\"ranking\":[]}"}) {
    const absl::StatusOr<ExplainedInputs> read = ReadExplainJson(text);
    EXPECT_FALSE(read.ok()) << text;
    EXPECT_NE(read.status().message().find("not an explanation"),
              std::string::npos)
        << read.status();
  }
}

TEST(Explain, AWeightedChannelSelectsTheOwnerWhateverItsLoad) {
  const std::vector<ExplainedBackend> backends = {{"a", 1, 0}, {"b", 3, 50}};
  const std::string bounded = ExplainJson("customer-42", 100, backends).value();
  const std::string weighted =
      ExplainJson("customer-42", 100, backends, false).value();
  EXPECT_NE(
      bounded.find("\"affinity\":\"b\",\"selection\":\"a\",\"spilled\":true"),
      std::string::npos)
      << bounded;
  EXPECT_NE(
      weighted.find("\"affinity\":\"b\",\"selection\":\"b\",\"spilled\":false,"
                    "\"selected_load\":50"),
      std::string::npos)
      << weighted;
}

using test_support::JsonParse;
using test_support::JsonValue;
using test_support::ParseStrictJson;

TEST(Explain, ValidUtf8IsWrittenAsItIsAndOtherBytesAlsoInBase64) {
  EXPECT_EQ(JsonMember("key", "\xC3\xBC\x01\"\\"),
            "\"key\":\"\xC3\xBC\\u0001\\\"\\\\\"");
  EXPECT_EQ(JsonMember("key", std::string("a\0b", 3)), "\"key\":\"a\\u0000b\"");
  // 0xFF 0xFE: each byte U+FFFD, and the bytes in base64.
  EXPECT_EQ(JsonMember("key", "\xFF\xFE"),
            "\"key\":\"\xEF\xBF\xBD\xEF\xBF\xBD\",\"key_base64\":\"//4=\"");
  EXPECT_EQ(ExplainChannelMembers("c", "p", {"a", "b"}),
            "\"channel\":\"c\",\"policy\":\"p\",\"not_ready\":[\"a\",\"b\"]");
  EXPECT_EQ(ExplainChannelMembers("c", "p", {"a", "\xFF"}),
            "\"channel\":\"c\",\"policy\":\"p\",\"not_ready\":[\"a\","
            "\"\xEF\xBF\xBD\"],"
            "\"not_ready_base64\":[\"YQ==\",\"/w==\"]");
}

// A text member's bytes as the rule gives them back: the base64 member's
// when there is one (then the text alone is not the bytes: they are not
// UTF-8), else the string's.
std::string BytesOf(const JsonValue& object, const std::string& name) {
  const JsonValue* text = object.Get(name);
  const JsonValue* base64 = object.Get(name + "_base64");
  EXPECT_NE(text, nullptr) << name;
  if (text == nullptr) return "";
  EXPECT_EQ(text->type, JsonValue::Type::kString) << name;
  if (base64 == nullptr) return text->string;
  std::string bytes;
  EXPECT_TRUE(absl::Base64Unescape(base64->string, &bytes)) << name;
  EXPECT_FALSE(test_support::IsStrictUtf8(bytes))
      << name << ": needless base64";
  return bytes;
}

TEST(Explain, AnyBytesGiveStrictJsonThatKeepsThem) {
  std::mt19937_64 rng(40);
  size_t not_utf8 = 0;
  for (int round = 0; round < 500; ++round) {
    const std::string key = test::RandomBytes(rng, 40);
    const std::string label = test::RandomBytes(rng, 40);
    std::vector<ExplainedBackend> backends;
    std::set<std::string> identities;
    const size_t n = 1 + rng() % 5;
    while (backends.size() < n) {
      std::string identity = test::RandomBytes(rng, 24);
      if (!identities.insert(identity).second) continue;
      backends.push_back(
          {identity, static_cast<uint32_t>(1 + rng() % 9), rng() % 100});
    }
    const std::vector<std::string> not_ready = {test::RandomBytes(rng, 16),
                                                test::RandomBytes(rng, 16)};
    not_utf8 += !test_support::IsStrictUtf8(key);

    const absl::StatusOr<std::string> json = ExplainJson(
        key, 150, backends, true,
        ExplainChannelMembers(label, "bounded_load_rendezvous", not_ready));
    ASSERT_TRUE(json.ok()) << json.status();
    const JsonParse parsed = ParseStrictJson(*json);
    ASSERT_TRUE(parsed.ok()) << parsed.error << "\n" << *json;
    const JsonValue& e = parsed.value;
    EXPECT_EQ(BytesOf(e, "key"), key);
    EXPECT_EQ(BytesOf(e, "channel"), label);
    EXPECT_EQ(identities.count(BytesOf(e, "affinity")), 1u);
    EXPECT_EQ(identities.count(BytesOf(e, "selection")), 1u);
    const JsonValue* ranking = e.Get("ranking");
    ASSERT_NE(ranking, nullptr);
    std::set<std::string> ranked;
    for (const JsonValue& entry : ranking->items) {
      ranked.insert(BytesOf(entry, "identity"));
    }
    EXPECT_EQ(ranked, identities);
    const JsonValue* listed = e.Get("not_ready");
    const JsonValue* listed_base64 = e.Get("not_ready_base64");
    ASSERT_NE(listed, nullptr);
    ASSERT_EQ(listed->items.size(), not_ready.size());
    for (size_t i = 0; i < not_ready.size(); ++i) {
      std::string bytes = listed->items[i].string;
      if (listed_base64 != nullptr) {
        ASSERT_EQ(listed_base64->items.size(), not_ready.size());
        ASSERT_TRUE(
            absl::Base64Unescape(listed_base64->items[i].string, &bytes));
      }
      EXPECT_EQ(bytes, not_ready[i]);
    }

    // poise-explain --from reads back every identity's bytes, whatever the
    // key holds ("factor", "ranking" included).
    const absl::StatusOr<ExplainedInputs> read = ReadExplainJson(*json);
    ASSERT_TRUE(read.ok()) << read.status() << "\n" << *json;
    EXPECT_EQ(read->factor_percent, 150u);
    ASSERT_EQ(read->backends.size(), backends.size());
    for (const ExplainedBackend& b : read->backends) {
      EXPECT_EQ(identities.count(b.identity), 1u);
    }
    EXPECT_EQ(ExplainJson(key, 150, read->backends, true,
                          ExplainChannelMembers(
                              label, "bounded_load_rendezvous", not_ready))
                  .value(),
              *json);
  }
  EXPECT_GT(not_utf8, 100u);  // the bytes did test the rule
}

}  // namespace
}  // namespace poise::router
