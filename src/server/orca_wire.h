// The two small ORCA messages of poise::server, encoded and decoded by hand
// (protobuf wire format) so that the library needs no protobuf runtime nor
// generated code:
//
//   xds.data.orca.v3.OrcaLoadReport { map<string, double> utilization = 5; }
//   xds.service.orca.v3.OrcaLoadReportRequest {
//     google.protobuf.Duration report_interval = 1;
//     repeated string request_cost_names = 2;
//   }
//   google.protobuf.Duration { int64 seconds = 1; int32 nanos = 2; }
#ifndef POISE_SRC_SERVER_ORCA_WIRE_H_
#define POISE_SRC_SERVER_ORCA_WIRE_H_

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace poise::load_reports_internal {

// A serialized OrcaLoadReport whose only field is utilization[name] = value.
// Appended to another serialized OrcaLoadReport, it adds that entry to the
// other's map (protobuf merges concatenated messages).
std::string EncodeUtilization(std::string_view name, double value);

// OrcaLoadReportRequest.report_interval, or nullopt when the request has
// none. A negative duration is returned as it is (the caller raises it to
// its minimum). INVALID_ARGUMENT when the bytes are not a well-formed
// message. Unknown fields are skipped.
absl::StatusOr<std::optional<std::chrono::nanoseconds>> DecodeReportInterval(
    std::string_view request);

}  // namespace poise::load_reports_internal

#endif  // POISE_SRC_SERVER_ORCA_WIRE_H_
