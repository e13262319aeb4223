// The key cache (src/router/key_cache.h) on its own - a hit is the key's own
// prefix, admission on a second miss, CLOCK eviction, the adaptive lookups,
// sharing by identity table and weights, concurrent readers and writers -
// and the picker with it: on random workloads (address updates, weight
// ramps, saturated backends, pending and failed owners, hard limits,
// retries, serverLoad) every pick with the cache equals the pick without it
// and the contract's answer.
#include "src/router/key_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "poise/rendezvous.h"
#include "src/core/contract.h"
#include "src/router/picker.h"
#include "test/router/router_test_util.h"

namespace poise::router {
namespace {

using test::AddressOf;
using test::Entry;
using test::ValidConfig;

// A prefix that names its key: index j is a function of the key's number.
KeyOrderPrefix PrefixOf(uint32_t key_number, size_t size = 8) {
  KeyOrderPrefix p;
  for (size_t j = 0; j < size; ++j) {
    p.index[j] =
        static_cast<uint16_t>((size_t{key_number} * 31 + j * 7) % 65536);
  }
  p.size = size;
  return p;
}
bool Equal(const KeyOrderPrefix& a, const KeyOrderPrefix& b) {
  return a.size == b.size && std::equal(a.index, a.index + a.size, b.index);
}
std::string KeyNumbered(uint32_t k) { return "session-" + std::to_string(k); }

// Finds `key` until the cache admits it (on its second miss) and inserts
// `prefix`. A fresh thread's lookups are never bypassed: its first window is
// not over.
void Store(KeyOrderCache& cache, std::string_view key,
           const KeyOrderPrefix& prefix) {
  KeyOrderPrefix found;
  ASSERT_EQ(cache.Find(key, &found), KeyOrderCache::Lookup::kMiss);
  ASSERT_EQ(cache.Find(key, &found), KeyOrderCache::Lookup::kAdmit);
  cache.Insert(key, prefix);
}

// ---------------------------------------------------------------------------
// The cache

TEST(KeyOrderCache, FindsTheKeysPrefixAndOnlyForItsBytes) {
  std::thread([] {
    KeyOrderCache cache(1024);
    EXPECT_EQ(cache.entries(), 1024u);
    EXPECT_GE(cache.memory_bytes(), 1024 * KeyOrderCache::kBytesPerEntry);
    Store(cache, "alice", PrefixOf(1, 3));
    KeyOrderPrefix found;
    ASSERT_EQ(cache.Find("alice", &found), KeyOrderCache::Lookup::kHit);
    EXPECT_TRUE(Equal(found, PrefixOf(1, 3)));
    // Every byte is compared: a prefix, an extension or one byte off miss.
    for (const char* other : {"alic", "alicee", "alicf", "Alice"}) {
      EXPECT_NE(cache.Find(other, &found), KeyOrderCache::Lookup::kHit)
          << other;
    }
    // The empty key and a key of kMaxKeyBytes are cached; longer ones not.
    Store(cache, "", PrefixOf(2));
    ASSERT_EQ(cache.Find("", &found), KeyOrderCache::Lookup::kHit);
    EXPECT_TRUE(Equal(found, PrefixOf(2)));
    const std::string longest(KeyOrderCache::kMaxKeyBytes, 'x');
    Store(cache, longest, PrefixOf(3));
    ASSERT_EQ(cache.Find(longest, &found), KeyOrderCache::Lookup::kHit);
    const std::string too_long = longest + "x";
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(cache.Find(too_long, &found), KeyOrderCache::Lookup::kMiss);
    }
    cache.Insert(too_long, PrefixOf(4));
    EXPECT_EQ(cache.Find(too_long, &found), KeyOrderCache::Lookup::kMiss);
    // A new prefix for a key replaces nothing else and is found.
    cache.Insert("alice", PrefixOf(5, 8));
    ASSERT_EQ(cache.Find("alice", &found), KeyOrderCache::Lookup::kHit);
    EXPECT_TRUE(Equal(found, PrefixOf(5, 8)));
  }).join();
}

// Far more keys than entries, about 190 of them to a set, and 15-bit tags:
// some keys meet another's entry under their own tag; a hit still returns
// the key's own prefix, compared byte for byte.
TEST(KeyOrderCache, AHitIsTheKeysOwnPrefix) {
  std::thread([] {
    KeyOrderCache cache(64);
    size_t hits = 0;
    std::mt19937_64 rng(5);
    for (int step = 0; step < 200000; ++step) {
      // A few hot keys (the thread keeps looking up) among many cold ones.
      const auto k =
          static_cast<uint32_t>(rng() % 2 == 0 ? rng() % 20 : rng() % 3000);
      KeyOrderPrefix found;
      switch (cache.Find(KeyNumbered(k), &found)) {
        case KeyOrderCache::Lookup::kHit:
          ASSERT_TRUE(Equal(found, PrefixOf(k, 1 + k % 8))) << k;
          ++hits;
          break;
        case KeyOrderCache::Lookup::kAdmit:
          cache.Insert(KeyNumbered(k), PrefixOf(k, 1 + k % 8));
          break;
        case KeyOrderCache::Lookup::kMiss:
          break;
      }
    }
    EXPECT_GT(hits, 0u);
  }).join();
}

// A key is admitted on its second miss while one of its doorkeeper places
// holds it, not on its first, nor after other keys' misses took both.
TEST(KeyOrderCache, AdmitsAKeyMissedTwice) {
  std::thread([] {
    KeyOrderCache cache(KeyOrderCache::kWays);  // one set, two door places
    for (uint32_t k = 0; k < KeyOrderCache::kWays; ++k) {
      Store(cache, KeyNumbered(k), PrefixOf(k));
    }
    KeyOrderPrefix found;
    EXPECT_EQ(cache.Find("carol", &found), KeyOrderCache::Lookup::kMiss);
    EXPECT_EQ(cache.Find("carol", &found), KeyOrderCache::Lookup::kAdmit);
    // Forty other keys missed at the two places: erin's are taken (but with
    // probability about 2^-39).
    EXPECT_EQ(cache.Find("erin", &found), KeyOrderCache::Lookup::kMiss);
    for (uint32_t k = 100; k < 140; ++k) {
      ASSERT_EQ(cache.Find(KeyNumbered(k), &found),
                KeyOrderCache::Lookup::kMiss);
    }
    EXPECT_EQ(cache.Find("erin", &found), KeyOrderCache::Lookup::kMiss);
  }).join();
}

// One set of four: the entries hit since the last sweep stay, the other
// goes; with every entry hit, an insert sweeps (clears every reference) and
// the next insert takes an entry not hit since.
TEST(KeyOrderCache, EvictsAnEntryNotHitSinceTheLastSweep) {
  std::thread([] {
    KeyOrderCache cache(KeyOrderCache::kWays);
    for (uint32_t k = 0; k < 4; ++k) {
      Store(cache, KeyNumbered(k), PrefixOf(k));
    }
    KeyOrderPrefix found;
    for (uint32_t k : {0u, 1u, 3u}) {
      ASSERT_EQ(cache.Find(KeyNumbered(k), &found),
                KeyOrderCache::Lookup::kHit);
    }
    Store(cache, KeyNumbered(9), PrefixOf(9));  // replaces 2
    for (uint32_t k : {0u, 1u, 3u, 9u}) {
      EXPECT_EQ(cache.Find(KeyNumbered(k), &found), KeyOrderCache::Lookup::kHit)
          << k;
    }
    EXPECT_NE(cache.Find(KeyNumbered(2), &found), KeyOrderCache::Lookup::kHit);
  }).join();
}

// A thread whose lookups on a full cache neither find nor admit looks up
// one key in kBypassStride, and every key again once a window of lookups
// finds or admits enough.
TEST(KeyOrderCache, AThreadOfDistinctKeysLooksUpFewOfThem) {
  std::thread([] {
    KeyOrderCache cache(KeyOrderCache::kWays);
    for (uint32_t k = 0; k < KeyOrderCache::kWays; ++k) {
      Store(cache, KeyNumbered(k), PrefixOf(k));
    }
    KeyOrderPrefix found;
    // The window of the stores above ends among these.
    for (uint32_t k = 0; k < 2 * KeyOrderCache::kWindow; ++k) {
      ASSERT_EQ(cache.Find(KeyNumbered(1000 + k), &found),
                KeyOrderCache::Lookup::kMiss);
    }
    // Bypassed: a key asked for 4 x kBypassStride times in a row is looked up
    // 4 times (the first misses, the others are admitted).
    constexpr uint32_t kStride = KeyOrderCache::kBypassStride;
    size_t admitted = 0;
    for (uint32_t i = 0; i < 4 * kStride; ++i) {
      admitted +=
          cache.Find("hot", &found) == KeyOrderCache::Lookup::kAdmit ? 1 : 0;
    }
    EXPECT_EQ(admitted, 3u);
    cache.Insert("hot", PrefixOf(7));
    // Its hits end the bypass when the window of (sampled) lookups is over,
    // kWindow - 4 lookups later, one in kStride picks: until then few of its
    // picks find it, every one after.
    const uint32_t bypassed = (KeyOrderCache::kWindow - 4) * kStride;
    size_t hits = 0;
    for (uint32_t i = 0; i + kStride < bypassed; ++i) {
      hits += cache.Find("hot", &found) == KeyOrderCache::Lookup::kHit ? 1 : 0;
    }
    EXPECT_LE(hits, KeyOrderCache::kWindow);
    for (uint32_t i = 0; i < 2 * kStride; ++i) {
      cache.Find("hot", &found);  // the window ends among these
    }
    for (int i = 0; i < 100; ++i) {
      ASSERT_EQ(cache.Find("hot", &found), KeyOrderCache::Lookup::kHit);
    }
  }).join();
}

// Readers and writers on many threads (run under TSan: POISE_SANITIZE=
// thread); a small cache so that they meet on the same slots.
TEST(KeyOrderCache, ConcurrentReadersAndWritersSeeOnlyWholeEntries) {
  KeyOrderCache cache(64);
  std::atomic<size_t> hits{0};
  std::atomic<bool> wrong{false};
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t));
      for (int step = 0; step < 40000; ++step) {
        const auto k = static_cast<uint32_t>(rng() % 200);
        KeyOrderPrefix found;
        switch (cache.Find(KeyNumbered(k), &found)) {
          case KeyOrderCache::Lookup::kHit:
            if (!Equal(found, PrefixOf(k, 1 + k % 8))) wrong = true;
            hits.fetch_add(1, std::memory_order_relaxed);
            break;
          case KeyOrderCache::Lookup::kAdmit:
            cache.Insert(KeyNumbered(k), PrefixOf(k, 1 + k % 8));
            break;
          case KeyOrderCache::Lookup::kMiss:
            // Writers also race on keys they did not look up.
            if (step % 3 == 0) {
              cache.Insert(KeyNumbered(k), PrefixOf(k, 1 + k % 8));
            }
            break;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_FALSE(wrong.load());
  EXPECT_GT(hits.load(), 1000u);
}

TEST(ShareKeyOrderCache, OneCachePerTableWeightsAndSize) {
  const std::vector<std::string> ids = {"a:1", "b:1", "c:1"};
  const auto table = std::make_shared<const IdentityTable>(
      std::vector<std::string_view>(ids.begin(), ids.end()));
  const auto other_table = std::make_shared<const IdentityTable>(
      std::vector<std::string_view>(ids.rbegin(), ids.rend()));
  const size_t before = LiveKeyOrderCaches();
  {
    const auto a = ShareKeyOrderCache(table, {1, 1, 1}, 256);
    const auto b = ShareKeyOrderCache(table, {1, 1, 1}, 256);
    EXPECT_EQ(a, b);
    EXPECT_NE(ShareKeyOrderCache(table, {1, 2, 1}, 256), a);
    EXPECT_NE(ShareKeyOrderCache(table, {1, 1, 1}, 512), a);
    EXPECT_NE(ShareKeyOrderCache(other_table, {1, 1, 1}, 256), a);
    // Those three went with their only holder.
    EXPECT_EQ(LiveKeyOrderCaches(), before + 1);
  }
  EXPECT_EQ(LiveKeyOrderCaches(), before);
}

// ---------------------------------------------------------------------------
// The picker with the cache

const PickOutcome::Complete* Completed(const PickOutcome& outcome) {
  return std::get_if<PickOutcome::Complete>(&outcome.result);
}

// Two pickers over one list (the same cells, counters and states): one
// with a cache, one without. Each request is picked by the first, whose
// call is dropped at once, then by the second, whose call may be held (so
// backends fill up); the answers must be equal.
class CachedPickerTest : public ::testing::Test {
 protected:
  void SetList(const std::vector<uint32_t>& weights, size_t first_address) {
    std::vector<ResolverEntry> entries;
    for (size_t i = 0; i < weights.size(); ++i) {
      entries.push_back(Entry(AddressOf(first_address + i), weights[i]));
    }
    set_.Update(entries, *uncached_config_);
  }
  // The cached picker's cache: `entries`, or as `config` says.
  void SetConfig(Config config, std::optional<uint32_t> entries) {
    ASSERT_TRUE(NormalizeAndValidate(config).empty());
    if (entries.has_value()) {
      config.key_cache.enabled = true;
      config.key_cache.entries = entries;
    }
    cached_config_ = std::make_shared<const Config>(config);
    config.key_cache.enabled = false;
    uncached_config_ = std::make_shared<const Config>(config);
  }
  void BuildPickers(const std::vector<BackendState>& states,
                    const std::vector<uint32_t>& effective = {}) {
    states_ = states;
    cached_ = std::make_unique<Picker>(cached_config_, set_.list(), states_,
                                       stats_, effective);
    uncached_ = std::make_unique<Picker>(uncached_config_, set_.list(), states_,
                                         stats_, effective);
  }

  // The contract's backends: READY ones eligible (every one: `all`), with
  // their in-flight counts.
  std::vector<contract::LoadedCandidate> ContractBackends(
      bool all, const std::vector<uint32_t>& effective) const {
    std::vector<contract::LoadedCandidate> out;
    const std::vector<ListedBackend>& b = set_.backends();
    for (size_t i = 0; i < b.size(); ++i) {
      out.push_back({std::string(b[i].identity),
                     effective.empty() ? b[i].weight : effective[i],
                     b[i].cell->in_flight->Load(),
                     all || states_[i].routing == RoutingState::kReady});
    }
    return out;
  }

  // Checks one request; returns whether the cached pick came from the
  // cache.
  bool Check(const PickRequest& request, const std::vector<uint32_t>& effective,
             std::vector<PickOutcome>& held, bool hold) {
    const Config& config = *cached_config_;
    // The contract's answer for a first attempt, before any pick.
    std::optional<int> want;  // backend; -1: queue; nullopt: not checked
    const bool limited = config.max_in_flight_per_backend.has_value();
    if (request.previous_attempts == 0 && !limited && !config.server_load) {
      const auto all = ContractBackends(true, effective);
      const auto ready = ContractBackends(false, effective);
      bool pending = false;
      for (const BackendState& s : states_) {
        pending |= s.routing == RoutingState::kPending;
      }
      const Result<size_t> owner = contract::Pick(*request.key, all);
      if (pending && owner.ok() &&
          states_[owner.value()].routing == RoutingState::kPending) {
        want = -1;
      } else if (config.bounded) {
        const uint64_t total = set_.load_scope()->total().Load();
        const auto d = contract::DecideWithTotal(
            *request.key, ready, config.balance_factor_percent, total);
        if (d.ok()) want = static_cast<int>(d.value().decision.selection);
      } else {
        const Result<size_t> r = contract::Pick(*request.key, ready);
        if (r.ok()) want = static_cast<int>(r.value());
      }
    }
    bool from_cache = false;
    int cached_backend = -2;
    bool cached_spilled = false;
    {
      const PickOutcome a = cached_->Pick(request);
      if (const auto* c = Completed(a)) {
        cached_backend = static_cast<int>(c->backend);
        cached_spilled = c->spilled;
        from_cache = c->from_cache;
      } else if (std::holds_alternative<PickOutcome::Queue>(a.result)) {
        cached_backend = -1;
      }
    }  // its slot goes back
    PickOutcome b = uncached_->Pick(request);
    int backend = -2;
    if (const auto* c = Completed(b)) {
      backend = static_cast<int>(c->backend);
      EXPECT_FALSE(c->from_cache);
      EXPECT_EQ(cached_spilled, c->spilled) << *request.key;
    } else if (std::holds_alternative<PickOutcome::Queue>(b.result)) {
      backend = -1;
    }
    EXPECT_EQ(cached_backend, backend)
        << *request.key << " attempt " << request.previous_attempts;
    if (want.has_value()) {
      EXPECT_EQ(backend, *want) << *request.key;
    }
    if (hold) held.push_back(std::move(b));
    return from_cache;
  }

  std::shared_ptr<const Config> cached_config_, uncached_config_;
  BackendSet set_;
  std::vector<BackendState> states_;
  std::shared_ptr<PolicyStats> stats_ =
      std::make_shared<PolicyStats>("test", "policy");
  std::unique_ptr<Picker> cached_, uncached_;
};

RoutingState RandomState(std::mt19937_64& rng) {
  const uint64_t r = rng() % 20;
  if (r < 15) return RoutingState::kReady;
  if (r < 17) return RoutingState::kPending;
  return RoutingState::kFailed;
}

TEST_F(CachedPickerTest, EqualsTheUncachedPickAndTheContract) {
  std::mt19937_64 rng(20270115);
  size_t from_cache = 0, picks = 0;
  for (int round = 0; round < 120; ++round) {
    Config config = ValidConfig(/*bounded=*/round % 2 == 1);
    config.balance_factor_percent = 100 + static_cast<uint32_t>(rng() % 60);
    if (round % 5 == 4) config.max_in_flight_per_backend = 1 + rng() % 4;
    if (round % 7 == 3) config.retry_routing = RetryRouting::kSameOwner;
    // Explicit sizes serve lists of any length; small ones evict.
    SetConfig(config, round % 3 == 0 ? 64u : 1024u);
    // One weight, two, or three (not cached: no prefix there).
    const size_t n = 1 + rng() % (round % 4 == 0 ? 200 : 40);
    const uint64_t shape = rng() % 6;
    std::vector<uint32_t> weights(n);
    for (size_t i = 0; i < n; ++i) {
      weights[i] = shape < 3   ? 2u
                   : shape < 5 ? (i % 3 == 0 ? 5u : 2u)
                               : static_cast<uint32_t>(1 + i % 3);
    }
    SetList(weights, 0);
    std::vector<PickOutcome> held;
    // A few pickers per list (connectivity changes, one address update,
    // one weight ramp), the cache shared by them.
    for (int generation = 0; generation < 4; ++generation) {
      if (generation == 2) {
        // An address update: one backend replaced by a new one.
        SetList(weights, rng() % 2);
        held.clear();
      }
      std::vector<BackendState> states(set_.backends().size());
      const bool all_ready = generation % 2 == 0;
      for (BackendState& s : states) {
        s.routing = all_ready ? RoutingState::kReady : RandomState(rng);
      }
      std::vector<uint32_t> effective;
      if (generation == 3 && rng() % 2 == 0) {
        // Slow start: every weight as listed (the cache serves) or one
        // ramping (it does not).
        for (const ListedBackend& b : set_.backends()) {
          effective.push_back(b.weight);
        }
        if (rng() % 2 == 0) effective[rng() % effective.size()] = 1;
      }
      BuildPickers(states, effective);
      for (int k = 0; k < 300; ++k) {
        PickRequest request;
        const std::string key = rng() % 4 == 0
                                    ? "fresh-" + std::to_string(rng())
                                    : "user-" + std::to_string(rng() % 40);
        request.key = key;
        if (rng() % 6 == 0) {
          request.previous_attempts = static_cast<uint32_t>(1 + rng() % 12);
        }
        const bool hit = Check(request, effective, held, rng() % 3 != 0);
        from_cache += hit ? 1 : 0;
        ++picks;
        // Calls end now and then: owners fill up and drain.
        if (held.size() > 2 * n + 4 || rng() % 9 == 0) {
          held.erase(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(
                                                      held.size() / 2));
        }
        if (HasFailure()) return;
      }
    }
  }
  EXPECT_GT(from_cache, picks / 4);
}

// Where the prefix ends before the answer - its READY backends all full, or
// none READY - the pick searches the whole order.
TEST_F(CachedPickerTest, APrefixWithoutTheAnswerFallsBackToTheWholeOrder) {
  for (const bool bounded : {false, true}) {
    Config config = ValidConfig(bounded);
    config.balance_factor_percent = 100;
    SetConfig(config, 64u);
    const size_t n = 12;
    SetList(std::vector<uint32_t>(n, 1), 0);
    const std::string key = bounded ? "spilling" : "failing-over";
    // Cached while every backend is READY.
    BuildPickers(test::States(n, RoutingState::kReady));
    std::vector<PickOutcome> held;
    for (int i = 0; i < 3; ++i) Check(PickRequest{key}, {}, held, false);
    ASSERT_TRUE(Check(PickRequest{key}, {}, held, false));
    std::vector<contract::LoadedCandidate> all(n);
    for (size_t i = 0; i < n; ++i) {
      all[i] = {std::string(set_.backends()[i].identity), 1, 0, true};
    }
    const std::vector<contract::Ranked> order = contract::Order(key, all);
    std::vector<BackendState> states = test::States(n, RoutingState::kReady);
    if (bounded) {
      // The first eight in the key's order at 5 calls: L = 40, every bound
      // ceil(41 / 12) = 4.
      for (size_t j = 0; j < KeyOrderPrefix::kCapacity; ++j) {
        for (int c = 0; c < 5; ++c) {
          ASSERT_TRUE(
              set_.backends()[order[j].index].cell->in_flight->TryAcquire());
        }
      }
    } else {
      for (size_t j = 0; j < KeyOrderPrefix::kCapacity; ++j) {
        states[order[j].index].routing = RoutingState::kFailed;
      }
    }
    BuildPickers(states);
    const PickOutcome outcome = cached_->Pick(PickRequest{key});
    ASSERT_NE(Completed(outcome), nullptr);
    EXPECT_EQ(Completed(outcome)->backend, order[8].index);
    EXPECT_FALSE(Completed(outcome)->from_cache);
    EXPECT_EQ(Completed(outcome)->spilled, bounded);
    EXPECT_FALSE(Check(PickRequest{key}, {}, held, false));
    if (bounded) {
      for (size_t j = 0; j < KeyOrderPrefix::kCapacity; ++j) {
        for (int c = 0; c < 5; ++c) {
          set_.backends()[order[j].index].cell->in_flight->Release();
        }
      }
    }
  }
}

// serverLoad: the picks along the prefix read each backend's fleet load once
// (an ask each), as without it. Reports here leave the herding rule nothing
// to draw (no report, or a backend full by its report), so both pickers
// decide alike.
TEST_F(CachedPickerTest, ServerLoadEqualsTheUncachedPick) {
  static int64_t now_ns = 1'000'000'000;
  SetFleetClockForTesting([] { return now_ns; });
  std::mt19937_64 rng(11);
  size_t from_cache = 0;
  for (int round = 0; round < 20; ++round) {
    Config config = ValidConfig(/*bounded=*/true);
    config.balance_factor_percent = 110;
    config.server_load = ServerLoadConfig();
    SetConfig(config, 512u);
    const size_t n = 8 + rng() % 80;
    // New identities each round: new cells, without earlier reports.
    SetList(std::vector<uint32_t>(n, 1), static_cast<size_t>(round) * 100);
    BuildPickers(test::States(n, RoutingState::kReady));
    // About a third of the backends full by their own reports: L is about
    // 333 n, every bound about 367, a reported load about 1000.
    std::vector<bool> reports(n);
    for (size_t i = 0; i < n; ++i) reports[i] = rng() % 3 == 0;
    std::vector<PickOutcome> held;
    for (int k = 0; k < 400; ++k) {
      if (k % 50 == 0) {
        for (size_t i = 0; i < n; ++i) {
          BackendCell& cell = *set_.backends()[i].cell;
          if (reports[i]) {
            cell.fleet().report.Store(1000, cell.in_flight->Load(), now_ns);
          }
        }
      }
      now_ns += 1000;
      PickRequest request;
      const std::string key = "user-" + std::to_string(rng() % 30);
      request.key = key;
      from_cache += Check(request, {}, held, rng() % 2 == 0) ? 1 : 0;
      if (held.size() > n) held.erase(held.begin(), held.begin() + 5);
      if (HasFailure()) break;
    }
  }
  SetFleetClockForTesting(nullptr);
  EXPECT_GT(from_cache, 1000u);
}

// Two channels to the same backends share one cache (the same identity
// table and weights) and pick on four threads at once (run under TSan): every
// pick is the key's owner.
TEST(CachedPickers, ChannelsSharingACachePickAtOnce) {
  Config config = ValidConfig();
  config.key_cache.enabled = true;
  config.key_cache.entries = 64;  // small: inserts race with lookups
  ASSERT_TRUE(NormalizeAndValidate(config).empty());
  const auto shared_config = std::make_shared<const Config>(config);
  const size_t n = 50;
  std::vector<ResolverEntry> entries;
  for (size_t i = 0; i < n; ++i) entries.push_back(Entry(AddressOf(i)));
  BackendSet first, second;
  first.Update(entries, *shared_config);
  second.Update(entries, *shared_config);
  ASSERT_EQ(first.table(), second.table());
  const auto stats = std::make_shared<PolicyStats>("test", "policy");
  const std::vector<BackendState> states =
      test::States(n, RoutingState::kReady);
  const Picker a(shared_config, first.list(), states, stats);
  const Picker b(shared_config, second.list(), states, stats);
  std::vector<std::string> keys;
  std::vector<size_t> owners;
  const std::vector<Candidate> candidates =
      test::CandidatesOf(first.backends());
  for (int k = 0; k < 200; ++k) {
    keys.push_back("user-" + std::to_string(k));
    owners.push_back(WeightedRendezvous::Pick(keys.back(), candidates).value());
  }
  std::atomic<size_t> wrong{0}, from_cache{0};
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t));
      const Picker& picker = t % 2 == 0 ? a : b;
      for (int step = 0; step < 20000; ++step) {
        const size_t k = rng() % 20 == 0 ? rng() % keys.size() : rng() % 10;
        const PickOutcome o = picker.Pick(PickRequest{keys[k]});
        const auto* c = Completed(o);
        if (c == nullptr || c->backend != owners[k]) wrong.fetch_add(1);
        if (c != nullptr && c->from_cache) from_cache.fetch_add(1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0u);
  EXPECT_GT(from_cache.load(), 40000u);
}

