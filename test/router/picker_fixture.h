// A Picker over backends AddressOf(0..) of given weights and states, for the
// router's pick tests (picker_test.cc, retry_test.cc).
#ifndef POISE_TEST_ROUTER_PICKER_FIXTURE_H_
#define POISE_TEST_ROUTER_PICKER_FIXTURE_H_

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "src/router/backend_set.h"
#include "src/router/config.h"
#include "src/router/picker.h"
#include "test/router/router_test_util.h"

namespace poise::router::test {

class PickerFixture : public ::testing::Test {
 protected:
  // Backends AddressOf(0..) with these weights (resolver attributes).
  void Build(Config config, const std::vector<uint32_t>& weights,
             std::vector<BackendState> states) {
    std::vector<ResolverEntry> entries;
    for (size_t i = 0; i < weights.size(); ++i) {
      entries.push_back(Entry(AddressOf(i), weights[i]));
    }
    ASSERT_TRUE(NormalizeAndValidate(config).empty());
    config_ = std::make_shared<const Config>(std::move(config));
    set_.Update(entries, *config_);
    states_ = std::move(states);
    picker_ = std::make_unique<Picker>(config_, set_.list(), states_, stats_);
  }

  uint64_t InFlight(size_t backend) const {
    return set_.backends()[backend].cell->in_flight->Load();
  }

  std::shared_ptr<const Config> config_;
  BackendSet set_;
  std::vector<BackendState> states_;
  std::shared_ptr<PolicyStats> stats_ =
      std::make_shared<PolicyStats>("test", "policy");
  std::unique_ptr<Picker> picker_;
};

}  // namespace poise::router::test

#endif  // POISE_TEST_ROUTER_PICKER_FIXTURE_H_
