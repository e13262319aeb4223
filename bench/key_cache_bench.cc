// poise_key_cache_bench: what the key cache (keyCache, src/router/key_cache.h)
// does to router::Picker's picks, each figure paired within one run.
//
//   BM_ZipfPaired/n/bounded/weights/entries: Zipf keys (s = 1.1 over 100,000
//     distinct 36-byte keys), the picker with "keyCache": true against
//     the same picker without one (today's pick), in alternating timed
//     blocks of the same 1,024 keys after a warm-up of 2^19 keys: mean ns
//     (thread CPU time) per pick of each, their ratio, and the cache's hit
//     rate.
//   BM_HitVsRing/n: a pick that hits (1,024 keys, every one cached) against
//     a ring like gRPC's ring_hash default (bench/ring.h) on the same keys.
//   BM_DistinctPaired/n: every key distinct (2^20 keys, none repeated in a
//     run): the picker with the cache against without.
//
// weights: 1 (every backend the same weight) or 2 (every third backend
// twice the others); entries: the cache's size, 0 for the default. gRPC-free;
// bench/run.sh runs it and prints each figure beside its goal.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "ring.h"
#include "router_channel.h"
#include "src/router/backend_set.h"
#include "src/router/config.h"
#include "src/router/picker.h"

namespace poise::router {
namespace {

// Picks per timed block: long enough that reading the thread's CPU clock
// (a system call) costs under 1 % of the shortest block.
constexpr size_t kBlock = 1024;

// This thread's CPU time: the other processes of a shared machine do not
// count (their effect on the caches does).
std::chrono::nanoseconds ThreadCpuNow() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}
constexpr size_t kKeyBytes = 36;

// `count` distinct 36-byte UUID-like keys, end to end in one buffer.
class KeyPool {
 public:
  KeyPool(size_t count, uint64_t seed) : bytes_(count * kKeyBytes, '-') {
    std::mt19937_64 rng(seed);
    const char* hex = "0123456789abcdef";
    for (size_t k = 0; k < count; ++k) {
      // Distinct: the first 16 characters spell k, the rest are random.
      for (size_t i = 0; i < kKeyBytes; ++i) {
        if (i == 8 || i == 13 || i == 18 || i == 23) continue;
        const size_t digit = i < 8 ? (k >> (4 * i)) & 15 : rng() % 16;
        bytes_[k * kKeyBytes + i] = hex[digit];
      }
    }
  }
  std::string_view operator[](size_t k) const {
    return {bytes_.data() + k * kKeyBytes, kKeyBytes};
  }
  size_t size() const { return bytes_.size() / kKeyBytes; }

 private:
  std::string bytes_;
};

// Indices into a pool of `distinct` keys drawn by Zipf's law with exponent
// s (key k with probability proportional to 1 / (k + 1)^s), by inverse CDF.
std::vector<uint32_t> ZipfDraws(size_t distinct, double s, size_t draws,
                                uint64_t seed) {
  std::vector<double> cdf(distinct);
  for (size_t k = 0; k < distinct; ++k) {
    cdf[k] = std::pow(static_cast<double>(k + 1), -s);
  }
  std::partial_sum(cdf.begin(), cdf.end(), cdf.begin());
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> uniform(0.0, cdf.back());
  std::vector<uint32_t> out(draws);
  for (uint32_t& d : out) {
    d = static_cast<uint32_t>(std::min<size_t>(
        distinct - 1,
        static_cast<size_t>(
            std::lower_bound(cdf.begin(), cdf.end(), uniform(rng)) -
            cdf.begin())));
  }
  return out;
}

// One channel's picker over n READY backends, with or without the cache.
class Channel {
 public:
  // cache_entries: the cache's size; 0 for the default.
  Channel(size_t n, bool bounded, bool two_weights, bool key_cache,
          uint32_t cache_entries = 0)
      : channel_(ConfigOf(bounded, key_cache, cache_entries), n,
                 [two_weights](size_t i) {
                   return two_weights && i % 3 == 0 ? 2 : 1;
                 }) {}
  // Picks `key` (the call ends at once); whether the cache answered.
  bool Pick(std::string_view key) const {
    const PickOutcome outcome = channel_.picker().Pick(PickRequest{key, 0});
    const auto* c = std::get_if<PickOutcome::Complete>(&outcome.result);
    benchmark::DoNotOptimize(c);
    return c != nullptr && c->from_cache;
  }
  std::vector<Candidate> Candidates() const {
    std::vector<Candidate> out;
    for (const ListedBackend& b : channel_.backends()) {
      out.push_back({b.identity, b.weight, true});
    }
    return out;
  }

 private:
  static Config ConfigOf(bool bounded, bool key_cache, uint32_t entries) {
    Config config;
    config.bounded = bounded;
    config.key_cache.enabled = key_cache;
    if (entries != 0) config.key_cache.entries = entries;
    return config;
  }

