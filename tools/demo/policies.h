// The three policies the demo compares: their channels (service configs,
// with and without the recommended retryPolicy) and the library's
// per-channel statistics for the two poise ones.
#ifndef POISE_TOOLS_DEMO_POLICIES_H_
#define POISE_TOOLS_DEMO_POLICIES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends.h"
#include "echo.grpc.pb.h"
#include "options.h"

namespace poise_demo {

enum class Policy { kBounded, kWeighted, kRoundRobin };

const char* PolicyName(Policy p);
bool IsPoise(Policy p);

// The service config of a channel to `set` with `policy`.
std::string ServiceConfig(Policy policy, const Options& opt,
                          const BackendSet& set);
// `config` (an object) with the recommended retryPolicy added.
std::string WithRetryPolicy(const std::string& config);

// A stub on a new channel to `set`, its statistics under `label`. The
// channel gets its own subchannels, so each run starts from its own
// connections rather than those an earlier channel left behind.
std::unique_ptr<poise::example::Echo::Stub> NewStub(
    const BackendSet& set, const std::string& service_config,
    const std::string& label);

// Per-channel statistics from the library, as counters we can subtract.
struct PoiseStats {
  bool found = false;
  uint64_t picks = 0, spills = 0, missing_key = 0, failed_picks = 0;
  // Indexed like the BackendSet.
  std::vector<uint64_t> picks_by_backend, spilled_in, peak_in_flight;
};

PoiseStats Snapshot(const std::string& label, const BackendSet& set);

}  // namespace poise_demo

#endif  // POISE_TOOLS_DEMO_POLICIES_H_
