// Parsing a poise-dns target of many names: the duplicate check is one hash
// lookup per name, so the time per name stays flat from 1,000 to 100,000
// names (compared pairwise, 32,000 names took 3.45 s).
#include <benchmark/benchmark.h>

#include <string>

#include "src/dns/target.h"

namespace {

void BM_ParseDnsTargetNames(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  std::string path;
  for (size_t i = 0; i < n; ++i) {
    path += (i ? ",n" : "n") + std::to_string(i) + ".test:1";
  }
  for (auto _ : state) {
    auto target = poise::dns::ParseTargetParts(poise::dns::Scheme::kDns, "",
                                               path, "bench");
    benchmark::DoNotOptimize(target);
  }
  state.counters["ns_per_name"] = benchmark::Counter(
      static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate |
                                  benchmark::Counter::kInvert);
}
BENCHMARK(BM_ParseDnsTargetNames)
    ->Arg(1000)
    ->Arg(16000)
    ->Arg(32000)
    ->Arg(100000)
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
