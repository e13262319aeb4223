// The statistics registry: one snapshot per live policy, its backends as
// last published, and no trace of a destroyed one but its label's totals,
// which are bounded: labels in length, the labels of gone channels in
// number.
#include "src/router/stats_registry.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <set>
#include <string>

#include "src/router/prometheus_text.h"
#include "test/router/router_test_util.h"
#include "test/support/prometheus_text_parser.h"
#include "test/support/strict_json.h"

namespace poise::router {
namespace {

const grpc_lb::ChannelStats* Find(const std::vector<grpc_lb::ChannelStats>& all,
                                  const std::string& label) {
  for (const auto& s : all) {
    if (s.label == label) return &s;
  }
  return nullptr;
}

TEST(StatsRegistry, SnapshotsLivePoliciesWithTheirBackends) {
  auto stats = std::make_shared<PolicyStats>("router-stats", "p");
  RegisterPolicyStats(stats);
  BackendSet set;
  set.Update({test::Entry("10.0.0.1:80", 3, "a"), test::Entry("10.0.0.2:80")},
             test::ValidConfig());
  stats->SetBackends(set.list());
  stats->picks = 4;
  stats->spills = 1;
  set.backends()[0].cell->picks = 3;
  set.backends()[0].cell->counts.Get().spilled_in = 1;
  ASSERT_TRUE(set.backends()[1].cell->in_flight->TryAcquire());

  const std::vector<grpc_lb::ChannelStats> all = SnapshotAllPolicies();
  const grpc_lb::ChannelStats* s = Find(all, "router-stats");
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->policy, "p");
  EXPECT_EQ(s->picks, 4u);
  EXPECT_EQ(s->spills, 1u);
  ASSERT_EQ(s->backends.size(), 2u);
  EXPECT_EQ(s->backends[0].identity, "a");
  EXPECT_EQ(s->backends[0].address, "10.0.0.1:80");
  EXPECT_EQ(s->backends[0].weight, 3u);
  EXPECT_EQ(s->backends[0].picks, 3u);
  EXPECT_EQ(s->backends[0].spilled_in, 1u);
  EXPECT_EQ(s->backends[1].identity, "10.0.0.2:80");
  EXPECT_EQ(s->backends[1].in_flight, 1u);
  EXPECT_EQ(s->backends[1].peak_in_flight, 1u);
  set.backends()[1].cell->in_flight->Release();

