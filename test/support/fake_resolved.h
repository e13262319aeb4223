// A channel whose address list the test sets and changes, through gRPC 1.51's
// fake resolver (the channel target is "fake:///..."). Internal gRPC headers:
// include after src/grpc/require_undebug.h and port_platform.h.
#ifndef POISE_TEST_SUPPORT_FAKE_RESOLVED_H_
#define POISE_TEST_SUPPORT_FAKE_RESOLVED_H_

#include <grpcpp/grpcpp.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "backend.h"
#include "src/core/ext/filters/client_channel/resolver/fake/fake_resolver.h"
#include "src/core/lib/address_utils/parse_address.h"
#include "src/core/lib/iomgr/exec_ctx.h"
#include "src/core/lib/resolver/server_address.h"

namespace poise::test_support {

class FakeResolved {
 public:
  FakeResolved()
      : generator_(grpc_core::MakeRefCounted<
                   grpc_core::FakeResolverResponseGenerator>()) {}

  // The channel arguments that attach a channel to this resolver.
  grpc::ChannelArguments Args() {
    grpc::ChannelArguments args;
    args.SetPointerWithVtable(
        GRPC_ARG_FAKE_RESOLVER_RESPONSE_GENERATOR, generator_.get(),
        &grpc_core::FakeResolverResponseGenerator::kChannelArgPointerVtable);
    return args;
  }

  // Resolves to the addresses of set.backend(i) for each i of `which`, in
  // that order.
  void Set(const example::BackendSet& set, const std::vector<size_t>& which) {
    grpc_core::ExecCtx exec_ctx;
    grpc_core::Resolver::Result result;
    grpc_core::ServerAddressList addresses;
    for (size_t i : which) {
      grpc_resolved_address address;
      GPR_ASSERT(
          grpc_parse_ipv4_hostport(set.backend(i).address(), &address, true));
      addresses.emplace_back(address, grpc_core::ChannelArgs());
    }
    result.addresses = std::move(addresses);
    generator_->SetResponse(std::move(result));
  }

  // Resolves to the first `count` backends of `set`.
  void SetFirst(const example::BackendSet& set, size_t count) {
    std::vector<size_t> which(count);
    for (size_t i = 0; i < count; ++i) which[i] = i;
    Set(set, which);
  }

 private:
  grpc_core::RefCountedPtr<grpc_core::FakeResolverResponseGenerator> generator_;
};

}  // namespace poise::test_support

#endif  // POISE_TEST_SUPPORT_FAKE_RESOLVED_H_
