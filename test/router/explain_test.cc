// The explanation's JSON: written by ExplainJson, read back by
// ReadExplainJson (poise-explain --from), identities of any bytes included.
#include "src/router/explain.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "poise/rendezvous.h"

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

}  // namespace
}  // namespace poise::router
