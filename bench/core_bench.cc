// Core pick costs beside the usual alternatives, membership-update costs and
// in-flight counter contention. bench/run.sh runs this and summarises it.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "poise/hash.h"
#include "poise/identity_table.h"
#include "poise/in_flight.h"
#include "poise/rendezvous.h"
#include "ring.h"
#include "src/core/candidate_hash.h"
#include "src/core/identity_store.h"
#include "src/core/prepared_candidates.h"

namespace {

constexpr size_t kKeyPool = 4096;       // power of two: cheap rotation
constexpr uint32_t kBenchFactor = 105;  // lets 90 % of backends be saturated

// 36-byte UUID-like keys, precomputed so the benchmark measures the pick.
const std::vector<std::string>& Keys() {
  static const std::vector<std::string> keys = [] {
    std::mt19937_64 rng(1);
    std::vector<std::string> out;
    const char* hex = "0123456789abcdef";
    for (size_t k = 0; k < kKeyPool; ++k) {
      std::string key(36, '-');
      for (size_t i = 0; i < key.size(); ++i) {
        if (i != 8 && i != 13 && i != 18 && i != 23) key[i] = hex[rng() % 16];
      }
      out.push_back(std::move(key));
    }
    return out;
  }();
  return keys;
}

std::string Identity(size_t i) {
  return "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1) +
         ":8080";
}

// Two weights, or (one_weight) the default cluster where every backend has
// the same weight, which PreparedCandidates serves on its short path.
uint32_t WeightOf(size_t i, bool one_weight = false) {
  return one_weight ? 1 : (i % 3 == 0 ? 2 : 1);
}

struct Cluster {
  std::vector<std::string> ids;  // owns the identity bytes
  std::vector<poise::Candidate> candidates;
  std::vector<uint64_t> loads;
  double saturated_fraction = 0;

  uint64_t LoadSum() const {
    uint64_t sum = 0;
    for (const uint64_t l : loads) sum += l;
    return sum;
  }
};

// n backends, the given fraction (rounded down) of them at or over their
// bound under kBenchFactor: their loads are raised together (proportional to
// weight) until Capacity confirms that each one has no room.
Cluster MakeCluster(size_t n, double saturated, bool one_weight = false) {
  const auto WeightOf = [one_weight](size_t i) {
    return ::WeightOf(i, one_weight);
  };
  Cluster c;
  for (size_t i = 0; i < n; ++i) c.ids.push_back(Identity(i));
  uint32_t total_weight = 0;
  for (size_t i = 0; i < n; ++i) {
    c.candidates.push_back({c.ids[i], WeightOf(i)});
    total_weight += WeightOf(i);
  }
  c.loads.assign(n, 0);
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
  order.resize(static_cast<size_t>(saturated * static_cast<double>(n)));
  for (uint64_t h = 1; !order.empty(); h *= 2) {
    uint64_t total = 0;
    for (size_t i : order) total += h * WeightOf(i);
    bool all_full = true;
    for (size_t i : order) {
      const uint64_t load = h * WeightOf(i);
      all_full &= load >= poise::BoundedLoadRendezvous::Capacity(
                              kBenchFactor, total, WeightOf(i), total_weight);
    }
    if (!all_full) continue;
    for (size_t i : order) c.loads[i] = h * WeightOf(i);
    break;
  }
  uint64_t total = 0;
  for (uint64_t l : c.loads) total += l;
  size_t full = 0;
  for (size_t i = 0; i < n; ++i) {
    full += c.loads[i] >= poise::BoundedLoadRendezvous::Capacity(
                              kBenchFactor, total, WeightOf(i), total_weight);
  }
  c.saturated_fraction = static_cast<double>(full) / static_cast<double>(n);
  return c;
}

void PerCandidate(benchmark::State& state, size_t n) {
  state.counters["ns_per_cand"] =
      benchmark::Counter(static_cast<double>(n) * 1e-9,
                         benchmark::Counter::kIsIterationInvariantRate |
                             benchmark::Counter::kInvert);
}

void BM_Unbounded(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const Cluster c = MakeCluster(n, 0);
  const auto& keys = Keys();
  size_t k = 0;
  for ([[maybe_unused]] auto _ : state) {
    auto r =
        poise::WeightedRendezvous::Pick(keys[k++ % kKeyPool], c.candidates);
    benchmark::DoNotOptimize(r);
  }
  PerCandidate(state, n);
}

// The same through an IdentityTable built once for the list (what the gRPC
// picker runs).
void BM_UnboundedTable(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const Cluster c = MakeCluster(n, 0);
  const poise::IdentityTable table(c.candidates);
  const auto& keys = Keys();
  size_t k = 0;
  for ([[maybe_unused]] auto _ : state) {
    auto r = poise::WeightedRendezvous::Pick(keys[k++ % kKeyPool], c.candidates,
                                             table);
    benchmark::DoNotOptimize(r);
  }
  PerCandidate(state, n);
}

// In-flight counters holding `loads`: what the router's RouteWithTotal reads.
struct Counters {
  std::vector<std::unique_ptr<poise::InFlightCounter>> owned;
  std::vector<const poise::InFlightCounter*> view;

