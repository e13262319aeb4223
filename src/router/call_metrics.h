// The ended calls of one backend or one channel (grpc_lb::CallStats) as
// atomics that call trackers count into from any thread: three relaxed
// increments per call, read by snapshots.
#ifndef POISE_SRC_ROUTER_CALL_METRICS_H_
#define POISE_SRC_ROUTER_CALL_METRICS_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "poise/grpc_lb.h"

namespace poise::router {

// The index of the duration bucket counting `duration_ns`: that of the first
// bound not below it, else the last (above every bound).
inline size_t DurationBucketOf(uint64_t duration_ns) {
  const auto& bounds = grpc_lb::kCallDurationBucketBoundsNs;
  return static_cast<size_t>(
      std::lower_bound(bounds.begin(), bounds.end(), duration_ns) -
      bounds.begin());
}

class CallMetrics final {
 public:
  // Counts one ended call. A code outside gRPC's is counted as UNKNOWN (2).
  void Record(int status_code, uint64_t duration_ns) {
    const auto code = static_cast<size_t>(static_cast<unsigned>(status_code));
    by_status_[code < grpc_lb::kStatusCodeCount ? code : kUnknown].fetch_add(
        1, std::memory_order_relaxed);
    duration_buckets_[DurationBucketOf(duration_ns)].fetch_add(
        1, std::memory_order_relaxed);
    duration_sum_ns_.fetch_add(duration_ns, std::memory_order_relaxed);
  }

  // Each count as it is now (each alone never goes backwards; calls ending
  // meanwhile may show in some counts and not yet in others).
  grpc_lb::CallStats Read() const;

 private:
  static constexpr size_t kUnknown = 2;

  std::array<std::atomic<uint64_t>, grpc_lb::kStatusCodeCount> by_status_{};
  std::array<std::atomic<uint64_t>,
             grpc_lb::kCallDurationBucketBoundsNs.size() + 1>
      duration_buckets_{};
  std::atomic<uint64_t> duration_sum_ns_{0};
};

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_CALL_METRICS_H_