// "keyCache": true serves long lists only, not while weights ramp, not lists
// of three weights; no keyCache (the default) and "keyCache": false serve
// none.
TEST_F(CachedPickerTest, WhichPickersUseACache) {
  const auto from_cache_of = [this](const std::vector<uint32_t>& effective) {
    BuildPickers(test::States(set_.backends().size(), RoutingState::kReady),
                 effective);
    size_t hits = 0;
    for (int k = 0; k < 30; ++k) {
      const PickOutcome o =
          cached_->Pick(PickRequest{"key-" + std::to_string(k % 3)});
      hits += Completed(o) != nullptr && Completed(o)->from_cache ? 1 : 0;
    }
    return hits;
  };
  SetConfig(ValidConfig(), std::nullopt);
  SetList(std::vector<uint32_t>(100, 1), 0);
  EXPECT_EQ(from_cache_of({}), 0u);
  Config on = ValidConfig();
  on.key_cache.enabled = true;
  SetConfig(on, std::nullopt);
  SetList(std::vector<uint32_t>(KeyCacheConfig::kDefaultMinBackends - 1, 1), 0);
  EXPECT_EQ(from_cache_of({}), 0u);
  SetList(std::vector<uint32_t>(KeyCacheConfig::kDefaultMinBackends, 1), 0);
  EXPECT_GT(from_cache_of({}), 20u);
  std::vector<uint32_t> ramp(KeyCacheConfig::kDefaultMinBackends, 1);
  EXPECT_GT(from_cache_of(ramp), 20u);  // weights as listed
  ramp[3] = 2;
  EXPECT_EQ(from_cache_of(ramp), 0u);
  std::vector<uint32_t> three(KeyCacheConfig::kDefaultMinBackends, 1);
  three[1] = 2;
  three[2] = 3;
  SetList(three, 0);
  EXPECT_EQ(from_cache_of({}), 0u);
  Config off = ValidConfig();
  off.key_cache.enabled = false;
  SetConfig(off, std::nullopt);
  SetList(std::vector<uint32_t>(100, 1), 0);
  EXPECT_EQ(from_cache_of({}), 0u);
}

}  // namespace
}  // namespace poise::router