  explicit Counters(const std::vector<uint64_t>& loads) {
    for (const uint64_t load : loads) {
      owned.push_back(std::make_unique<poise::InFlightCounter>());
      for (uint64_t k = 0; k < load; ++k) owned.back()->TryAcquire();
      view.push_back(owned.back().get());
    }
  }
};

// Runs a bounded benchmark on n = range(0) backends with range(1) percent of
// them saturated: make_route(candidates, policy, total, loads) (total: the
// sum of the loads, what the router's counter of the scope's calls in flight
// would hold) makes route(key, load, scratch), which returns a poise::Result of
// something with a `spilled` flag; the spill rate is reported beside the time.
template <typename MakeRoute>
void RunBounded(benchmark::State& state, bool one_weight,
                MakeRoute make_route) {
  const auto n = static_cast<size_t>(state.range(0));
  const double want = static_cast<double>(state.range(1)) / 100.0;
  const Cluster c = MakeCluster(n, want, one_weight);
  const double expected =
      std::floor(want * static_cast<double>(n)) / static_cast<double>(n);
  if (c.saturated_fraction != expected) {
    state.SkipWithError("could not saturate the requested fraction");
    return;
  }
  const auto policy = *poise::BoundedLoadRendezvous::Create(kBenchFactor);
  const auto route = make_route(c.candidates, policy, c.LoadSum(), c.loads);
  const auto& keys = Keys();
  poise::DecisionScratch scratch;
  size_t k = 0;
  uint64_t spilled = 0;
  const auto load = [&](size_t i) { return c.loads[i]; };
  for ([[maybe_unused]] auto _ : state) {
    auto r = route(keys[k++ % kKeyPool], load, scratch);
    spilled += r.ok() && r.value().spilled;
    benchmark::DoNotOptimize(r);
  }
  PerCandidate(state, n);
  state.counters["saturated"] = c.saturated_fraction;
  state.counters["spill_rate"] = benchmark::Counter(
      static_cast<double>(spilled), benchmark::Counter::kAvgIterations);
}

// Decide on the candidate list, hashing every identity per pick.
void BM_Bounded(benchmark::State& state) {
  RunBounded(state, false,
             [](const std::vector<poise::Candidate>& candidates,
                const poise::BoundedLoadRendezvous& policy, uint64_t,
                const std::vector<uint64_t>&) {
               return [&candidates, &policy](const std::string& key,
                                             const auto& load,
                                             poise::DecisionScratch& scratch) {
                 return policy.Decide(key, candidates, load, scratch);
               };
             });
}

// Decide through an IdentityTable built once for the list.
void BM_BoundedTable(benchmark::State& state) {
  RunBounded(state, false,
             [](const std::vector<poise::Candidate>& candidates,
                const poise::BoundedLoadRendezvous& policy, uint64_t,
                const std::vector<uint64_t>&) {
               return [&candidates, &policy,
                       table = std::make_shared<const poise::IdentityTable>(
                           candidates)](const std::string& key,
                                        const auto& load,
                                        poise::DecisionScratch& scratch) {
                 return policy.Decide(key, candidates, *table, load, scratch);
               };
             });
}

// PreparedCandidates::Pick as the gRPC picker runs it, on one weight or on
// the two weights of MakeCluster (each has its own path).
void PreparedPickBench(benchmark::State& state, bool one_weight) {
  const auto n = static_cast<size_t>(state.range(0));
  const Cluster c = MakeCluster(n, 0, one_weight);
  const poise::PreparedCandidates prepared(
      c.candidates, std::make_shared<const poise::IdentityTable>(c.candidates));
  using Path = poise::PreparedCandidates::Path;
  if (prepared.path() != (one_weight ? Path::kOneWeight : Path::kTwoWeights)) {
    state.SkipWithError("the list does not take the intended path");
    return;
  }
  const auto& keys = Keys();
  size_t k = 0;
  for ([[maybe_unused]] auto _ : state) {
    auto r = prepared.Pick(keys[k++ % kKeyPool]);
    benchmark::DoNotOptimize(r);
  }
  PerCandidate(state, n);
}

void BM_PreparedPick(benchmark::State& state) {
  PreparedPickBench(state, true);
}
// The same with the scalar kernels forced: what a CPU without AVX-512 runs,
// measured in the same process as the dispatched kernel.
// Runs `bench` with the scalar kernels forced, then restores the dispatched
// ones.
template <typename Bench>
void WithScalarKernel(Bench&& bench) {
  const poise::internal::HashKernel dispatched =
      poise::internal::ActiveHashKernel();
  poise::internal::SelectHashKernel(poise::internal::HashKernel::kScalar);
  bench();
  poise::internal::SelectHashKernel(dispatched);
}
void BM_PreparedPickScalarKernel(benchmark::State& state) {
  WithScalarKernel([&] { PreparedPickBench(state, true); });
}
void BM_PreparedPickTwoWeights(benchmark::State& state) {
  PreparedPickBench(state, false);
}

// The bounded policy (range(1) = percent saturated) on one weight or on the
// two weights of MakeCluster: RouteWithTotal given the sum of the loads and
// the backends' in-flight counters, as the router runs it.
void PreparedRouteBench(benchmark::State& state, bool one_weight) {
  RunBounded(
      state, one_weight,
      [](const std::vector<poise::Candidate>& candidates,
         const poise::BoundedLoadRendezvous& policy, uint64_t total,
         const std::vector<uint64_t>& loads) {
        return
            [&policy, total, counters = std::make_shared<const Counters>(loads),
             prepared = std::make_shared<const poise::PreparedCandidates>(
                 candidates,
                 std::make_shared<const poise::IdentityTable>(candidates))](
                const std::string& key, const auto& /*load*/,
                poise::DecisionScratch& scratch) {
              return prepared->RouteWithTotal(policy, key, total,
                                              counters->view.data(), scratch);
            };
      });
}

void BM_PreparedRouteWithTotal(benchmark::State& state) {
  PreparedRouteBench(state, true);
}
void BM_PreparedRouteWithTotalTwoWeights(benchmark::State& state) {
  PreparedRouteBench(state, false);
}

// The bounded-to-unbounded ratio on one prepared list: Pick,
// RouteWithTotal (given the sum of the loads and the counters, with
// range(1) percent of the backends saturated) and the general decision
// (BoundedLoadRendezvous::Decide through the table, every load read) take
// turns over the same blocks of keys, each block timed, the order rotated
// every iteration. All run on the same memory (separate benchmarks'
// allocations move their timings on the development VMs) and through the
// same drifts of the machine's speed, so the ratio is steadier than one of
// two medians over the other. `ratio` is RouteWithTotal's, `general_ratio`
// the general decision's.
void PairedBench(benchmark::State& state, bool one_weight) {
  using Clock = std::chrono::steady_clock;
  constexpr size_t kBlock = 64;
  const auto n = static_cast<size_t>(state.range(0));
  const Cluster c =
      MakeCluster(n, static_cast<double>(state.range(1)) / 100.0, one_weight);
  const poise::PreparedCandidates prepared(
      c.candidates, std::make_shared<const poise::IdentityTable>(c.candidates));
  const auto policy = *poise::BoundedLoadRendezvous::Create(kBenchFactor);
  const Counters counters(c.loads);
  const uint64_t total = c.LoadSum();
  poise::DecisionScratch scratch;
  const auto& keys = Keys();
  Clock::duration pick{}, with_total{}, general{};
  const auto load = [&](size_t i) { return c.loads[i]; };
  size_t k = 0;
  size_t first = 0;
  for ([[maybe_unused]] auto _ : state) {
    const auto picks = [&] {
      const auto t = Clock::now();
      for (size_t j = 0; j < kBlock; ++j) {
        benchmark::DoNotOptimize(prepared.Pick(keys[(k + j) % kKeyPool]));
      }
      pick += Clock::now() - t;
    };
    const auto routes_with_total = [&] {
      const auto t = Clock::now();
      for (size_t j = 0; j < kBlock; ++j) {
        benchmark::DoNotOptimize(
            prepared.RouteWithTotal(policy, keys[(k + j) % kKeyPool], total,
                                    counters.view.data(), scratch));
      }
      with_total += Clock::now() - t;
    };
    const auto general_decisions = [&] {
      const auto t = Clock::now();
      for (size_t j = 0; j < kBlock; ++j) {
        benchmark::DoNotOptimize(
            policy.Decide(keys[(k + j) % kKeyPool], prepared.candidates(),
                          prepared.table(), load, scratch));
      }
      general += Clock::now() - t;
    };
    for (size_t turn = 0; turn < 3; ++turn) {
      switch ((first + turn) % 3) {
        case 0:
          picks();
          break;
        case 1:
          routes_with_total();
          break;
        default:
          general_decisions();
      }
    }
    first = (first + 1) % 3;
    k += kBlock;
  }
  const auto per_call = [&](Clock::duration d) {
    return std::chrono::duration<double, std::nano>(d).count() /
           (static_cast<double>(state.iterations()) *
            static_cast<double>(kBlock));
  };
  state.counters["pick_ns"] = per_call(pick);
  state.counters["route_ns"] = per_call(with_total);
  state.counters["general_ns"] = per_call(general);
  state.counters["ratio"] = per_call(with_total) / per_call(pick);
  state.counters["general_ratio"] = per_call(general) / per_call(pick);
  state.counters["saturated"] = c.saturated_fraction;
}

void BM_PairedRatio(benchmark::State& state) { PairedBench(state, true); }
void BM_PairedRatioTwoWeights(benchmark::State& state) {
  PairedBench(state, false);
}

using poise::bench::BuildRing;
using poise::bench::Ring;
using poise::bench::RingPick;

void BM_Ring(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const Cluster c = MakeCluster(n, 0);
  const Ring ring = BuildRing(c.candidates);
  const auto& keys = Keys();
  size_t k = 0;
  for ([[maybe_unused]] auto _ : state) {
    benchmark::DoNotOptimize(RingPick(ring, keys[k++ % kKeyPool]));
  }
  state.counters["ring_entries"] = static_cast<double>(ring.entries.size());
}

// The floor: argmax over precomputed 64-bit per-backend hashes, salted by a
// per-key value so nothing can be hoisted out of the loop.
void BM_ArgmaxFloor(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<uint64_t> hashes(n);
  std::mt19937_64 rng(3);
  for (auto& h : hashes) h = rng();
  std::vector<uint64_t> salts(kKeyPool);
  for (size_t k = 0; k < kKeyPool; ++k) salts[k] = poise::Fnv1a(Keys()[k]);
  size_t k = 0;
  for ([[maybe_unused]] auto _ : state) {
    const uint64_t salt = salts[k++ % kKeyPool];
    size_t best = 0;
    uint64_t best_h = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t h = hashes[i] ^ salt;
      if (h > best_h) {
        best_h = h;
        best = i;
      }
    }
    benchmark::DoNotOptimize(best);
  }
  PerCandidate(state, n);
}

