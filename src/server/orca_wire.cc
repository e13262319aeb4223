#include "src/server/orca_wire.h"

#include <cstdint>
#include <cstring>
#include <limits>

namespace poise::load_reports_internal {
namespace {

constexpr uint32_t kVarint = 0;
constexpr uint32_t kFixed64 = 1;
constexpr uint32_t kLengthDelimited = 2;
constexpr uint32_t kFixed32 = 5;

void PutVarint(uint64_t value, std::string& out) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void PutTag(uint32_t field, uint32_t wire_type, std::string& out) {
  PutVarint((uint64_t{field} << 3) | wire_type, out);
}

// Reads protobuf fields one by one; any malformation ends the reading with
// an error.
class Reader {
 public:
  explicit Reader(std::string_view bytes) : bytes_(bytes) {}

  bool done() const { return pos_ == bytes_.size(); }

  bool Varint(uint64_t& value) {
    value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ == bytes_.size()) return false;
      const auto byte = static_cast<uint8_t>(bytes_[pos_++]);
      value |= uint64_t{byte & 0x7fU} << shift;
      if ((byte & 0x80U) == 0) return true;
    }
    return false;  // more than 10 bytes
  }

  bool Tag(uint32_t& field, uint32_t& wire_type) {
    uint64_t tag = 0;
    if (!Varint(tag) || tag > std::numeric_limits<uint32_t>::max()) {
      return false;
    }
    field = static_cast<uint32_t>(tag >> 3);
    wire_type = static_cast<uint32_t>(tag & 7);
    return field != 0;
  }

  bool LengthDelimited(std::string_view& value) {
    uint64_t length = 0;
    if (!Varint(length) || length > bytes_.size() - pos_) return false;
    value = bytes_.substr(pos_, static_cast<size_t>(length));
    pos_ += static_cast<size_t>(length);
    return true;
  }

  bool Skip(uint32_t wire_type) {
    switch (wire_type) {
      case kVarint: {
        uint64_t ignored = 0;
        return Varint(ignored);
      }
      case kFixed64:
        return Advance(8);
      case kLengthDelimited: {
        std::string_view ignored;
        return LengthDelimited(ignored);
      }
      case kFixed32:
        return Advance(4);
      default:  // groups (3, 4) are not part of these messages
        return false;
    }
  }

 private:
  bool Advance(size_t n) {
    if (n > bytes_.size() - pos_) return false;
    pos_ += n;
    return true;
  }

  std::string_view bytes_;
  size_t pos_ = 0;
};

absl::Status Malformed(const char* what) {
  return absl::InvalidArgumentError(
      std::string("malformed OrcaLoadReportRequest: ") + what);
}

// google.protobuf.Duration, saturated to the range of std::chrono::nanoseconds.
absl::StatusOr<std::chrono::nanoseconds> DecodeDuration(
    std::string_view bytes) {
  Reader reader(bytes);
  int64_t seconds = 0;
  int64_t nanos = 0;
  while (!reader.done()) {
    uint32_t field = 0;
    uint32_t wire_type = 0;
    if (!reader.Tag(field, wire_type)) return Malformed("bad Duration tag");
    if ((field == 1 || field == 2) && wire_type == kVarint) {
      uint64_t raw = 0;
      if (!reader.Varint(raw)) return Malformed("bad Duration varint");
      // int64 and int32 are two's complement varints (negative: 10 bytes).
      if (field == 1) {
        seconds = static_cast<int64_t>(raw);
      } else {
        nanos = static_cast<int32_t>(static_cast<uint32_t>(raw));
      }
    } else if (!reader.Skip(wire_type)) {
      return Malformed("bad Duration field");
    }
  }
  constexpr int64_t kMaxSeconds =
      std::numeric_limits<int64_t>::max() / 1'000'000'000 - 3;
  if (seconds > kMaxSeconds) return std::chrono::nanoseconds::max();
  if (seconds < -kMaxSeconds) return std::chrono::nanoseconds::min();
  return std::chrono::seconds(seconds) + std::chrono::nanoseconds(nanos);
}

}  // namespace

std::string EncodeUtilization(std::string_view name, double value) {
  // The map entry: key = 1 (string), value = 2 (double, fixed64).
  std::string entry;
  PutTag(1, kLengthDelimited, entry);
  PutVarint(name.size(), entry);
  entry.append(name);
  PutTag(2, kFixed64, entry);
  uint64_t bits = 0;
  static_assert(sizeof bits == sizeof value);
  std::memcpy(&bits, &value, sizeof bits);
  for (int i = 0; i < 8; ++i) {
    entry.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  }
  std::string report;
  PutTag(5, kLengthDelimited, report);  // utilization
  PutVarint(entry.size(), report);
  report.append(entry);
  return report;
}

absl::StatusOr<std::optional<std::chrono::nanoseconds>> DecodeReportInterval(
    std::string_view request) {
  Reader reader(request);
  // A message field seen more than once merges: Duration's fields are
  // scalars, so the last value of each wins, as in the concatenation.
  std::string duration_bytes;
  bool has_interval = false;
  while (!reader.done()) {
    uint32_t field = 0;
    uint32_t wire_type = 0;
    if (!reader.Tag(field, wire_type)) return Malformed("bad tag");
    if (field == 1 && wire_type == kLengthDelimited) {
      std::string_view duration;
      if (!reader.LengthDelimited(duration)) {
        return Malformed("truncated report_interval");
      }
      duration_bytes.append(duration);
      has_interval = true;
    } else if (field == 1) {
      return Malformed("report_interval is not a message");
    } else if (!reader.Skip(wire_type)) {
      return Malformed("bad field");
    }
  }
  if (!has_interval) return std::optional<std::chrono::nanoseconds>();
  absl::StatusOr<std::chrono::nanoseconds> interval =
      DecodeDuration(duration_bytes);
  if (!interval.ok()) return interval.status();
  return std::optional<std::chrono::nanoseconds>(*interval);
}

}  // namespace poise::load_reports_internal
