// The per-address identity attribute: the identity the rendezvous policies
// hash for an address, set by a resolver (such as a DNS resolver that names
// each address by its host). An endpoints[] identity in the config takes
// precedence; without either, the address text is hashed.
#ifndef POISE_SRC_GRPC_IDENTITY_ATTRIBUTE_H_
#define POISE_SRC_GRPC_IDENTITY_ATTRIBUTE_H_

#include "src/grpc/require_undebug.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/core/lib/gpr/useful.h"
#include "src/core/lib/resolver/server_address.h"

namespace poise::grpc_lb {

class IdentityAttribute final
    : public grpc_core::ServerAddress::AttributeInterface {
 public:
  // The attribute's key: gRPC keys attributes by this array's address (one
  // address program-wide: an inline variable).
  static constexpr char kKey[] = "poise.identity";

  explicit IdentityAttribute(std::string identity)
      : identity_(std::move(identity)) {}

  const std::string& identity() const { return identity_; }

  std::unique_ptr<AttributeInterface> Copy() const override {
    return std::make_unique<IdentityAttribute>(identity_);
  }
  int Cmp(const AttributeInterface* other) const override {
    return grpc_core::QsortCompare(
        identity_, static_cast<const IdentityAttribute*>(other)->identity_);
  }
  std::string ToString() const override {
    return absl::StrCat("{identity=", identity_, "}");
  }

 private:
  std::string identity_;
};

}  // namespace poise::grpc_lb

#endif  // POISE_SRC_GRPC_IDENTITY_ATTRIBUTE_H_