  bench::RouterChannel channel_;
};

// Runs `first` and `second` on each block of keys, alternating which goes
// first, and reports their ns per pick (as `first_name` and `second_name`)
// and second / first as `ratio`.
template <typename KeyAt, typename First, typename Second>
void Paired(benchmark::State& state, const KeyAt& key_at, First first,
            Second second, const char* first_name, const char* second_name) {
  std::chrono::nanoseconds a{}, b{};
  size_t k = 0;
  bool first_first = true;
  for ([[maybe_unused]] auto _ : state) {
    const auto run = [&](auto& pick, std::chrono::nanoseconds& spent) {
      const auto t = ThreadCpuNow();
      for (size_t j = 0; j < kBlock; ++j) pick(key_at(k + j));
      spent += ThreadCpuNow() - t;
    };
    if (first_first) {
      run(first, a);
      run(second, b);
    } else {
      run(second, b);
      run(first, a);
    }
    first_first = !first_first;
    k += kBlock;
  }
  const auto per_pick = [&](std::chrono::nanoseconds d) {
    return std::chrono::duration<double, std::nano>(d).count() /
           (static_cast<double>(state.iterations()) * kBlock);
  };
  state.counters[first_name] = per_pick(a);
  state.counters[second_name] = per_pick(b);
  state.counters["ratio"] = per_pick(b) / per_pick(a);
}

void BM_ZipfPaired(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const bool bounded = state.range(1) != 0;
  const bool two = state.range(2) == 2;
  static const KeyPool pool(100000, 1);
  static const std::vector<uint32_t> draws =
      ZipfDraws(pool.size(), 1.1, size_t{1} << 22, 2);
  const uint32_t entries = state.range(3) != 0
                               ? static_cast<uint32_t>(state.range(3))
                               : KeyCacheConfig::kDefaultEntries;
  const Channel cached(n, bounded, two, true, entries);
  const Channel today(n, bounded, two, false);
  const auto key_at = [&](size_t k) { return pool[draws[k % draws.size()]]; };
  for (size_t k = 0; k < (size_t{1} << 19); ++k) cached.Pick(key_at(k));
  uint64_t hits = 0, picks = 0;
  Paired(
      state, [&](size_t k) { return key_at(k + (size_t{1} << 19)); },
      [&](std::string_view key) {
        hits += cached.Pick(key) ? 1 : 0;
        ++picks;
      },
      [&](std::string_view key) { today.Pick(key); }, "cached_ns", "today_ns");
  state.counters["hit_rate"] =
      static_cast<double>(hits) / static_cast<double>(picks);
}

void BM_HitVsRing(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  static const KeyPool pool(1024, 3);
  const Channel cached(n, false, false, true);
  const bench::Ring ring = bench::BuildRing(cached.Candidates());
  // Each key three times in a row: missed, admitted and inserted, found.
  for (size_t k = 0; k < pool.size(); ++k) {
    for (int i = 0; i < 3; ++i) cached.Pick(pool[k]);
  }
  uint64_t hits = 0, picks = 0;
  Paired(
      state, [&](size_t k) { return pool[k % pool.size()]; },
      [&](std::string_view key) {
        hits += cached.Pick(key) ? 1 : 0;
        ++picks;
      },
      [&](std::string_view key) {
        benchmark::DoNotOptimize(bench::RingPick(ring, key));
      },
      "hit_ns", "ring_ns");
  if (hits != picks) state.SkipWithError("a pick missed the cache");
  state.counters["hit_over_ring"] =
      state.counters["hit_ns"] / state.counters["ring_ns"];
}

void BM_DistinctPaired(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const bool bounded = state.range(1) != 0;
  static const KeyPool pool(size_t{1} << 20, 4);
  // An explicit size: the cache serves every list size measured.
  const Channel on(n, bounded, false, true, KeyCacheConfig::kDefaultEntries);
  const Channel off(n, bounded, false, false);
  uint64_t hits = 0;
  Paired(
      state, [&](size_t k) { return pool[k % pool.size()]; },
      [&](std::string_view key) { hits += on.Pick(key) ? 1 : 0; },
      [&](std::string_view key) { off.Pick(key); }, "on_ns", "off_ns");
  state.counters["on_over_off"] =
      state.counters["on_ns"] / state.counters["off_ns"];
  state.counters["hits"] = static_cast<double>(hits);
}

BENCHMARK(BM_ZipfPaired)
    ->ArgsProduct({{100, 256, 1000}, {0, 1}, {1, 2}, {0}})
    ->Args({1000, 0, 1, 32768})
    ->Args({1000, 0, 1, 65536})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_HitVsRing)->Arg(100)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DistinctPaired)
    ->ArgsProduct({{64, 100, 256, 1000}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace poise::router

BENCHMARK_MAIN();
