// OrcaLoadReportRequest messages for the server tests, encoded by hand
// (protobuf wire format) independently of the library's decoder.
#ifndef POISE_TEST_SERVER_ORCA_REQUEST_H_
#define POISE_TEST_SERVER_ORCA_REQUEST_H_

#include <cstdint>
#include <string>

namespace poise::test_support {

inline void PutVarint(uint64_t value, std::string& out) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

// OrcaLoadReportRequest{report_interval: {seconds, nanos},
// request_cost_names: ["ignored"]}.
inline std::string ReportRequest(int64_t seconds, int32_t nanos) {
  std::string duration;
  if (seconds != 0) {
    duration.push_back(0x08);
    PutVarint(static_cast<uint64_t>(seconds), duration);
  }
  if (nanos != 0) {
    duration.push_back(0x10);
    PutVarint(static_cast<uint64_t>(static_cast<int64_t>(nanos)), duration);
  }
  std::string request;
  request.push_back(0x0a);
  PutVarint(duration.size(), request);
  request += duration;
  request += "\x12\x07ignored";
  return request;
}

}  // namespace poise::test_support

#endif  // POISE_TEST_SERVER_ORCA_REQUEST_H_
