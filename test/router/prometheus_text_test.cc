// The exposition text: the test parser's rules (each broken once), exact
// seconds and escaping, and PrometheusText() of statistics made by hand:
// channels sharing a label added together, retired counters in the channel
// totals only, states, histograms and codes; UTF-8 whatever the bytes of
// labels and identities.
#include "src/router/prometheus_text.h"

#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "test/router/router_test_util.h"
#include "test/support/prometheus_text_parser.h"
#include "test/support/strict_json.h"

namespace poise::router {
namespace {

using test_support::ParsePrometheusText;
using test_support::PromExposition;
using test_support::PromParse;

constexpr char kValid[] =
    "# HELP a_total A counter.\n"
    "# TYPE a_total counter\n"
    "a_total{x=\"q\\\"\\\\\\n\"} 3\n"
    "a_total{x=\"r\"} 0 1700000000000\n"
    "# A comment.\n"
    "# HELP h A histogram.\n"
    "# TYPE h histogram\n"
    "h_bucket{le=\"0.5\"} 1\n"
    "h_bucket{le=\"+Inf\"} 2\n"
    "h_sum 1.25e0\n"
    "h_count 2\n"
    "# HELP g A gauge.\n"
    "# TYPE g gauge\n"
    "g -Inf\n";

TEST(PrometheusTextParser, AcceptsValidText) {
  const PromParse parsed = ParsePrometheusText(kValid);
  ASSERT_TRUE(parsed.ok()) << parsed.error;
  EXPECT_EQ(parsed.exposition.Value("a_total", {{"x", "q\"\\\n"}}), 3.0);
  EXPECT_EQ(parsed.exposition.Value("h_sum"), 1.25);
  EXPECT_EQ(parsed.exposition.families.at("h").help, "A histogram.");
}

// Each case breaks one rule of the valid text above.
TEST(PrometheusTextParser, RejectsEachBrokenRule) {
  const std::string header =
      "# HELP a_total A counter.\n# TYPE a_total counter\n";
  const std::string hist = "# HELP h H.\n# TYPE h histogram\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"a_total 1", "line feed"},
      {"# TYPE a_total counter\na_total 1\n", "HELP"},
      {"# HELP a_total A.\na_total 1\n", "TYPE"},
      {header + "# TYPE a_total counter\n", "second TYPE"},
      {"# HELP a A.\n# TYPE a counter\na 1\n", "_total"},
      {header + "a_total -1\n", "below zero"},
      {header + "1a_total 1\n", "bad metric name"},
      {header + "a_total{1x=\"v\"} 1\n", "bad label name"},
      {header + "a_total{__x=\"v\"} 1\n", "bad label name"},
      {header + "a_total{x=\"\\t\"} 1\n", "bad escape"},
      {header + "a_total{x=\"v} 1\n", "unterminated"},
      {header + "a_total{x=\"v\",x=\"w\"} 1\n", "twice"},
      {header + "a_total{x=\"v\"} 1\na_total{x=\"v\"} 2\n", "twice"},
      {header + "a_total one\n", "bad value"},
      {header + "a_total 1 soon\n", "bad timestamp"},
      {header + "a_total{x=\"v\"} 1\n# HELP g G.\n# TYPE g gauge\ng 1\n"
                "a_total{x=\"w\"} 1\n",
       "two blocks"},
      {header + "a_total 1\n# TYPE a_total counter\n", "after its samples"},
      {hist + "h_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\n"
              "h_count 1\n",
       "cumulative"},
      {hist + "h_bucket{le=\"2\"} 1\nh_bucket{le=\"1\"} 1\n"
              "h_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",
       "ascending"},
      {hist + "h_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n", "+Inf"},
      {hist + "h_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n", "_count"},
      {hist + "h_bucket{le=\"+Inf\"} 1\nh_count 1\n", "_sum"},
      {hist + "h_bucket 1\n", "without le"},
      {hist + "h_bucket{le=\"x\"} 1\n", "not a number"},
  };
  for (const auto& [text, why] : cases) {
    const PromParse parsed = ParsePrometheusText(text);
    EXPECT_FALSE(parsed.ok()) << text;
    EXPECT_NE(parsed.error.find(why), std::string::npos)
        << "text:\n"
        << text << "error: " << parsed.error;
  }
}

TEST(PrometheusText, SecondsAreExactDecimals) {
  EXPECT_EQ(SecondsText(0), "0");
  EXPECT_EQ(SecondsText(500'000), "0.0005");
  EXPECT_EQ(SecondsText(2'500'000'000), "2.5");
  EXPECT_EQ(SecondsText(10'000'000'000), "10");
  EXPECT_EQ(SecondsText(1), "0.000000001");
  EXPECT_EQ(SecondsText(123'456'789'012), "123.456789012");
}

TEST(PrometheusText, EscapesBackslashQuoteAndLineFeed) {
  EXPECT_EQ(EscapeLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  EXPECT_EQ(EscapeLabelValue("plain:80"), "plain:80");
}

// Well-formed UTF-8 as it is, NUL included; each other byte U+FFFD.
TEST(PrometheusText, WritesLabelValuesAsUtf8) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(EscapeLabelValue("gr\xC3\xBC\xC3\x9F"), "gr\xC3\xBC\xC3\x9F");
  EXPECT_EQ(EscapeLabelValue(std::string("a\0b", 3)), std::string("a\0b", 3));
  EXPECT_EQ(EscapeLabelValue("\xFF\xFE"), fffd + fffd);
  EXPECT_EQ(EscapeLabelValue("\xC0\x80\"\xC3"), fffd + fffd + "\\\"" + fffd);
}

grpc_lb::BackendStats Backend(const std::string& identity,
                              const std::string& state, uint64_t ok,
                              uint64_t unavailable, uint64_t picks) {
  grpc_lb::BackendStats b;
  b.identity = identity;
  b.address = "10.0.0.1:80";
  b.connectivity = state;
  b.picks = picks;
  b.calls.by_status[0] = ok;
  b.calls.by_status[14] = unavailable;
  b.calls.duration_buckets[1] = ok;               // (0.5 ms, 1 ms]
  b.calls.duration_buckets.back() = unavailable;  // past 10 s
  b.calls.duration_sum_ns = ok * 1'000'000 + unavailable * 11'000'000'000;
  return b;
}

grpc_lb::ChannelStats Channel(const std::string& label,
                              const std::string& state,
                              std::vector<grpc_lb::BackendStats> backends) {
  grpc_lb::ChannelStats c;
  c.label = label;
  c.connectivity = state;
  for (const auto& b : backends) {
    c.picks += b.picks;
    AddCallStats(b.calls, c.calls);
  }
  c.backends = std::move(backends);
  return c;
}

TEST(PrometheusText, AddsChannelsOfOneLabelAndKeepsRetiredTotals) {
  const std::string odd = "odd \"label\"\\\nline";
  MetricsSnapshot snapshot;
  snapshot.live.push_back(
      Channel("shared", "READY",
              {Backend("a", "READY", 3, 1, 4),
               Backend("b", "TRANSIENT_FAILURE", 0, 2, 2)}));
  snapshot.live.push_back(
      Channel("shared", "CONNECTING", {Backend("a", "READY", 1, 0, 1)}));
  snapshot.live.push_back(
      Channel(odd, "READY", {Backend("id \"x\"", "IDLE", 0, 0, 0)}));
  snapshot.live[0].backends[0].admission_refusals = 2;
  snapshot.live[1].backends[0].admission_refusals = 1;
  snapshot.live[0].admission_refusals = 2;
  snapshot.live[0].zone_kept = 5;
  snapshot.live[1].zone_kept = 2;
  snapshot.live[1].zone_out = 3;
  grpc_lb::ChannelStats retired;
  retired.label = "shared";
  retired.picks = 10;
  retired.spills = 1;
  retired.admission_refusals = 4;
  retired.zone_out = 1;
  retired.calls.by_status[4] = 7;  // DEADLINE_EXCEEDED
  retired.calls.duration_buckets[5] = 7;
  retired.calls.duration_sum_ns = uint64_t{7} * 20'000'000;
  snapshot.retired.push_back(retired);

  const std::string text = PrometheusText(snapshot);
  const PromParse parsed = ParsePrometheusText(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error << "\n" << text;
  const PromExposition& e = parsed.exposition;

  // Per backend: the two channels' "a" added; states counted per channel.
  const test_support::PromLabels a = {{"channel", "shared"}, {"backend", "a"}};
  using test_support::With;
  EXPECT_EQ(e.Value("grpc_lb_poise_backend_state", With(a, "state", "READY")),
            2.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_backend_state", With(a, "state", "IDLE")),
            0.0);
  EXPECT_EQ(
      e.Value("grpc_lb_poise_attempts_total", With(a, "grpc_status", "OK")),
      4.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_attempts_total",
                    With(a, "grpc_status", "UNAVAILABLE")),
            1.0);
  // Codes never seen on a backend are left out; OK never is.
  EXPECT_TRUE(e.Find("grpc_lb_poise_attempts_total",
                     With(a, "grpc_status", "DEADLINE_EXCEEDED"))
                  .empty());
  const test_support::PromLabels b = {{"channel", "shared"}, {"backend", "b"}};
  EXPECT_EQ(
      e.Value("grpc_lb_poise_attempts_total", With(b, "grpc_status", "OK")),
      0.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_picks_total", a), 5.0);
  // Refusals (serverLoad.admission) apart from the attempts.
  EXPECT_EQ(e.Value("grpc_lb_poise_admission_refusals_total", a), 3.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_admission_refusals_total", b), 0.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_attempt_duration_seconds_bucket",
                    With(a, "le", "0.0005")),
            0.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_attempt_duration_seconds_bucket",
                    With(a, "le", "0.001")),
            4.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_attempt_duration_seconds_bucket",
                    With(a, "le", "10")),
            4.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_attempt_duration_seconds_count", a), 5.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_attempt_duration_seconds_sum", a), 11.004);
  // Retired counters are channel totals only.
  EXPECT_TRUE(e.Find("grpc_lb_poise_picks_total",
                     {{"channel", "shared"}, {"backend", ""}})
                  .empty());

  // Per channel: both live channels and the retired counters.
  const test_support::PromLabels shared = {{"channel", "shared"}};
  EXPECT_EQ(e.Value("grpc_lb_poise_channel_picks_total", shared), 17.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_channel_spills_total", shared), 1.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_channel_admission_refusals_total", shared),
            6.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_channel_zone_kept_total", shared), 7.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_channel_zone_out_total", shared), 4.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_channel_attempts_total",
                    With(shared, "grpc_status", "DEADLINE_EXCEEDED")),
            7.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_channel_attempts_total",
                    With(shared, "grpc_status", "UNAVAILABLE")),
            3.0);
  // Every code is written for a channel.
  EXPECT_EQ(e.Find("grpc_lb_poise_channel_attempts_total", shared).size(),
            grpc_lb::kStatusCodeCount);
  EXPECT_EQ(
      e.Value("grpc_lb_poise_channel_attempt_duration_seconds_count", shared),
      7.0 + 4.0 + 3.0);
  EXPECT_EQ(
      e.Value("grpc_lb_poise_channel_state", With(shared, "state", "READY")),
      1.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_channel_state",
                    With(shared, "state", "CONNECTING")),
            1.0);

  // Escaped labels come back as they were.
  EXPECT_EQ(
      e.Value("grpc_lb_poise_backend_state",
              {{"channel", odd}, {"backend", "id \"x\""}, {"state", "IDLE"}}),
      1.0);
}

// Labels that write the same value (here both U+FFFD) are one series; a
// label of well-formed UTF-8 comes back whole, NUL included.
TEST(PrometheusText, AnyBytesGiveUtf8TheParserAccepts) {
  std::mt19937_64 rng(40);
  MetricsSnapshot snapshot;
  std::vector<std::string> labels = {"\xFF", "\xFE", std::string("nul\0end", 7),
                                     "gr\xC3\xBC\xC3\x9F"};
  // "r": no random label writes as one of the four above.
  for (int i = 0; i < 200; ++i)
    labels.push_back("r" + test::RandomBytes(rng, 23));
  for (const std::string& label : labels) {
    std::vector<grpc_lb::BackendStats> backends;
    backends.reserve(3);
    for (int b = 0; b < 3; ++b) {
      backends.push_back(Backend(test::RandomBytes(rng, 23), "READY", 1, 0, 1));
    }
    grpc_lb::ChannelStats retired;
    retired.label = "r" + test::RandomBytes(rng, 23);
    retired.picks = 1;
    snapshot.retired.push_back(retired);
    snapshot.live.push_back(Channel(label, "READY", std::move(backends)));
  }

  const std::string text = PrometheusText(snapshot);
  ASSERT_TRUE(test_support::IsStrictUtf8(text));
  const PromParse parsed = ParsePrometheusText(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error;
  const PromExposition& e = parsed.exposition;
  EXPECT_EQ(e.Value("grpc_lb_poise_channel_picks_total",
                    {{"channel", "\xEF\xBF\xBD"}}),
            6.0);  // "\xFF" and "\xFE", 3 picks each
  EXPECT_EQ(e.Value("grpc_lb_poise_channel_picks_total",
                    {{"channel", std::string("nul\0end", 7)}}),
            3.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_channel_picks_total",
                    {{"channel", "gr\xC3\xBC\xC3\x9F"}}),
            3.0);
  // Nothing lost: every pick of every channel is in some series.
  double picks = 0;
  for (const auto* sample : e.Find("grpc_lb_poise_channel_picks_total")) {
    picks += sample->value;
  }
  EXPECT_EQ(picks, 4.0 * static_cast<double>(labels.size()));
}

TEST(PrometheusText, NothingToShowIsStillValid) {
  const std::string text = PrometheusText(MetricsSnapshot{});
  const PromParse parsed = ParsePrometheusText(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error;
  EXPECT_EQ(parsed.exposition.families.size(), 14u);
}

}  // namespace
}  // namespace poise::router