// Membership update: the picker snapshot (candidates, shared counters and the
// PreparedCandidates over the shared table).
void BM_SnapshotBuild(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<std::string> ids;
  for (size_t i = 0; i < n; ++i) ids.push_back(Identity(i));
  // The list's IdentityTable exists already (it is built on address changes).
  const auto table = std::make_shared<const poise::IdentityTable>(
      std::vector<std::string_view>(ids.begin(), ids.end()));
  for ([[maybe_unused]] auto _ : state) {
    std::vector<poise::Candidate> candidates;
    std::vector<std::shared_ptr<poise::InFlightCounter>> counters;
    candidates.reserve(n);
    counters.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      candidates.push_back({ids[i], WeightOf(i, /*one_weight=*/true)});
      counters.push_back(std::make_shared<poise::InFlightCounter>());
    }
    const poise::PreparedCandidates prepared(std::move(candidates), table);
    benchmark::DoNotOptimize(&prepared);
    benchmark::DoNotOptimize(counters.data());
  }
}

// Membership update: the IdentityTable (built when the backend list changes,
// shared by the snapshots of that list).
void BM_TableBuild(benchmark::State& state) {
  const Cluster c = MakeCluster(static_cast<size_t>(state.range(0)), 0);
  for ([[maybe_unused]] auto _ : state) {
    const poise::IdentityTable table(c.candidates);
    benchmark::DoNotOptimize(table.size());
  }
}

