// The registry of weak pointers by key (src/core/weak_registry.h): one live
// object per key, none kept alive by the registry, expired entries swept so
// that the map stays under its bound, also while threads make and drop
// objects at once (run under ASan and TSan by tools/test.sh).
#include "src/core/weak_registry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace poise::internal {
namespace {

struct Made {
  explicit Made(int v) : value(v) {}
  int value;
};

TEST(WeakRegistry, OneObjectPerKeyWhileHeldAndANewOneAfter) {
  WeakRegistry<std::string, Made> registry;
  int makes = 0;
  auto make = [&] { return std::make_shared<Made>(++makes); };
  std::shared_ptr<Made> a = registry.FindOrMake("a", make);
  std::shared_ptr<Made> again = registry.FindOrMake("a", make);
  EXPECT_EQ(a, again);
  EXPECT_EQ(makes, 1);
  std::shared_ptr<Made> b = registry.FindOrMake("b", make);
  EXPECT_NE(a, b);
  EXPECT_EQ(registry.live(), 2u);

  const std::weak_ptr<Made> watch = a;
  a.reset();
  again.reset();
  EXPECT_TRUE(watch.expired()) << "the registry keeps no object alive";
  EXPECT_EQ(registry.Find("a"), nullptr);
  EXPECT_EQ(registry.live(), 1u);
  EXPECT_EQ(registry.FindOrMake("a", make)->value, 3);
}

TEST(WeakRegistry, PutReplacesAndTakeUnlists) {
  WeakRegistry<std::string, Made> registry;
  auto first = std::make_shared<Made>(1);
  auto second = std::make_shared<Made>(2);
  registry.Put("k", first);
  EXPECT_EQ(registry.Find("k"), first);
  registry.Put("k", second);
  EXPECT_EQ(registry.Find("k"), second);
  EXPECT_EQ(registry.size(), 1u);

  EXPECT_EQ(registry.Take("k"), second);
  EXPECT_EQ(registry.size(), 0u);
  EXPECT_EQ(registry.Take("k"), nullptr);
  registry.Put("gone", std::make_shared<Made>(3));  // dies at once
  EXPECT_EQ(registry.Take("gone"), nullptr);
  EXPECT_EQ(registry.size(), 0u);
}

TEST(WeakRegistry, AMakeThatThrowsListsNothing) {
  WeakRegistry<std::string, Made> registry;
  EXPECT_THROW(registry.FindOrMake("k",
                                   []() -> std::shared_ptr<Made> {
                                     throw std::runtime_error("no");
                                   }),
               std::runtime_error);
  EXPECT_EQ(registry.size(), 0u);
  EXPECT_EQ(
      registry.FindOrMake("k", [] { return std::make_shared<Made>(7); })->value,
      7);
}

TEST(WeakRegistry, ExpiredEntriesAreSweptWhenTheMapDoubles) {
  using Registry = WeakRegistry<int, Made>;
  Registry registry;
  std::vector<std::shared_ptr<Made>> held;
  // Every other object held: the live entries grow by one per two inserts.
  for (int key = 0; key < 1000; ++key) {
    auto made =
        registry.FindOrMake(key, [&] { return std::make_shared<Made>(key); });
    if (key % 2 == 0) held.push_back(made);
    // The last sweep counted at most the held ones and the one just made.
    const size_t live_at_sweep = held.size() + 1;
    EXPECT_LT(registry.size(),
              std::max(Registry::kFirstSweepAt, 2 * live_at_sweep))
        << key;
  }
  EXPECT_EQ(registry.live(), held.size());
  EXPECT_GT(registry.size(), held.size()) << "dead ones wait for a sweep";

  // A key made again after its object died keeps its one entry.
  held.clear();
  const size_t entries = registry.size();
  int makes = 0;
  for (int round = 0; round < 100; ++round) {
    registry.FindOrMake(0, [&] {
      ++makes;
      return std::make_shared<Made>(round);
    });
  }
  EXPECT_EQ(makes, 100);
  EXPECT_EQ(registry.size(), entries);
  EXPECT_EQ(registry.live(), 0u);
}

// Threads making, sharing and dropping objects of overlapping keys at once:
// each key has one live object at a time, the map stays under the bound of
// the most objects alive at once, and nothing is listed live at the end.
TEST(WeakRegistryLocked, ThreadsMakingAndDroppingAtOnceAgreeAndStayBounded) {
  using Registry = WeakRegistryLocked<int, Made>;
  Registry registry;
  constexpr size_t kThreads = 4;
  constexpr size_t kHeldPerThread = 8;
  constexpr int kKeys = 200;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  std::vector<int> disagreements(kThreads, 0);
  std::vector<size_t> largest(kThreads, 0);
  for (size_t t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, me = t] {
      std::mt19937_64 rng(500 + me);
      std::vector<std::shared_ptr<Made>> held(kHeldPerThread);
      for (int round = 0; round < 4000; ++round) {
        const int key = static_cast<int>(rng() % kKeys);
        std::shared_ptr<Made> made = registry.FindOrMake(
            key, [&] { return std::make_shared<Made>(key); });
        if (made->value != key) ++disagreements[me];
        // Another thread's object of the same key, if it holds one, is
        // this one.
        std::shared_ptr<Made> again =
            registry.FindOrMake(key, [] { return std::make_shared<Made>(-1); });
        if (again != made) ++disagreements[me];
        held[rng() % kHeldPerThread] = std::move(made);
        largest[me] = std::max(largest[me], registry.size());
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (size_t t = 0; t < disagreements.size(); ++t) {
    EXPECT_EQ(disagreements[t], 0) << t;
    // At most kThreads x kHeldPerThread objects live at once (plus each
    // thread's one in hand).
    EXPECT_LT(largest[t], std::max(Registry::kFirstSweepAt,
                                   2 * kThreads * (kHeldPerThread + 1)))
        << t;
  }
  EXPECT_EQ(registry.live(), 0u);
}

}  // namespace
}  // namespace poise::internal
