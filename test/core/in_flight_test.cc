#include "poise/in_flight.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

namespace poise {
namespace {

TEST(InFlight, GuardReleasesExactlyOnce) {
  auto counter = std::make_shared<InFlightCounter>();
  {
    InFlightGuard a = InFlightGuard::TryAcquire(counter);
    EXPECT_TRUE(a.held());
    EXPECT_EQ(counter->Load(), 1u);
    InFlightGuard b = std::move(a);  // moved-from guard owns nothing
    // Reads the moved-from guard on purpose.
    // NOLINTNEXTLINE(bugprone-use-after-move,clang-analyzer-cplusplus.Move)
    EXPECT_FALSE(a.held());
    EXPECT_EQ(counter->Load(), 1u);
    b.Release();
    b.Release();
    EXPECT_EQ(counter->Load(), 0u);
    InFlightGuard c = InFlightGuard::TryAcquire(counter);
    c = InFlightGuard::TryAcquire(counter);  // releases the old slot
    EXPECT_EQ(counter->Load(), 1u);
  }
  EXPECT_EQ(counter->Load(), 0u);
}

TEST(InFlight, GuardOutlivesItsOwnersReference) {
  auto counter = std::make_shared<InFlightCounter>();
  InFlightGuard guard = InFlightGuard::TryAcquire(counter);
  std::weak_ptr<InFlightCounter> weak = counter;
  counter.reset();  // the backend left the list
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(weak.lock()->Load(), 1u);
  guard.Release();
  EXPECT_TRUE(weak.expired());
}

TEST(InFlight, LimitRefusesWithoutChangingTheCount) {
  auto counter = std::make_shared<InFlightCounter>(2);
  InFlightGuard a = InFlightGuard::TryAcquire(counter);
  InFlightGuard b = InFlightGuard::TryAcquire(counter);
  EXPECT_TRUE(counter->AtLimit());
  InFlightGuard c = InFlightGuard::TryAcquire(counter);
  EXPECT_FALSE(c.held());
  EXPECT_EQ(counter->Load(), 2u);
  a.Release();
  EXPECT_TRUE(InFlightGuard::TryAcquire(counter).held());
  EXPECT_EQ(counter->Load(), 1u);
}

TEST(InFlight, LimitHoldsUnderConcurrentThreads) {
  constexpr uint64_t kLimit = 3;
  auto counter = std::make_shared<InFlightCounter>(kLimit);
  std::atomic<uint64_t> peak{0};
  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        InFlightGuard g = InFlightGuard::TryAcquire(counter);
        if (!g.held()) {
          refused.fetch_add(1, std::memory_order_relaxed);
          continue;
        }
        const uint64_t now = counter->Load();
        uint64_t seen = peak.load();
        while (now > seen && !peak.compare_exchange_weak(seen, now)) {
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(peak.load(), kLimit);
  EXPECT_LE(counter->Peak(), kLimit);
  EXPECT_GE(counter->Peak(), peak.load());
  EXPECT_EQ(counter->Load(), 0u);
}

TEST(InFlight, CountersCountIntoTheirTotal) {
  InFlightCounter total;
  InFlightCounter a(InFlightCounter::kNoLimit, &total);
  InFlightCounter b(1, &total);
  ASSERT_TRUE(a.TryAcquire());
  ASSERT_TRUE(a.TryAcquire());
  ASSERT_TRUE(b.TryAcquire());
  EXPECT_FALSE(b.TryAcquire());  // refused at the limit: the total unchanged
  EXPECT_EQ(total.Load(), 3u);
  a.Release();
  EXPECT_EQ(total.Load(), 2u);
  b.Release();
  a.Release();
  EXPECT_EQ(total.Load(), 0u);
  EXPECT_EQ(total.Peak(), 3u);
}

TEST(InFlight, TotalMatchesItsCountersUnderConcurrency) {
  InFlightCounter total;
  std::vector<std::unique_ptr<InFlightCounter>> counters;
  counters.reserve(4);
  for (int i = 0; i < 4; ++i) {
    counters.push_back(std::make_unique<InFlightCounter>(2, &total));
  }
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t]() {
      for (int k = 0; k < 20000; ++k) {
        InFlightCounter& c = *counters[static_cast<size_t>((t + k) % 4)];
        if (c.TryAcquire()) {
          EXPECT_LE(total.Load(), 8u);  // never above the counters' limits
          c.Release();
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(total.Load(), 0u);
  for (const auto& c : counters) EXPECT_EQ(c->Load(), 0u);
}

}  // namespace
}  // namespace poise
