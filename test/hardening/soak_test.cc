// Soak: at least 500,000 calls through one channel with churning keys, eight
// threads. Memory must be steady (RSS at the end within a small margin of the
// RSS after warm-up) and the policy's in-flight counters exactly zero.
//
//   POISE_SOAK_CALLS=n   total calls (default 500000; smaller for valgrind)
// Registered with CTest only when configured with -DPOISE_SOAK=ON.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "test/support/e2e_harness.h"

namespace poise::hardening {
namespace {

// The shared e2e harness.
using test_support::CallOutcome;
using test_support::Client;
using test_support::LbConfig;
using test_support::StatsFor;
using test_support::TotalInFlight;
using test_support::WaitFor;

uint64_t RssBytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0;
  uint64_t resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

int64_t CallsFromEnv() {
  const char* env = std::getenv("POISE_SOAK_CALLS");
  if (env == nullptr || *env == '\0') return 500000;
  return std::max<int64_t>(1000, std::atoll(env));
}

TEST(Soak, ManyCallsSteadyMemoryExactCounters) {
  example::BackendSet set;
  ASSERT_TRUE(set.Start(4).ok());  // no key recording: it would grow by design
  Client c(set.target(),
           LbConfig("bounded_load_rendezvous", R"("balanceFactorPercent":125)"),
           "soak");
  constexpr int kThreads = 8;
  const int64_t total = CallsFromEnv();
  const int64_t warm_up = total / 10;
  std::atomic<int64_t> next{0};
  std::atomic<int64_t> errors{0};
  std::atomic<uint64_t> warm_rss{0};
  auto worker = [&] {
    for (;;) {
      const int64_t i = next.fetch_add(1);
      if (i >= total) return;
      if (i == warm_up) warm_rss.store(RssBytes());
      // Each key is used 16 times, then never again: the key space churns.
      const CallOutcome out = c.Call(absl::StrCat("churn-", i / 16));
      if (!out.status.ok()) ++errors;
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker);
  for (auto& t : threads) t.join();
  const uint64_t end_rss = RssBytes();
  EXPECT_EQ(errors.load(), 0);
  ASSERT_TRUE(WaitFor([&] { return TotalInFlight("soak") == 0; }));
  const grpc_lb::ChannelStats stats = StatsFor("soak");
  EXPECT_EQ(stats.picks, static_cast<uint64_t>(total));
  for (const auto& b : stats.backends) EXPECT_EQ(b.in_flight, 0u);
  const uint64_t margin = std::max<uint64_t>(8u << 20, warm_rss.load() / 10);
  std::fprintf(stderr,
               "soak: %lld calls, RSS after warm-up %.1f MiB, at end %.1f "
               "MiB\n",
               static_cast<long long>(total),
               static_cast<double>(warm_rss.load()) / 1048576.0,
               static_cast<double>(end_rss) / 1048576.0);
  EXPECT_LE(end_rss, warm_rss.load() + margin);
}

}  // namespace
}  // namespace poise::hardening
