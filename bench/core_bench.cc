// Core pick costs beside the usual alternatives, membership-update costs and
// in-flight counter contention. bench/run.sh runs this and summarises it.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "poise/bound.h"
#include "poise/hash.h"
#include "poise/identity_table.h"
#include "poise/in_flight.h"
#include "poise/rendezvous.h"
#include "ring.h"
#include "router_channel.h"
#include "src/core/candidate_hash.h"
#include "src/core/identity_store.h"
#include "src/core/key_order.h"
#include "src/core/prepared_candidates.h"
#include "src/router/config.h"
#include "src/router/picker.h"

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
// Runs `bench` with the kernels on their portable target (the last
// compiled: what a CPU without any of the SIMD targets runs), then puts them
// back on the target the run chose (main()).
template <typename Bench>
void WithPortableKernel(Bench&& bench) {
  const int64_t chosen = poise::internal::ActiveHashTarget();
  poise::internal::ForceHashTarget(
      poise::internal::CompiledHashTargets().back());
  bench();
  poise::internal::ForceHashTarget(chosen);
}
void BM_PreparedPickPortableKernel(benchmark::State& state) {
  WithPortableKernel([&] { PreparedPickBench(state, true); });
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

// The calling thread's CPU time: a block preempted by another process on the
// shared development VMs is not charged for the other's time.
struct ThreadCpuClock {
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<ThreadCpuClock, duration>;
  static time_point now() {
    timespec t{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return time_point(std::chrono::seconds(t.tv_sec) +
                      std::chrono::nanoseconds(t.tv_nsec));
  }
};

// Waits for every instruction before it to finish before any after it
// starts. In a tight loop the CPU overlaps one pick's key hashing (a chain of
// dependent multiplies) with the last pick's tail; in a call a pick follows
// thousands of the call's own instructions, never another pick.
inline void WaitForEarlierInstructions() {
#if defined(__x86_64__)
  __builtin_ia32_lfence();
#elif defined(__aarch64__)
  __asm__ __volatile__("isb" ::: "memory");
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// POISE_PAIRED_ONLY=k: PairedRuns runs only the k-th run of each set (the
// others report 0 ns), so that a profiler or callgrind sees one pick alone
// (bench/picker_ir.sh).
std::optional<size_t> PairedOnly() {
  static const std::optional<size_t> only = []() -> std::optional<size_t> {
    const char* value = std::getenv("POISE_PAIRED_ONLY");
    if (value == nullptr || *value == '\0') return std::nullopt;
    return static_cast<size_t>(std::strtoul(value, nullptr, 10));
  }();
  return only;
}

// Rotating timed blocks of the same keys: each iteration runs every one of
// `runs` on kPairedBlock keys, the order rotated from one iteration to the
// next, so that all see the same memory and the same drifts of the machine's
// speed (the development VMs drift by several percent between runs).
// Returns each run's CPU ns per call. `fenced`: each call waits for the one
// before it (WaitForEarlierInstructions), so each counts its own latency.
constexpr size_t kPairedBlock = 64;
template <size_t kRuns>
std::array<double, kRuns> PairedRuns(
    benchmark::State& state,
    const std::array<std::function<void(const std::string&)>, kRuns>& runs,
    bool fenced = false) {
  using Clock = ThreadCpuClock;
  const auto& keys = Keys();
  const std::optional<size_t> only = PairedOnly();
  std::array<Clock::duration, kRuns> spent{};
  size_t k = 0, first = 0;
  for ([[maybe_unused]] auto _ : state) {
    for (size_t turn = 0; turn < kRuns; ++turn) {
      const size_t r = (first + turn) % kRuns;
      if (only.has_value() && r != *only) continue;
      const auto t = Clock::now();
      for (size_t j = 0; j < kPairedBlock; ++j) {
        runs[r](keys[(k + j) % kKeyPool]);
        if (fenced) WaitForEarlierInstructions();
      }
      spent[r] += Clock::now() - t;
    }
    first = (first + 1) % kRuns;
    k += kPairedBlock;
  }
  std::array<double, kRuns> ns{};
  for (size_t r = 0; r < kRuns; ++r) {
    ns[r] = std::chrono::duration<double, std::nano>(spent[r]).count() /
            (static_cast<double>(state.iterations()) *
             static_cast<double>(kPairedBlock));
  }
  return ns;
}

// Candidates of three weights (1, 2, 3 in turn): the general path.
std::vector<poise::Candidate> ThreeWeights(const Cluster& c) {
  std::vector<poise::Candidate> out = c.candidates;
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].weight = static_cast<uint32_t>(1 + i % 3);
  }
  return out;
}

// The unbounded picks of issue 27's goals, paired: one weight, two weights,
// three weights (the general path) through PreparedCandidates, and the ring.
void BM_PairedPicks(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const Cluster one = MakeCluster(n, 0, /*one_weight=*/true);
  const Cluster two = MakeCluster(n, 0, /*one_weight=*/false);
  const std::vector<poise::Candidate> three = ThreeWeights(two);
  const auto prepare = [](const std::vector<poise::Candidate>& candidates) {
    return poise::PreparedCandidates(
        candidates, std::make_shared<const poise::IdentityTable>(candidates));
  };
  const poise::PreparedCandidates p1 = prepare(one.candidates);
  const poise::PreparedCandidates p2 = prepare(two.candidates);
  const poise::PreparedCandidates p3 = prepare(three);
  using Path = poise::PreparedCandidates::Path;
  if (p1.path() != Path::kOneWeight || p2.path() != Path::kTwoWeights ||
      p3.path() != Path::kGeneral) {
    state.SkipWithError("a list does not take the intended path");
    return;
  }
  const Ring ring = BuildRing(one.candidates);
  const auto ns = PairedRuns<4>(
      state,
      {[&](const std::string& key) { benchmark::DoNotOptimize(p1.Pick(key)); },
       [&](const std::string& key) { benchmark::DoNotOptimize(p2.Pick(key)); },
       [&](const std::string& key) { benchmark::DoNotOptimize(p3.Pick(key)); },
       [&](const std::string& key) {
         benchmark::DoNotOptimize(RingPick(ring, key));
       }});
  state.counters["one_ns"] = ns[0];
  state.counters["two_ns"] = ns[1];
  state.counters["general_ns"] = ns[2];
  state.counters["ring_ns"] = ns[3];
  state.counters["one_over_ring"] = ns[0] / ns[3];
  state.counters["two_over_one"] = ns[1] / ns[0];
  state.counters["general_over_one"] = ns[2] / ns[0];
}

// The saturated bounded pick (range(1) percent of the backends full, one
// weight or, range(2) = 2, two), paired: RouteWithTotal as the router runs
// it, the core's walk with a view that reads every load as soon as the owner
// is full, and the walk reading only the loads it visits (key_order.h): the
// measure behind reading only those.
void BM_PairedSaturated(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const Cluster c = MakeCluster(n, static_cast<double>(state.range(1)) / 100.0,
                                /*one_weight=*/state.range(2) == 1);
  const auto policy = *poise::BoundedLoadRendezvous::Create(kBenchFactor);
  const Counters counters(c.loads);
  const uint64_t total = c.LoadSum();
  const auto table = std::make_shared<const poise::IdentityTable>(c.candidates);
  const poise::PreparedCandidates route(c.candidates, table);

  poise::DecisionScratch scratch;
  const auto routed = [&](const std::string& key) {
    benchmark::DoNotOptimize(route.RouteWithTotal(
        policy, key, total, counters.view.data(), scratch));
  };
  // The walk reading only the loads it visits (the core's), or, with
  // `read_all`, every load at once as soon as the owner is full.
  struct CounterView {
    const std::vector<const poise::InFlightCounter*>& counters;
    bool read_all;
    std::vector<uint64_t>& loads;
    size_t reads = 0;
    uint64_t Load(size_t i) {
      if (!read_all) return counters[i]->Load();
      if (++reads == 2) {
        for (size_t j = 0; j < counters.size(); ++j) {
          loads[j] = counters[j]->Load();
        }
      }
      return reads >= 2 ? loads[i] : counters[i]->Load();
    }
    static bool Admits(size_t /*i*/) { return true; }
  };
  const uint64_t weight = poise::internal::EligibleWeightOf(route.list());
  std::vector<uint64_t> loads(n);
  const auto walked = [&](bool read_all) {
    return [&, read_all](const std::string& key) {
      poise::Result<poise::internal::KeyOrder> order =
          poise::internal::KeyOrder::Hashed(route.list(), key, scratch);
      CounterView view{counters.view, read_all, loads};
      benchmark::DoNotOptimize(poise::internal::WalkToNthWithRoom(
          order.value(), policy.factor_percent(), total, weight, view, 0,
          scratch));
    };
  };
  const auto ns = PairedRuns<3>(state, {routed, walked(true), walked(false)});
  state.counters["route_ns"] = ns[0];
  state.counters["read_all_ns"] = ns[1];
  state.counters["walk_ns"] = ns[2];
  state.counters["ratio"] = ns[0] / ns[1];
  state.counters["walk_ratio"] = ns[2] / ns[1];
  state.counters["saturated"] = c.saturated_fraction;
}

// Half of `channel`'s n backends (a shuffled half) at or over their bound
// under the channel's factor: each holds `load` calls, the least power of
// two that leaves them no room. Returns the counters raised, to lower them
// when done.
std::vector<poise::InFlightCounter*> FillHalf(
    const poise::bench::RouterChannel& channel, uint32_t factor_percent) {
  const size_t n = channel.backends().size();
  std::vector<size_t> half(n);
  for (size_t i = 0; i < n; ++i) half[i] = i;
  std::shuffle(half.begin(), half.end(), std::mt19937_64(7));
  half.resize(n / 2);
  uint64_t load = 1;
  for (;; load *= 2) {
    const uint64_t total = load * half.size();
    const poise::Bound bound(factor_percent, total, 1, n);
    if (!bound.HasRoom(load)) break;
  }
  std::vector<poise::InFlightCounter*> raised;
  for (size_t i : half) {
    poise::InFlightCounter* counter = channel.backends()[i].cell->in_flight;
    for (uint64_t k = 0; k < load; ++k) {
      counter->TryAcquireWithin(poise::InFlightCounter::kNoLimit);
      raised.push_back(counter);
    }
  }
  return raised;
}

// The pick engine's costs through router::Picker, what the gRPC picker
// runs, paired on one weight over n backends: weighted_rendezvous's pick;
// bounded_load_rendezvous's first attempt and a retry's second choice
// (NEXT_CHOICE, one previous attempt), idle and with half the backends at
// their bound; the ring. The channels list the same identities, so they
// share one table (a second table in the same rotation would evict this
// one's rows between blocks at n = 1000). `fenced`: each pick's latency
// (PairedRuns).
void PairedPicker(benchmark::State& state, bool fenced) {
  const auto n = static_cast<size_t>(state.range(0));
  const auto one = [](size_t) { return 1; };
  poise::router::Config bounded;
  bounded.bounded = true;
  const poise::bench::RouterChannel weighted_channel(poise::router::Config{}, n,
                                                     one);
  const poise::bench::RouterChannel idle_channel(bounded, n, one);
  const poise::bench::RouterChannel half_channel(bounded, n, one);
  const std::vector<poise::InFlightCounter*> raised =
      FillHalf(half_channel, bounded.balance_factor_percent);
  std::vector<poise::Candidate> candidates;
  for (const auto& b : weighted_channel.backends()) {
    candidates.push_back({b.identity, 1});
  }
  const Ring ring = BuildRing(candidates);
  const auto pick = [](const poise::router::Picker& picker, uint32_t previous) {
    return [&picker, previous](const std::string& key) {
      benchmark::DoNotOptimize(
          picker.Pick(poise::router::PickRequest{key, previous}));
    };
  };
  // The floor of any bounded pick that counts calls in flight: the weighted
  // pick plus the atomics of a slot (its counter's compare-exchange under a
  // bound, the scope total's increment, and both undone at the call's end),
  // on counters of their own.
  poise::InFlightCounter scope_total;
  poise::InFlightCounter slot_counter(poise::InFlightCounter::kNoLimit,
                                      &scope_total);
  const auto weighted_pick = pick(weighted_channel.picker(), 0);
  const auto ns = PairedRuns<7>(
      state,
      {weighted_pick, pick(idle_channel.picker(), 0),
       pick(idle_channel.picker(), 1), pick(half_channel.picker(), 0),
       pick(half_channel.picker(), 1),
       [&](const std::string& key) {
         benchmark::DoNotOptimize(RingPick(ring, key));
       },
       [&](const std::string& key) {
         weighted_pick(key);
         if (slot_counter.TryAcquireIf(
                 [](uint64_t count) { return count < UINT64_MAX; })) {
           slot_counter.Release();
         }
       }},
      fenced);
  for (poise::InFlightCounter* counter : raised) counter->Release();
  state.counters["weighted_ns"] = ns[0];
  state.counters["first_ns"] = ns[1];
  state.counters["retry_ns"] = ns[2];
  state.counters["half_first_ns"] = ns[3];
  state.counters["half_retry_ns"] = ns[4];
  state.counters["ring_ns"] = ns[5];
  state.counters["slot_floor_ns"] = ns[6];
  state.counters["half_over_unbounded"] = ns[3] / ns[0];
  state.counters["slot_floor_over_unbounded"] = ns[6] / ns[0];
  state.counters["retry_over_first"] = ns[2] / ns[1];
  state.counters["half_retry_over_first"] = ns[4] / ns[3];
  state.counters["weighted_over_ring"] = ns[0] / ns[5];
}

void BM_PairedPicker(benchmark::State& state) { PairedPicker(state, false); }
void BM_PairedPickerFenced(benchmark::State& state) {
  PairedPicker(state, true);
}

// The public API over an IdentityTable, paired on one weight with half the
// backends at their bound under kBenchFactor: WeightedRendezvous::Pick,
// Decide and DecideNth(..., 1, ...).
void BM_PairedApi(benchmark::State& state) {
  const auto n = static_cast<size_t>(state.range(0));
  const Cluster c = MakeCluster(n, 0.5, /*one_weight=*/true);
  const poise::IdentityTable table(c.candidates);
  const auto policy = *poise::BoundedLoadRendezvous::Create(kBenchFactor);
  const auto load = [&c](size_t i) { return c.loads[i]; };
  poise::DecisionScratch scratch;
  const auto ns = PairedRuns<3>(
      state, {[&](const std::string& key) {
                benchmark::DoNotOptimize(
                    poise::WeightedRendezvous::Pick(key, c.candidates, table));
              },
              [&](const std::string& key) {
                benchmark::DoNotOptimize(
                    policy.Decide(key, c.candidates, table, load, scratch));
              },
              [&](const std::string& key) {
                benchmark::DoNotOptimize(policy.DecideNth(
                    key, c.candidates, table, load, 1, scratch));
              }});
  state.counters["api_pick_ns"] = ns[0];
  state.counters["api_decide_ns"] = ns[1];
  state.counters["api_nth_ns"] = ns[2];
  state.counters["api_decide_over_pick"] = ns[1] / ns[0];
  state.counters["api_nth_over_pick"] = ns[2] / ns[0];
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
  state.counters["table_bytes"] =
      static_cast<double>(poise::IdentityTable(c.candidates).memory_bytes());
}

// The same full build on the portable target.
void BM_TableBuildPortableKernel(benchmark::State& state) {
  WithPortableKernel([&] { BM_TableBuild(state); });
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
void BM_TableUpdatePortableKernel(benchmark::State& state) {
  WithPortableKernel([&] { TableUpdateBench(state); });
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
BENCHMARK(BM_PreparedPickPortableKernel)->Apply(Sizes);
BENCHMARK(BM_PreparedPickTwoWeights)->Apply(Sizes);
BENCHMARK(BM_PreparedRouteWithTotal)
    ->ArgsProduct({{3, 10, 100, 1000}, {0, 50, 90}});
BENCHMARK(BM_PreparedRouteWithTotalTwoWeights)
    ->ArgsProduct({{3, 10, 100, 1000}, {0, 50, 90}});
BENCHMARK(BM_PairedRatio)->ArgsProduct({{3, 10, 100, 1000}, {50}});
BENCHMARK(BM_PairedRatioTwoWeights)->ArgsProduct({{3, 10, 100, 1000}, {50}});
BENCHMARK(BM_PairedPicks)->Apply(Sizes);
BENCHMARK(BM_PairedPicker)->Apply(Sizes);
BENCHMARK(BM_PairedPickerFenced)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_PairedApi)->Apply(Sizes);
BENCHMARK(BM_PairedSaturated)
    ->ArgsProduct({{3, 10, 100, 1000}, {50, 90}, {1, 2}});
BENCHMARK(BM_Ring)->Apply(Sizes);
BENCHMARK(BM_ArgmaxFloor)->Apply(Sizes);
BENCHMARK(BM_SnapshotBuild)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_TableBuild)->Arg(3)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_TableBuildPortableKernel)->Arg(1000);
BENCHMARK(BM_TableUpdate)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_TableUpdatePortableKernel)->Arg(1000);
BENCHMARK(BM_RingBuild)->Arg(10)->Arg(100)->Arg(1000);
BENCHMARK(BM_InFlightSame)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_InFlightSeparate)->Threads(1)->Threads(2)->UseRealTime();

