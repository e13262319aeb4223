// Drives the workload through one policy's channel: workers keep a fixed
// number of calls in flight through the warm-up, the measured main phase
// and, for the poise policies, a backend's stop.
#ifndef POISE_TOOLS_DEMO_RUNNER_H_
#define POISE_TOOLS_DEMO_RUNNER_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backends.h"
#include "echo.grpc.pb.h"
#include "options.h"
#include "policies.h"
#include "report.h"
#include "workload.h"

namespace poise_demo {

using Clock = std::chrono::steady_clock;

class Runner {
 public:
  Runner(const Options& opt, BackendSet* set,
         const std::vector<uint32_t>* sequence);

  PolicyReport Run(Policy policy, const std::string& service_config);
  // Stops backend `stopped` under the same traffic on a channel with
  // `service_config` (the recommended retryPolicy); restarts it. Returns the
  // calls sent and failed from the stop to kSettleSeconds after it.
  std::pair<uint64_t, uint64_t> StopWithRetry(const std::string& service_config,
                                              size_t stopped);

 private:
  // What the main phase measured besides the call log.
  struct MainPhase {
    double seconds = 0;
    PoiseStats before, after;
    ServerCounters server;
  };

  // One worker per call in flight, each logging into its entry of `logs`.
  std::vector<std::thread> StartWorkers(poise::example::Echo::Stub* stub,
                                        std::vector<RunLog>* logs);
  MainPhase Measure(Policy policy, const std::string& label, bool with_stop,
                    double* elapsed, double total);
  void Worker(poise::example::Echo::Stub* stub, RunLog* log);
  void Progress(Policy policy, double elapsed, double total);
  void Sleep(Policy policy, double seconds, double* elapsed, double total);

  const Options& opt_;
  BackendSet* set_;
  const std::vector<uint32_t>* sequence_;
  std::vector<std::string> key_names_;

  std::atomic<int> phase_{kWarmup};
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> next_{0};
  std::atomic<uint64_t> sent_{0}, failed_{0};
  std::atomic<int> in_flight_[kPhases] = {};  // calls started in each phase
};

}  // namespace poise_demo

#endif  // POISE_TOOLS_DEMO_RUNNER_H_
