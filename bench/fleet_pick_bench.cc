// The cost of serverLoad in a pick: router::Picker's bounded pick over the
// load scope's counts against the same pick over the fleet's loads (every
// READY backend's report read, then the herding rule on the backends the
// key's order visits), at n backends with fresh reports. Paired: each
// iteration runs both, so the ratio is of one moment of the machine.
#include <benchmark/benchmark.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "router_channel.h"
#include "src/router/backend_set.h"
#include "src/router/config.h"
#include "src/router/fleet_load.h"
#include "src/router/picker.h"

namespace poise::router {
namespace {

// The bounded policy over n READY backends, over the scope's counts or
// (server_load) the fleet's loads.
struct Channel {
  Channel(size_t n, bool server_load)
      : channel(ConfigOf(server_load), n, [](size_t) { return 1; }) {
    // Every backend reports 10 calls, one of them this client's, which has
    // ended since: the herding rule takes the room at once (the common case
    // of a backend below its bound; a gated one costs a step further along
    // the key's order).
    for (const ListedBackend& b : channel.backends()) {
      b.cell->fleet().report.Store(10, 1, FleetNowNs());
    }
  }
  static Config ConfigOf(bool server_load) {
    Config config;
    config.bounded = true;
    if (server_load) config.server_load.emplace();
    return config;
  }
  const Picker& picker() const { return channel.picker(); }

  bench::RouterChannel channel;
};

std::vector<std::string> Keys() {
  std::vector<std::string> keys;
  keys.reserve(1024);
  for (int k = 0; k < 1024; ++k) keys.push_back("user-" + std::to_string(k));
  return keys;
}

void BM_FleetPickPaired(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const Channel scope(n, false);
  const Channel fleet(n, true);
  const std::vector<std::string> keys = Keys();
  size_t k = 0;
  std::chrono::nanoseconds scope_time{0};
  std::chrono::nanoseconds fleet_time{0};
  for ([[maybe_unused]] auto _ : state) {
    const std::string& key = keys[k++ & 1023];
    auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(scope.picker().Pick(PickRequest{key, 0}));
    auto t1 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(fleet.picker().Pick(PickRequest{key, 0}));
    auto t2 = std::chrono::steady_clock::now();
    scope_time += t1 - t0;
    fleet_time += t2 - t1;
  }
  const auto iterations = static_cast<double>(state.iterations());
  state.counters["scope_ns"] =
      static_cast<double>(scope_time.count()) / iterations;
  state.counters["fleet_ns"] =
      static_cast<double>(fleet_time.count()) / iterations;
  state.counters["ratio"] = static_cast<double>(fleet_time.count()) /
                            static_cast<double>(scope_time.count());
}
BENCHMARK(BM_FleetPickPaired)->Arg(3)->Arg(10)->Arg(100)->Arg(1000);

}  // namespace
}  // namespace poise::router

BENCHMARK_MAIN();
