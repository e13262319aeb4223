// One channel's router state without gRPC, for the router's benchmarks: a
// backend set of n READY backends ("10.0.X.Y:80") and a picker over it.
// Shared by poise_fleet_pick_bench and poise_key_cache_bench.
#ifndef POISE_BENCH_ROUTER_CHANNEL_H_
#define POISE_BENCH_ROUTER_CHANNEL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "src/router/backend_set.h"
#include "src/router/config.h"
#include "src/router/picker.h"

namespace poise::bench {

class RouterChannel {
 public:
  // `config` (hashHeader "x-key" if it has none) over n backends; backend
  // i weighs weight_of(i) (the resolver's weight attribute).
  template <typename WeightOf>
  RouterChannel(router::Config config, size_t n, WeightOf weight_of) {
    if (config.hash_header.empty()) config.hash_header = "x-key";
    router::NormalizeAndValidate(config);
    config_ = std::make_shared<const router::Config>(std::move(config));
    std::vector<router::ResolverEntry> entries;
    entries.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      entries.push_back({"10.0." + std::to_string(i / 250) + "." +
                             std::to_string(i % 250 + 1) + ":80",
                         static_cast<uint32_t>(weight_of(i)), std::nullopt});
    }
    set_.Update(entries, *config_);
    std::vector<router::BackendState> states(n);
    for (router::BackendState& s : states) {
      s.routing = router::RoutingState::kReady;
    }
    picker_ = std::make_unique<router::Picker>(
        config_, set_.list(), states,
        std::make_shared<router::PolicyStats>("bench", "policy"));
  }

  const router::Picker& picker() const { return *picker_; }
  const std::vector<router::ListedBackend>& backends() const {
    return set_.backends();
  }

 private:
  std::shared_ptr<const router::Config> config_;
  router::BackendSet set_;
  std::unique_ptr<router::Picker> picker_;
};

}  // namespace poise::bench

#endif  // POISE_BENCH_ROUTER_CHANNEL_H_
