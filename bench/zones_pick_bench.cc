// The cost of a local zone in a pick (P8): router::Picker's pick over n
// READY backends in three zones, without a local zone (the path of every
// pick before zones) and with one (the walk restricted to the zone, L_Z
// summed over its backends), for both policies. Paired: each iteration runs
// both, so the ratio is of one moment of the machine.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/router/backend_set.h"
#include "src/router/config.h"
#include "src/router/picker.h"
#include "src/router/stats_registry.h"

namespace poise::router {
namespace {

// n READY backends of weight 1, backend i in zone "z<i mod 3>"; the client
// in `local_zone`.
class ZonedChannel {
 public:
  ZonedChannel(size_t n, bool bounded, std::optional<std::string> local_zone) {
    Config config;
    config.bounded = bounded;
    config.hash_header = "x-key";
    config.local_zone = std::move(local_zone);
    NormalizeAndValidate(config);
    config_ = std::make_shared<const Config>(std::move(config));
    std::vector<ResolverEntry> entries;
    for (size_t i = 0; i < n; ++i) {
      ResolverEntry e{"10.0." + std::to_string(i / 250) + "." +
                          std::to_string(i % 250 + 1) + ":80",
                      1, std::nullopt};
      e.zone = "z" + std::to_string(i % 3);
      entries.push_back(std::move(e));
    }
    set_.Update(entries, *config_);
    std::vector<BackendState> states(n);
    for (BackendState& s : states) s.routing = RoutingState::kReady;
    picker_ = std::make_unique<Picker>(
        config_, set_.list(), states,
        std::make_shared<PolicyStats>("bench", "policy"));
  }
  const Picker& picker() const { return *picker_; }

 private:
  std::shared_ptr<const Config> config_;
  BackendSet set_;
  std::unique_ptr<Picker> picker_;
};

void BM_ZonePickPaired(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const bool bounded = state.range(1) != 0;
  const ZonedChannel plain(n, bounded, std::nullopt);
  const ZonedChannel zoned(n, bounded, "z1");
  std::vector<std::string> keys;
  for (int k = 0; k < 1024; ++k) keys.push_back("user-" + std::to_string(k));
  size_t k = 0;
  std::chrono::nanoseconds plain_time{0};
  std::chrono::nanoseconds zoned_time{0};
  for ([[maybe_unused]] auto _ : state) {
    const std::string& key = keys[k++ & 1023];
    auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(plain.picker().Pick(PickRequest{key, 0}));
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(zoned.picker().Pick(PickRequest{key, 0}));
    auto t2 = std::chrono::steady_clock::now();
    plain_time += t1 - t0;
    zoned_time += t2 - t1;
  }
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["no_zone_ns"] =
      static_cast<double>(plain_time.count()) / iterations;
  state.counters["zone_ns"] =
      static_cast<double>(zoned_time.count()) / iterations;
  state.counters["ratio"] = static_cast<double>(zoned_time.count()) /
                            static_cast<double>(plain_time.count());
}
// {n, bounded}
BENCHMARK(BM_ZonePickPaired)
    ->Args({9, 0})
    ->Args({9, 1})
    ->Args({99, 0})
    ->Args({99, 1})
    ->Args({999, 0})
    ->Args({999, 1});

}  // namespace
}  // namespace poise::router

BENCHMARK_MAIN();
