// What gRPC's own client saw of the load reports, through two test LB
// policies of gRPC 1.51 (third_party/grpc-src/test/core/util/
// test_lb_policies.cc), registered by server_test_main.cc:
//  - intercept_trailing_metadata_lb: each call's trailer, parsed by the
//    client channel (gRPC 1.51 does not publish endpoint-load-metrics-bin
//    to the application's ClientContext; LB policies read it);
//  - oob_backend_metric_test_lb: gRPC's ORCA client (the OOB producer,
//    asking for a 1 s interval) reading StreamCoreMetrics.
#ifndef POISE_TEST_SERVER_LB_SINKS_H_
#define POISE_TEST_SERVER_LB_SINKS_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace poise::test_support {

using Utilization = std::map<std::string, double>;

// The metadata key that the test servers echo into their trailers, so that
// a trailer seen by the LB policy is matched to its call.
inline constexpr char kCallIdKey[] = "x-call-id";

class ReportSink {
 public:
  // Per call: the call's id and its report (nullopt: no report).
  void AddCall(const std::string& id, std::optional<Utilization> report) {
    std::lock_guard<std::mutex> lock(mu_);
    calls_[id] = std::move(report);
    cv_.notify_all();
  }
  // Reports of a call; nullopt if none came (yet) or it had no report.
  std::optional<Utilization> Call(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = calls_.find(id);
    if (it == calls_.end()) return std::nullopt;
    return it->second;
  }
  bool SawCall(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_.count(id) != 0;
  }

  // Out of band.
  void AddOob(Utilization report) {
    std::lock_guard<std::mutex> lock(mu_);
    oob_.push_back(std::move(report));
    cv_.notify_all();
  }
  // Waits for an out-of-band report after the first `from` that satisfies
  // pred; returns the number of reports seen then, or nullopt at timeout.
  std::optional<size_t> AwaitOob(
      size_t from, const std::function<bool(const Utilization&)>& pred,
      std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    size_t next = from;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      for (; next < oob_.size(); ++next) {
        if (pred(oob_[next])) return next + 1;
      }
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout &&
          next == oob_.size()) {
        return std::nullopt;
      }
    }
  }
  size_t oob_count() {
    std::lock_guard<std::mutex> lock(mu_);
    return oob_.size();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::optional<Utilization>> calls_;
  std::vector<Utilization> oob_;
};

ReportSink& Sink();

}  // namespace poise::test_support

#endif  // POISE_TEST_SERVER_LB_SINKS_H_