// The same full build with the scalar kernel (CPUs without AVX-512).
void BM_TableBuildScalarKernel(benchmark::State& state) {
  WithScalarKernel([&] { BM_TableBuild(state); });
}

// An address update through the identity store: the list's table is alive
// (another channel holds it) and the update replaces one identity with one
// the process has not hashed, so each iteration hashes that one identity,
// finds the other rows, builds the new table from rows and releases it
// (which frees the new row). Counters: identities hashed and table bytes
// written per update, from the store's own counts.
void TableUpdateBench(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  std::vector<std::string> ids;
  for (size_t i = 0; i < n; ++i) ids.push_back(Identity(i));
  poise::internal::IdentityStore store;
  const auto live =
      store.Share(std::vector<std::string_view>(ids.begin(), ids.end()));
  const poise::internal::IdentityStoreCounts before = store.counts();
  uint64_t k = 0;
  for ([[maybe_unused]] auto _ : state) {
    ids[n / 2] = "moved-" + std::to_string(k++);
    const auto table =
        store.Share(std::vector<std::string_view>(ids.begin(), ids.end()));
    benchmark::DoNotOptimize(table->size());
  }
  const poise::internal::IdentityStoreCounts after = store.counts();
  const auto per_update = [&](uint64_t a, uint64_t b) {
    return static_cast<double>(a - b) / static_cast<double>(k);
  };
  state.counters["identities_hashed"] =
      per_update(after.identities_hashed, before.identities_hashed);
  state.counters["table_bytes_written"] =
      per_update(after.table_bytes_written, before.table_bytes_written);
}
void BM_TableUpdate(benchmark::State& state) { TableUpdateBench(state); }
void BM_TableUpdateScalarKernel(benchmark::State& state) {
  WithScalarKernel([&] { TableUpdateBench(state); });
}