// The host's CPU as /proc/cpuinfo names it, with its family and whether it
// has AVX-512 ("?" where there is no such file).
std::string CpuName() {
  std::FILE* f = std::fopen("/proc/cpuinfo", "r");
  if (f == nullptr) return "?";
  std::string model = "?", family = "?";
  bool avx512 = false;
  char line[4096];
  while (std::fgets(line, sizeof line, f) != nullptr) {
    const std::string_view l(line);
    const size_t colon = l.find(':');
    if (colon == std::string_view::npos) continue;
    std::string value(l.substr(colon + 1));
    value.erase(0, value.find_first_not_of(' '));
    value.erase(value.find_last_not_of(" \n") + 1);
    if (model == "?" && l.rfind("model name", 0) == 0) model = value;
    if (family == "?" && l.rfind("cpu family", 0) == 0) family = value;
    if (l.rfind("flags", 0) == 0) {
      avx512 |= value.find("avx512f") != std::string::npos;
    }
  }
  std::fclose(f);
  return model + ", cpu family " + family +
         (avx512 ? ", avx512f" : ", no avx512f");
}

// POISE_BENCH_TARGET=<name> (AVX2, AVX3, SSE4, NEON, ...: hwy's target
// names) runs the kernels on that target, e.g. AVX2 on an AVX-512 host;
// unset, on the best one the CPU has. The target run is in the output's
// context (hwy_target).
bool ChooseTarget() {
  const char* const wanted = std::getenv("POISE_BENCH_TARGET");
  if (wanted != nullptr && *wanted != '\0') {
    int64_t target = 0;
    for (const int64_t t : poise::internal::CompiledHashTargets()) {
      if (std::string_view(poise::internal::HashTargetName(t)) == wanted) {
        target = t;
      }
    }
    if (target == 0 || !poise::internal::ForceHashTarget(target)) {
      std::fprintf(stderr,
                   "POISE_BENCH_TARGET=%s: not a compiled target this CPU "
                   "runs; compiled:",
                   wanted);
      for (const int64_t t : poise::internal::CompiledHashTargets()) {
        std::fprintf(stderr, " %s", poise::internal::HashTargetName(t));
      }
      std::fprintf(stderr, "\n");
      return false;
    }
  }
  benchmark::AddCustomContext("poise_cpu", CpuName());
  benchmark::AddCustomContext(
      "hwy_target",
      poise::internal::HashTargetName(poise::internal::ActiveHashTarget()));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (!ChooseTarget()) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
