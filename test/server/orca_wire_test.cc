// The hand-written ORCA wire format of poise::server: the report decoded by
// gRPC's own parser (upb, as gRPC's client reads it), the request decoder
// on well-formed, unusual and malformed input.
// clang-format off
#include "src/grpc/require_undebug.h"
#include <grpc/support/port_platform.h>
// clang-format on

#include "src/server/orca_wire.h"

#include <gtest/gtest.h>

#include <cmath>
#include <deque>
#include <limits>
#include <string>

#include "test/server/metric_parser.h"

namespace poise::load_reports_internal {
namespace {

using std::chrono::milliseconds;
using std::chrono::nanoseconds;
using std::chrono::seconds;

using Allocator = test_support::MetricAllocator;

TEST(EncodeUtilization, GrpcParsesTheReport) {
  for (double value :
       {0.0, 1.0, 3.0, 1e6, 0.5, std::numeric_limits<double>::max()}) {
    for (const char* name : {"rif", "x", ""}) {
      Allocator allocator;
      const grpc_core::BackendMetricData* data =
          grpc_core::ParseBackendMetricData(EncodeUtilization(name, value),
                                            &allocator);
      ASSERT_NE(data, nullptr);
      ASSERT_EQ(data->utilization.size(), 1u);
      EXPECT_EQ(data->utilization.begin()->first, name);
      EXPECT_EQ(data->utilization.begin()->second, value);
      EXPECT_TRUE(data->request_cost.empty());
      EXPECT_EQ(data->cpu_utilization, 0);  // unset
    }
  }
}

TEST(EncodeUtilization, KnownBytes) {
  // utilization {key: "rif" value: 2.0}: 2a 0e | 0a 03 'rif' | 11 + 8 bytes.
  EXPECT_EQ(EncodeUtilization("rif", 2.0),
            std::string("\x2a\x0e\x0a\x03rif\x11\0\0\0\0\0\0\0\x40", 16));
}

TEST(EncodeUtilization, LongNameUsesAMultiByteLength) {
  const std::string name(200, 'n');
  Allocator allocator;
  const grpc_core::BackendMetricData* data =
      grpc_core::ParseBackendMetricData(EncodeUtilization(name, 7), &allocator);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->utilization.at(name), 7);
}

TEST(EncodeUtilization, AppendedReportsMerge) {
  Allocator allocator;
  const grpc_core::BackendMetricData* data = grpc_core::ParseBackendMetricData(
      EncodeUtilization("a", 1) + EncodeUtilization("b", 2) +
          EncodeUtilization("a", 3),
      &allocator);
  ASSERT_NE(data, nullptr);
  EXPECT_EQ(data->utilization.size(), 2u);
  EXPECT_EQ(data->utilization.at("a"), 3);  // the last one wins
  EXPECT_EQ(data->utilization.at("b"), 2);
}

nanoseconds Decoded(const std::string& bytes) {
  auto decoded = DecodeReportInterval(bytes);
  EXPECT_TRUE(decoded.ok()) << decoded.status();
  if (!decoded.ok() || !decoded->has_value()) return nanoseconds(-12345);
  return **decoded;
}

TEST(DecodeReportInterval, WellFormed) {
  auto empty = DecodeReportInterval("");
  ASSERT_TRUE(empty.ok());
  EXPECT_FALSE(empty->has_value());
  // report_interval {} (present, zero).
  EXPECT_EQ(Decoded(std::string("\x0a\x00", 2)), nanoseconds(0));
  // {nanos: 10000000} = 10 ms.
  EXPECT_EQ(Decoded("\x0a\x05\x10\x80\xad\xe2\x04"), milliseconds(10));
  // {seconds: 2, nanos: 5}.
  EXPECT_EQ(Decoded("\x0a\x04\x08\x02\x10\x05"), seconds(2) + nanoseconds(5));
  // request_cost_names and unknown fields of every wire type are skipped.
  EXPECT_EQ(Decoded(std::string("\x12\x03"
                                "abc"
                                "\x18\x96\x01"  // 3: varint
                                "\x21"
                                "12345678"  // 4: fixed64
                                "\x2d"
                                "1234"              // 5: fixed32
                                "\x0a\x02\x08\x03"  // interval 3 s
                                "\x12\x00",
                                28)),
            seconds(3));
  // The field twice merges: seconds from the first, nanos from the second.
  EXPECT_EQ(Decoded("\x0a\x02\x08\x04\x0a\x02\x10\x07"),
            seconds(4) + nanoseconds(7));
}

TEST(DecodeReportInterval, NegativeAndHugeDurations) {
  // seconds: -1 (ten-byte varint).
  EXPECT_EQ(Decoded("\x0a\x0b\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),
            seconds(-1));
  // seconds: 2^62 saturates.
  EXPECT_EQ(Decoded("\x0a\x0a\x08\x80\x80\x80\x80\x80\x80\x80\x80\x40"),
            nanoseconds::max());
}

TEST(DecodeReportInterval, MalformedIsInvalidArgument) {
  for (const std::string& bad : {
           std::string("\x0a", 1),          // no length
           std::string("\x0a\x05\x08", 3),  // length past the end
           std::string("\x0a\x02\x08", 3),  // truncated varint inside
           std::string("\x08\x01", 2),      // field 1 as a varint
           std::string("\x0b", 1),          // group start
           std::string("\x00\x00", 2),      // field 0
           std::string("\x21\x01\x02", 3),  // truncated fixed64
           std::string("\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
                       12),                     // varint past 10 bytes
           std::string("\x0a\x02\x0b\x00", 4),  // group inside Duration
       }) {
    auto decoded = DecodeReportInterval(bad);
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument)
        << testing::PrintToString(bad);
  }
}

}  // namespace
}  // namespace poise::load_reports_internal
