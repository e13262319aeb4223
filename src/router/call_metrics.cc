#include "src/router/call_metrics.h"

namespace poise::router {

grpc_lb::CallStats CallMetrics::Read() const {
  grpc_lb::CallStats out;
  for (size_t i = 0; i < out.by_status.size(); ++i) {
    out.by_status[i] = by_status_[i].load(std::memory_order_relaxed);
  }
  for (size_t i = 0; i < out.duration_buckets.size(); ++i) {
    out.duration_buckets[i] =
        duration_buckets_[i].load(std::memory_order_relaxed);
  }
  out.duration_sum_ns = duration_sum_ns_.load(std::memory_order_relaxed);
  return out;
}

}  // namespace poise::router