  stats->SetBackends(nullptr);
  EXPECT_TRUE(Find(SnapshotAllPolicies(), "router-stats")->backends.empty());
  stats.reset();
  EXPECT_EQ(Find(SnapshotAllPolicies(), "router-stats"), nullptr);
}

// Channels to one target keep one copy of their label (by default the
// target, which may list every address), and a label no instance holds any
// more is made anew.
TEST(StatsRegistry, InstancesOfOneLabelShareItsString) {
  auto first = std::make_unique<PolicyStats>("shared-label", "p");
  auto second = std::make_unique<PolicyStats>("shared-label", "q");
  const PolicyStats other("other-label", "p");
  EXPECT_EQ(&first->label(), &second->label());
  EXPECT_NE(&first->label(), &other.label());
  EXPECT_EQ(second->label(), "shared-label");

  first.reset();
  EXPECT_EQ(second->label(), "shared-label");
  second.reset();
  const PolicyStats again("shared-label", "p");
  EXPECT_EQ(again.label(), "shared-label");
}

TEST(StatsRegistry, LongLabelsAreBoundedAndStayApart) {
  const std::string longest(kMaxStatsLabelBytes, 'x');
  EXPECT_EQ(BoundedStatsLabel(longest), longest);
  EXPECT_EQ(BoundedStatsLabel(""), "");

  const std::string a = BoundedStatsLabel(longest + "a");
  const std::string b = BoundedStatsLabel(longest + "b");
  EXPECT_EQ(a.size(), kMaxStatsLabelBytes);
  EXPECT_EQ(b.size(), kMaxStatsLabelBytes);
  EXPECT_NE(a, b);
  EXPECT_EQ(a, BoundedStatsLabel(longest + "a"));  // the same every time
  EXPECT_EQ(a.substr(0, kMaxStatsLabelBytes - 17),
            longest.substr(0, kMaxStatsLabelBytes - 17));
  EXPECT_EQ(a[kMaxStatsLabelBytes - 17], '~');

  // U+20AC (3 bytes) over and over: the cut keeps whole characters.
  std::string euros;
  while (euros.size() <= kMaxStatsLabelBytes) euros += "\xE2\x82\xAC";
  const std::string cut = BoundedStatsLabel(euros);
  EXPECT_LE(cut.size(), kMaxStatsLabelBytes);
  EXPECT_TRUE(test_support::IsStrictUtf8(cut)) << cut;

  // A channel keeps the bounded form, and is found by its full label.
  auto stats = std::make_shared<PolicyStats>(longest + "long-label", "p");
  RegisterPolicyStats(stats);
  EXPECT_EQ(stats->label(), BoundedStatsLabel(longest + "long-label"));
  EXPECT_EQ(PoliciesLabelled(longest + "long-label").size(), 1u);
}

TEST(StatsRegistry, ALabelKeepsEveryByteNulIncluded) {
  const std::string label("nul\0label", 9);
  {
    auto stats = std::make_shared<PolicyStats>(label, "p");
    RegisterPolicyStats(stats);
    EXPECT_EQ(stats->label(), label);
    stats->picks = 2;
  }
  const test_support::PromParse parsed =
      test_support::ParsePrometheusText(PrometheusText(SnapshotForMetrics()));
  ASSERT_TRUE(parsed.ok()) << parsed.error;
  EXPECT_EQ(parsed.exposition.Value("grpc_lb_poise_channel_picks_total",
                                    {{"channel", label}}),
            2.0);
}

// Every channel series' picks, added.
double AllChannelPicks(const test_support::PromExposition& e) {
  double picks = 0;
  for (const auto* sample : e.Find("grpc_lb_poise_channel_picks_total")) {
    picks += sample->value;
  }
  return picks;
}

// A label of a live channel keeps its retired counters however many labels
// go: its channel totals would go backwards.
TEST(StatsRegistry, ALabelWithALiveChannelKeepsItsRetiredTotals) {
  auto kept = std::make_shared<PolicyStats>("kept-while-live", "p");
  RegisterPolicyStats(kept);
  kept->picks = 1;
  {
    auto gone = std::make_shared<PolicyStats>("kept-while-live", "p");
    RegisterPolicyStats(gone);
    gone->picks = 10;
  }
  for (size_t i = 0; i < 3 * kGoneLabelsKept; ++i) {
    auto stats =
        std::make_shared<PolicyStats>("live-churn-" + std::to_string(i), "p");
    RegisterPolicyStats(stats);
  }
  const test_support::PromParse parsed =
      test_support::ParsePrometheusText(PrometheusText(SnapshotForMetrics()));
  ASSERT_TRUE(parsed.ok()) << parsed.error;
  EXPECT_EQ(parsed.exposition.Value("grpc_lb_poise_channel_picks_total",
                                    {{"channel", "kept-while-live"}}),
            11.0);
  // The oldest of the churned labels went to channel="".
  EXPECT_TRUE(parsed.exposition
                  .Find("grpc_lb_poise_channel_picks_total",
                        {{"channel", "live-churn-0"}})
                  .empty());
  EXPECT_EQ(parsed.exposition
                .Find("grpc_lb_poise_channel_picks_total", {{"channel", ""}})
                .size(),
            1u);
}

// Thousands of channels of distinct labels and one of a 1 MiB label, all
// destroyed: the text keeps kGoneLabelsKept labels of their own and the
// folded channel="" series, every pick still counted.
TEST(StatsRegistry, TotalsOfGoneChannelsStayBounded) {
  const test_support::PromParse before =
      test_support::ParsePrometheusText(PrometheusText(SnapshotForMetrics()));
  ASSERT_TRUE(before.ok()) << before.error;
  constexpr size_t kChannels = 3000;
  const std::string huge(size_t{1} << 20, 'h');
  for (size_t i = 0; i <= kChannels; ++i) {
    auto stats = std::make_shared<PolicyStats>(
        i < kChannels ? "churn-" + std::to_string(i) : huge, "p");
    RegisterPolicyStats(stats);
    stats->picks = 1;
  }

  const MetricsSnapshot snapshot = SnapshotForMetrics();
  std::set<std::string> live_labels;
  for (const auto& channel : snapshot.live) live_labels.insert(channel.label);
  const std::string text = PrometheusText(snapshot);
  std::printf(
      "PrometheusText() after %zu gone channels and a 1 MiB label: "
      "%zu bytes\n",
      kChannels, text.size());
  ASSERT_TRUE(test_support::IsStrictUtf8(text));
  const test_support::PromParse after = test_support::ParsePrometheusText(text);
  ASSERT_TRUE(after.ok()) << after.error;
  const test_support::PromExposition& e = after.exposition;

  std::set<std::string> channels;
  for (const auto* sample : e.Find("grpc_lb_poise_channel_picks_total")) {
    channels.insert(sample->labels.at("channel"));
    EXPECT_LE(sample->labels.at("channel").size(), kMaxStatsLabelBytes);
  }
  // Its own labels gone, the folded one, and those of live channels.
  EXPECT_LE(channels.size(), kGoneLabelsKept + 1 + live_labels.size());
  EXPECT_EQ(channels.count(""), 1u);
  // The most recent keep their own totals; the 1 MiB label, bounded.
  EXPECT_EQ(e.Value("grpc_lb_poise_channel_picks_total",
                    {{"channel", BoundedStatsLabel(huge)}}),
            1.0);
  EXPECT_EQ(e.Value("grpc_lb_poise_channel_picks_total",
                    {{"channel", "churn-" + std::to_string(kChannels - 1)}}),
            1.0);
  EXPECT_TRUE(
      e.Find("grpc_lb_poise_channel_picks_total", {{"channel", "churn-0"}})
          .empty());
  EXPECT_EQ(AllChannelPicks(e) - AllChannelPicks(before.exposition),
            static_cast<double>(kChannels + 1));
  // A channel's series are 42 lines (5 states, 17 codes, 17 histogram lines,
  // 3 counters) of a label kMaxStatsLabelBytes long at most, written in 3
  // times as many bytes at most (U+FFFD for one byte); the rest of a line
  // (name, other labels, a value) takes less than 200 bytes.
  const size_t empty = PrometheusText(MetricsSnapshot{}).size();
  EXPECT_LE(text.size(),
            empty + channels.size() * 42 * (3 * kMaxStatsLabelBytes + 200));
}

}  // namespace
}  // namespace poise::router
