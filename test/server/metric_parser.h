// gRPC's own client-side parser of an OrcaLoadReport
// (grpc_core::ParseBackendMetricData), with the allocator it needs: the
// server tests decode reports as gRPC's client does.
#ifndef POISE_TEST_SERVER_METRIC_PARSER_H_
#define POISE_TEST_SERVER_METRIC_PARSER_H_

// clang-format off
#include "src/grpc/require_undebug.h"
#include <grpc/support/port_platform.h>
// clang-format on

#include <cstddef>
#include <deque>
#include <string>

#include "src/core/ext/filters/client_channel/backend_metric.h"

namespace poise::test_support {

// Keeps what the parser allocates for as long as it lives.
class MetricAllocator final
    : public grpc_core::BackendMetricAllocatorInterface {
 public:
  grpc_core::BackendMetricData* AllocateBackendMetricData() override {
    return &data_.emplace_back();
  }
  char* AllocateString(size_t size) override {
    return strings_.emplace_back(size, '\0').data();
  }

 private:
  std::deque<grpc_core::BackendMetricData> data_;
  std::deque<std::string> strings_;
};

}  // namespace poise::test_support

#endif  // POISE_TEST_SERVER_METRIC_PARSER_H_
