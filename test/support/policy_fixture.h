// A policy over gRPC 1.51's fake subchannels (lb_policy_test_lib.h): no
// network, exact connectivity states, exact loads. Shared by the policy tests
// (test/grpc) and the hardening tests (test/hardening). Header-only; include
// as "test/support/policy_fixture.h".
#ifndef POISE_TEST_SUPPORT_POLICY_FIXTURE_H_
#define POISE_TEST_SUPPORT_POLICY_FIXTURE_H_

#include "src/grpc/require_undebug.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "poise/grpc_lb.h"
#include "poise/rendezvous.h"
#include "test/core/client_channel/lb_policy/lb_policy_test_lib.h"

namespace poise::test_support {

// Parses a loadBalancingConfig list (`[{"<policy>": {...}}]`) as a channel's
// service-config parse does and returns its status: the policies' messages.
inline absl::Status ParseConfig(const std::string& json) {
  auto parsed = grpc_core::Json::Parse(json);
  if (!parsed.ok()) return parsed.status();
  return grpc_core::CoreConfiguration::Get()
      .lb_policy_registry()
      .ParseLoadBalancingConfig(*parsed)
      .status();
}

class PolicyFixture : public grpc_core::testing::LoadBalancingPolicyTest {
 protected:
  using ChannelArgs = grpc_core::ChannelArgs;
  using ExecCtx = grpc_core::ExecCtx;
  using Json = grpc_core::Json;
  using LoadBalancingPolicy = grpc_core::LoadBalancingPolicy;
  using SubchannelKey = grpc_core::SubchannelKey;
  using PickResult = LoadBalancingPolicy::PickResult;
  using SubchannelPicker = LoadBalancingPolicy::SubchannelPicker;
  using Tracker = LoadBalancingPolicy::SubchannelCallTrackerInterface;

  static constexpr int kBackends = 4;
  static constexpr char kHeader[] = "x-session-id";

  // kBackends fake backends on 127.0.0.1, ports first_port, first_port + 1...
  explicit PolicyFixture(int first_port) {
    for (int i = 0; i < kBackends; ++i) {
      uris_.push_back(absl::StrCat("ipv4:127.0.0.1:", first_port + i));
      identities_.push_back(absl::StrCat("127.0.0.1:", first_port + i));
    }
  }

  void TearDown() override {
    picker_.reset();
    policy_.reset();
  }

  void MakePolicy(const std::string& name) {
    // A fresh label per policy: a replaced policy may outlive its reset.
    label_ = absl::StrCat(
        ::testing::UnitTest::GetInstance()->current_test_info()->name(), "#",
        ++policies_made_);
    auto helper = std::make_unique<FakeHelper>(this, work_serializer_);
    helper_ = helper.get();
    LoadBalancingPolicy::Args args = {
        work_serializer_, std::move(helper),
        ChannelArgs().Set(grpc_lb::kStatsLabelArg, label_)};
    policy_ = grpc_core::CoreConfiguration::Get()
                  .lb_policy_registry()
                  .CreateLoadBalancingPolicy(name, std::move(args));
    ASSERT_NE(policy_, nullptr);
  }

  absl::Status Update(const std::string& config_json,
                      const std::vector<std::string>& uris) {
    LoadBalancingPolicy::UpdateArgs update;
    update.addresses.emplace();
    for (const auto& uri : uris) {
      update.addresses->emplace_back(MakeAddress(uri), ChannelArgs());
    }
    update.config = MakeConfig(*Json::Parse(config_json));
    update.resolution_note = "note from the test";
    return ApplyUpdate(std::move(update), policy_.get());
  }

  // The policy's config: hashHeader kHeader plus `body` (JSON members).
  static std::string Config(const std::string& name, const std::string& body) {
    return absl::StrCat("[{\"", name, R"(":{"hashHeader":")", kHeader, "\"",
                        body.empty() ? "" : ",", body, "}}]");
  }

  void SetState(int backend, grpc_connectivity_state state,
                const absl::Status& status = absl::OkStatus()) {
    ExecCtx exec_ctx;
    auto it = subchannel_pool_.find(SubchannelKey(
        MakeAddress(uris_[static_cast<size_t>(backend)]), subchannel_args_));
    ASSERT_NE(it, subchannel_pool_.end())
        << uris_[static_cast<size_t>(backend)];
    it->second.SetConnectivityState(state, status);
  }

  // Consumes every queued event; keeps the newest state and picker.
  void Drain() {
    if (ExecCtx::Get() != nullptr) ExecCtx::Get()->Flush();
    while (auto event = helper_->GetEvent()) {
      if (auto* update = absl::get_if<FakeHelper::StateUpdate>(&*event)) {
        state_ = update->state;
        status_ = update->status;
        picker_ = std::move(update->picker);
      } else {
        ++reresolutions_;
      }
    }
  }

  // A pick and its call: the call state outlives the tracker, as a call's
  // arena does in gRPC (the policies make their trackers in it).
  struct Picked {
    std::unique_ptr<FakeCallState> call_state;
    PickResult result;
    int backend = -1;  // for Complete
    std::unique_ptr<Tracker> tracker;
  };

  // Picks with `key` as the header's value (no header when nullopt).
  Picked Pick(std::optional<std::string> key) {
    ExecCtx exec_ctx;
    std::map<std::string, std::string> md;
    if (key.has_value()) md[kHeader] = *key;
    FakeMetadata metadata(md);
    auto call_state = std::make_unique<FakeCallState>();
    PickResult result =
        picker_->Pick({"/svc/method", &metadata, call_state.get()});
    Picked out{std::move(call_state), std::move(result), -1, nullptr};
    if (auto* c = absl::get_if<PickResult::Complete>(&out.result.result)) {
      auto* sc =
          static_cast<SubchannelState::FakeSubchannel*>(c->subchannel.get());
      const std::string uri = *grpc_sockaddr_to_uri(&sc->address());
      for (int i = 0; i < kBackends; ++i) {
        if (uris_[static_cast<size_t>(i)] == uri) out.backend = i;
      }
      out.tracker = std::move(c->subchannel_call_tracker);
    }
    return out;
  }

  // The key's owner among all backends with equal weights, from the core.
  int Owner(const std::string& key) {
    std::vector<Candidate> c;
    for (const auto& id : identities_) c.push_back({id, 1, true});
    return static_cast<int>(WeightedRendezvous::Pick(key, c).value());
  }

  std::vector<std::string> uris_;
  std::vector<std::string> identities_;
  std::string label_;
  grpc_core::OrphanablePtr<LoadBalancingPolicy> policy_;
  grpc_connectivity_state state_ = GRPC_CHANNEL_IDLE;
  absl::Status status_;
  std::unique_ptr<SubchannelPicker> picker_;
  int reresolutions_ = 0;
  int policies_made_ = 0;
  // The channel args of the last update, which the policy's subchannels
  // carry (SetState finds them by them).
  ChannelArgs subchannel_args_;
};

}  // namespace poise::test_support

#endif  // POISE_TEST_SUPPORT_POLICY_FIXTURE_H_
