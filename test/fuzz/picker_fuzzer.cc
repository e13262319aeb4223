// libFuzzer: the picker's header path. A bounded_load_rendezvous policy over
// four READY fake subchannels (gRPC 1.51's lb_policy_test_lib.h), with a key
// cache of 64 entries, picks for arbitrary header values (any bytes, any
// length) or none. Invariants: a keyed
// pick completes at the core's owner (loads are idle, so no spill); a missing
// header goes anywhere (missingKey RANDOM); the call tracker returns every
// counter to zero.
#include "src/grpc/require_undebug.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include <grpc/support/log.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "poise/grpc_lb.h"
#include "poise/rendezvous.h"
#include "test/core/client_channel/lb_policy/lb_policy_test_lib.h"
#include "test/fuzz/fuzz_check.h"

namespace {

using grpc_core::ChannelArgs;
using grpc_core::ExecCtx;
using grpc_core::LoadBalancingPolicy;
using PickResult = LoadBalancingPolicy::PickResult;

void NoLog(gpr_log_func_args* /*args*/) {}

constexpr int kBackends = 4;

class Harness final : public grpc_core::testing::LoadBalancingPolicyTest {
 public:
  void TestBody() override {}

  void Start() {
    for (int i = 0; i < kBackends; ++i) {
      uris_.push_back(absl::StrCat("ipv4:127.0.0.1:", 641 + i));
      candidates_ids_.push_back(absl::StrCat("127.0.0.1:", 641 + i));
    }
    for (const auto& id : candidates_ids_) candidates_.push_back({id, 1, true});
    auto helper = std::make_unique<FakeHelper>(this, work_serializer_);
    helper_ = helper.get();
    LoadBalancingPolicy::Args args = {
        work_serializer_, std::move(helper),
        ChannelArgs().Set(poise::grpc_lb::kStatsLabelArg, "fuzz")};
    policy_ = grpc_core::CoreConfiguration::Get()
                  .lb_policy_registry()
                  .CreateLoadBalancingPolicy("bounded_load_rendezvous",
                                             std::move(args));
    FUZZ_CHECK(policy_ != nullptr);
    LoadBalancingPolicy::UpdateArgs update;
    update.addresses.emplace();
    for (const auto& uri : uris_) {
      update.addresses->emplace_back(MakeAddress(uri), ChannelArgs());
    }
    update.config = MakeConfig(*grpc_core::Json::Parse(
        R"([{"bounded_load_rendezvous":{"hashHeader":"x-session-id",)"
        R"("keyCache":64}}])"));
    FUZZ_CHECK(ApplyUpdate(std::move(update), policy_.get()).ok());
    for (const auto& uri : uris_) {
      ExecCtx exec_ctx;
      subchannel_pool_
          .find(grpc_core::SubchannelKey(MakeAddress(uri), ChannelArgs()))
          ->second.SetConnectivityState(GRPC_CHANNEL_READY, absl::OkStatus());
    }
    if (ExecCtx::Get() != nullptr) ExecCtx::Get()->Flush();
    while (auto event = helper_->GetEvent()) {
      if (auto* u = absl::get_if<FakeHelper::StateUpdate>(&*event)) {
        state_ = u->state;
        picker_ = std::move(u->picker);
      }
    }
    FUZZ_CHECK(state_ == GRPC_CHANNEL_READY && picker_ != nullptr);
  }

  void PickOnce(bool keyed, const std::string& key) {
    ExecCtx exec_ctx;
    std::map<std::string, std::string> md;
    if (keyed) md["x-session-id"] = key;
    FakeMetadata metadata(md);
    FakeCallState call_state;
    PickResult result = picker_->Pick({"/svc/m", &metadata, &call_state});
    auto* complete = absl::get_if<PickResult::Complete>(&result.result);
    FUZZ_CHECK(complete != nullptr);
    auto* sc = static_cast<SubchannelState::FakeSubchannel*>(
        complete->subchannel.get());
    const std::string uri = *grpc_sockaddr_to_uri(&sc->address());
    if (keyed) {
      const auto owner = poise::WeightedRendezvous::Pick(key, candidates_);
      FUZZ_CHECK(owner.ok() && uris_[owner.value()] == uri);
    }
    FUZZ_CHECK(complete->subchannel_call_tracker != nullptr);
    complete->subchannel_call_tracker->Start();
    complete->subchannel_call_tracker->Finish(
        {absl::OkStatus(), nullptr, nullptr});
    complete->subchannel_call_tracker.reset();
    for (const auto& s : poise::grpc_lb::StatsSnapshot()) {
      if (s.label != "fuzz") continue;
      for (const auto& b : s.backends) FUZZ_CHECK(b.in_flight == 0);
    }
  }

 private:
  std::vector<std::string> uris_;
  std::vector<std::string> candidates_ids_;
  std::vector<poise::Candidate> candidates_;
  grpc_core::OrphanablePtr<LoadBalancingPolicy> policy_;
  grpc_connectivity_state state_ = GRPC_CHANNEL_IDLE;
  std::unique_ptr<LoadBalancingPolicy::SubchannelPicker> picker_;
};

Harness* harness = nullptr;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  gpr_set_log_function(NoLog);
  if (!poise::grpc_lb::RegisterPolicies().ok()) std::abort();
  grpc_init();
  harness = new Harness();  // lives for the process
  harness->Start();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bool keyed = size == 0 || (data[0] & 0x80) == 0;
  const std::string key(reinterpret_cast<const char*>(data) + (size ? 1 : 0),
                        size ? size - 1 : 0);
  harness->PickOnce(keyed, key);
  return 0;
}