void BM_RingBuild(benchmark::State& state) {
  const Cluster c = MakeCluster(static_cast<size_t>(state.range(0)), 0);
  for ([[maybe_unused]] auto _ : state) {
    Ring ring = BuildRing(c.candidates);
    benchmark::DoNotOptimize(ring.entries.data());
  }
}

// Acquire + release of one in-flight slot; Threads(2) on one shared counter
// versus one counter per thread (separate allocations; counters are not
// padded to a cache line, see poise/in_flight.h).
std::shared_ptr<poise::InFlightCounter> g_shared =
    std::make_shared<poise::InFlightCounter>();

void BM_InFlightSame(benchmark::State& state) {
  for ([[maybe_unused]] auto _ : state) {
    auto guard = poise::InFlightGuard::TryAcquire(g_shared);
    benchmark::DoNotOptimize(guard.held());
  }
}

void BM_InFlightSeparate(benchmark::State& state) {
  auto mine = std::make_shared<poise::InFlightCounter>();
  for ([[maybe_unused]] auto _ : state) {
    auto guard = poise::InFlightGuard::TryAcquire(mine);
    benchmark::DoNotOptimize(guard.held());
  }
}

void Sizes(benchmark::internal::Benchmark* b) {
  for (int n : {3, 10, 100, 1000}) b->Arg(n);
}

BENCHMARK(BM_Unbounded)->Apply(Sizes);
BENCHMARK(BM_UnboundedTable)->Apply(Sizes);
BENCHMARK(BM_Bounded)->ArgsProduct({{3, 10, 100, 1000}, {0, 50, 90}});
BENCHMARK(BM_BoundedTable)->ArgsProduct({{3, 10, 100, 1000}, {0, 50, 90}});
BENCHMARK(BM_PreparedPick)->Apply(Sizes);
BENCHMARK(BM_PreparedPickScalarKernel)->Apply(Sizes);
BENCHMARK(BM_PreparedPickTwoWeights)->Apply(Sizes);
BENCHMARK(BM_PreparedRouteWithTotal)
    ->ArgsProduct({{3, 10, 100, 1000}, {0, 50, 90}});
BENCHMARK(BM_PreparedRouteWithTotalTwoWeights)
    ->ArgsProduct({{3, 10, 100, 1000}, {0, 50, 90}});
BENCHMARK(BM_PairedRatio)->ArgsProduct({{3, 10, 100, 1000}, {50}});
BENCHMARK(BM_PairedRatioTwoWeights)->ArgsProduct({{3, 10, 100, 1000}, {50}});
BENCHMARK(BM_Ring)->Apply(Sizes);
BENCHMARK(BM_ArgmaxFloor)->Apply(Sizes);
BENCHMARK(BM_SnapshotBuild)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_TableBuild)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_TableBuildScalarKernel)->Arg(1000);
BENCHMARK(BM_TableUpdate)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_TableUpdateScalarKernel)->Arg(1000);
BENCHMARK(BM_RingBuild)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_InFlightSame)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_InFlightSeparate)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
