// The statistics registry: one snapshot per live policy, its backends as
// last published, and no trace of a destroyed one.
#include "src/router/stats_registry.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "test/router/router_test_util.h"

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

}  // namespace
}  // namespace poise::router
