// Shared helpers of the end-to-end and hardening tests: a client on real
// local backends, condition waits with deadlines, and the policy's live
// counters. Include as "test/support/e2e_harness.h".
#ifndef POISE_TEST_SUPPORT_E2E_HARNESS_H_
#define POISE_TEST_SUPPORT_E2E_HARNESS_H_

#include <grpc/support/time.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backend.h"
#include "echo.grpc.pb.h"
#include "poise/grpc_lb.h"
#include "poise/rendezvous.h"

namespace poise::test_support {

inline constexpr char kHeader[] = "x-session-id";

inline std::string LbConfig(const std::string& policy,
                            const std::string& extra = "") {
  return absl::StrCat(R"({"loadBalancingConfig":[{")", policy,
                      R"(":{"hashHeader":"x-session-id")",
                      extra.empty() ? "" : ",", extra, "}}]}");
}

struct CallOptions {
  uint32_t delay_ms = 0;
  std::chrono::milliseconds deadline{10000};
  bool wait_for_ready = true;
  // Extra (key, value) metadata pairs, e.g. a second value of the header.
  std::vector<std::pair<std::string, std::string>> extra_metadata;
  // Cancels the call from another thread after this long (0: never).
  std::chrono::milliseconds cancel_after{0};
};

struct CallOutcome {
  grpc::Status status;
  std::string backend_id;  // the reply's backend id when OK
  // Whether the call returned before its deadline (plus a scheduling
  // allowance): nothing may hang past its deadline.
  bool ended_in_time = true;

  // The serving backend's id, or "error:<message>" when the call failed.
  std::string ServedBy() const {
    return status.ok() ? backend_id
                       : absl::StrCat("error:", status.error_message());
  }
};

class Client {
 public:
  // `credentials`: insecure when null.
  Client(
      const std::string& target, const std::string& service_config,
      const std::string& label, grpc::ChannelArguments args = {},
      const std::shared_ptr<grpc::ChannelCredentials>& credentials = nullptr) {
    args.SetServiceConfigJSON(service_config);
    args.SetString(grpc_lb::kStatsLabelArg, label);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channel_ = grpc::CreateCustomChannel(
        target,
        credentials != nullptr ? credentials
                               : grpc::InsecureChannelCredentials(),
        args);
    stub_ = example::Echo::NewStub(channel_);
  }

  CallOutcome Call(const std::string& key, const CallOptions& options = {}) {
    grpc::ClientContext context;
    context.AddMetadata(kHeader, key);
    for (const auto& [k, v] : options.extra_metadata) context.AddMetadata(k, v);
    context.set_wait_for_ready(options.wait_for_ready);
    const auto start = std::chrono::steady_clock::now();
    // On the monotonic clock: a wall clock stepped during the call (NTP, a
    // VM resume, test/support/wall_clock_shift.h) neither expires nor
    // extends it.
    context.set_deadline(gpr_time_add(
        gpr_now(GPR_CLOCK_MONOTONIC),
        gpr_time_from_millis(options.deadline.count(), GPR_TIMESPAN)));
    example::EchoRequest request;
    request.set_delay_ms(options.delay_ms);
    example::EchoReply reply;
    std::thread canceller;
    if (options.cancel_after.count() > 0) {
      canceller = std::thread([&context, &options] {
        std::this_thread::sleep_for(options.cancel_after);
        context.TryCancel();
      });
    }
    CallOutcome out;
    out.status = stub_->Echo(&context, request, &reply);
    if (canceller.joinable()) canceller.join();
    const auto elapsed = std::chrono::steady_clock::now() - start;
    // Generous allowance for sanitizer builds on two shared cores.
    out.ended_in_time = elapsed < options.deadline + std::chrono::seconds(5);
    if (out.status.ok()) out.backend_id = reply.backend_id();
    return out;
  }

  grpc::Channel* channel() { return channel_.get(); }
  example::Echo::Stub& stub() { return *stub_; }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<example::Echo::Stub> stub_;
};

inline grpc_lb::ChannelStats StatsFor(const std::string& label) {
  for (grpc_lb::ChannelStats& s : grpc_lb::StatsSnapshot()) {
    if (s.label == label) return s;
  }
  return {};
}

inline uint64_t TotalInFlight(const std::string& label) {
  uint64_t total = 0;
  for (const auto& b : StatsFor(label).backends) total += b.in_flight;
  return total;
}

// Polls `done` every `poll` (10 ms) until it holds or `limit` passes.
template <typename Condition>
bool WaitFor(Condition done,
             std::chrono::milliseconds limit = std::chrono::seconds(20),
             std::chrono::milliseconds poll = std::chrono::milliseconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(poll);
  }
  return true;
}

// Candidates for the core, identities = the backends' addresses.
inline std::vector<Candidate> Candidates(const example::BackendSet& set,
                                         std::vector<std::string>* storage) {
  storage->clear();
  for (size_t i = 0; i < set.size(); ++i) {
    storage->push_back(set.backend(i).address());
  }
  std::vector<Candidate> out;
  for (const auto& id : *storage) out.push_back({id, 1, true});
  return out;
}

// Sends calls with fresh keys until every backend has served one, so all are
// READY. Bounds divide by the READY backends' weight: a test that assumes
// all of them must not start its load while one is still connecting.
inline bool WarmUp(Client& client, const example::BackendSet& set) {
  int n = 0;
  return WaitFor([&] {
    client.Call(absl::StrCat("warm-up-", n++));
    for (size_t i = 0; i < set.size(); ++i) {
      if (set.backend(i).calls() == 0) return false;
    }
    return true;
  });
}

inline std::string OwnerId(const example::BackendSet& set,
                           const std::string& key) {
  std::vector<std::string> storage;
  const auto candidates = Candidates(set, &storage);
  return set.backend(WeightedRendezvous::Pick(key, candidates).value()).id();
}

// ceil(f * c * w / (100 * W)).
inline uint64_t Bound(uint64_t factor, uint64_t c, uint64_t w, uint64_t total) {
  return (factor * c * w + 100 * total - 1) / (100 * total);
}

}  // namespace poise::test_support

#endif  // POISE_TEST_SUPPORT_E2E_HARNESS_H_
