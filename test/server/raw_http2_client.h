// A raw HTTP/2 client on loopback, for what gRPC's own client never does:
// it opens StreamCoreMetrics streams and then withholds flow-control window
// (SETTINGS_INITIAL_WINDOW_SIZE=0) or stops reading its socket, so that the
// server's writes stay pending. It speaks just enough HTTP/2 (RFC 9113):
// the connection preface, SETTINGS and their ACK, PING ACKs while it reads,
// request HEADERS in HPACK literals without indexing (RFC 7541 section
// 6.2.2, no Huffman coding) and DATA. It tracks which streams got response
// headers and which ended (END_STREAM or RST_STREAM), and the DATA bytes
// the server sent. Of the server's header blocks it decodes only those made
// of literals with literal names, not Huffman coded: how gRPC 1.51's
// transport writes the trailers of a call cancelled on the server
// (close_from_api in chttp2_transport.cc); other blocks are not decoded.
#ifndef POISE_TEST_SERVER_RAW_HTTP2_CLIENT_H_
#define POISE_TEST_SERVER_RAW_HTTP2_CLIENT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace poise::test_support {

class RawHttp2Client {
 public:
  using Clock = std::chrono::steady_clock;

  struct Options {
    // SETTINGS_INITIAL_WINDOW_SIZE sent to the server: each stream's window
    // for the server's DATA; nullopt sends none (the default, 65535).
    std::optional<uint32_t> initial_window_size;
    // SO_RCVBUF before connecting; 0 keeps the system's.
    int receive_buffer = 0;
  };

  RawHttp2Client() = default;
  RawHttp2Client(const RawHttp2Client&) = delete;
  RawHttp2Client& operator=(const RawHttp2Client&) = delete;
  ~RawHttp2Client() { Close(); }

  // Connects to 127.0.0.1:port and sends the preface and SETTINGS; false
  // when the connection or the send fails.
  bool Connect(int port, const Options& options) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return false;
    if (options.receive_buffer > 0 &&
        setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &options.receive_buffer,
                   sizeof(options.receive_buffer)) != 0) {
      return false;
    }
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<const sockaddr*>(&address),
                sizeof(address)) != 0) {
      return false;
    }
    std::string settings;
    if (options.initial_window_size.has_value()) {
      constexpr uint16_t kInitialWindowSize = 0x4;
      PutUint(kInitialWindowSize, 2, settings);
      PutUint(*options.initial_window_size, 4, settings);
    }
    return Send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") &&
           SendFrame(kSettings, 0, 0, settings);
  }

  // Opens a server-streaming call of `path` on the next stream id (1, 3,
  // ...) with one gRPC-framed request message, then half-closes it.
  bool OpenStream(const std::string& path, const std::string& message) {
    const uint32_t id = next_stream_id_;
    next_stream_id_ += 2;
    std::string block;
    for (const auto& [name, value] :
         {std::pair<std::string, std::string>{":method", "POST"},
          {":scheme", "http"},
          {":path", path},
          {":authority", "127.0.0.1"},
          {"content-type", "application/grpc"},
          {"te", "trailers"}}) {
      block.push_back('\0');  // literal without indexing, new name
      PutHpackString(name, block);
      PutHpackString(value, block);
    }
    std::string data(1, '\0');  // not compressed
    PutUint(message.size(), 4, data);
    data += message;
    return SendFrame(kHeaders, kEndHeaders, id, block) &&
           SendFrame(kData, kEndStream, id, data);
  }

  // Reads and handles frames until done() holds, the server closes the
  // connection, or the deadline passes; done() holds at the end.
  bool ReadUntil(const std::function<bool()>& done,
                 Clock::time_point deadline) {
    while (!done()) {
      if (closed_ || fd_ < 0) return false;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - Clock::now());
      if (left.count() <= 0) return false;
      pollfd readable{fd_, POLLIN, 0};
      const int polled = poll(&readable, 1, static_cast<int>(left.count()));
      if (polled < 0 && errno != EINTR) return false;
      if (polled <= 0) continue;
      char chunk[16384];
      const ssize_t got = recv(fd_, chunk, sizeof(chunk), 0);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        closed_ = true;
        continue;
      }
      input_.append(chunk, static_cast<size_t>(got));
      if (!HandleFrames()) return false;
    }
    return true;
  }

  // Streams that got their response headers / that ended.
  size_t streams_with_headers() const { return with_headers_.size(); }
  size_t streams_ended() const { return ended_.size(); }
  // A stream's trailer `name`, if its trailers could be decoded and hold it.
  std::optional<std::string> Trailer(uint32_t stream,
                                     const std::string& name) const {
    auto fields = trailers_.find(stream);
    if (fields == trailers_.end()) return std::nullopt;
    auto field = fields->second.find(name);
    if (field == fields->second.end()) return std::nullopt;
    return field->second;
  }
  // The payload of the server's DATA frames so far.
  uint64_t data_bytes() const { return data_bytes_; }
  // The server closed the connection.
  bool closed() const { return closed_; }
  // A frame the client could not parse, or a send that failed.
  const std::string& error() const { return error_; }

  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  static constexpr uint8_t kData = 0x0;
  static constexpr uint8_t kHeaders = 0x1;
  static constexpr uint8_t kRstStream = 0x3;
  static constexpr uint8_t kSettings = 0x4;
  static constexpr uint8_t kPing = 0x6;
  static constexpr uint8_t kEndStream = 0x1;
  static constexpr uint8_t kAck = 0x1;
  static constexpr uint8_t kEndHeaders = 0x4;
  static constexpr size_t kFrameHeader = 9;

  static void PutUint(uint64_t value, int bytes, std::string& out) {
    for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8) {
      out.push_back(static_cast<char>((value >> shift) & 0xff));
    }
  }

  static uint32_t GetUint(const std::string& in, size_t at, int bytes) {
    uint32_t value = 0;
    for (int i = 0; i < bytes; ++i) {
      value =
          (value << 8) | static_cast<uint8_t>(in[at + static_cast<size_t>(i)]);
    }
    return value;
  }

  // An HPACK string literal, not Huffman coded, shorter than 127 bytes.
  static void PutHpackString(const std::string& text, std::string& out) {
    out.push_back(static_cast<char>(text.size()));
    out += text;
  }

  // An HPACK integer with an n-bit prefix (RFC 7541 section 5.1).
  static std::optional<uint64_t> GetHpackInteger(const std::string& in,
                                                 size_t& at, int prefix_bits) {
    if (at >= in.size()) return std::nullopt;
    const uint64_t max_prefix = (uint64_t{1} << prefix_bits) - 1;
    uint64_t value = static_cast<uint8_t>(in[at++]) & max_prefix;
    if (value < max_prefix) return value;
    for (int shift = 0; shift < 56; shift += 7) {
      if (at >= in.size()) return std::nullopt;
      const auto byte = static_cast<uint8_t>(in[at++]);
      value += uint64_t{byte & 0x7fu} << shift;
      if ((byte & 0x80) == 0) return value;
    }
    return std::nullopt;
  }

  // A string literal not Huffman coded.
  static std::optional<std::string> GetHpackString(const std::string& in,
                                                   size_t& at) {
    if (at >= in.size() || (static_cast<uint8_t>(in[at]) & 0x80) != 0) {
      return std::nullopt;  // Huffman coded
    }
    std::optional<uint64_t> length = GetHpackInteger(in, at, 7);
    if (!length.has_value() || *length > in.size() - at) return std::nullopt;
    std::string text = in.substr(at, *length);
    at += *length;
    return text;
  }

  // A header block made only of literal fields with literal names, without
  // indexing or never indexed (first byte 0x00 or 0x10); nullopt otherwise.
  static std::optional<std::map<std::string, std::string>> DecodeLiterals(
      const std::string& block) {
    std::map<std::string, std::string> fields;
    size_t at = 0;
    while (at < block.size()) {
      const auto first = static_cast<uint8_t>(block[at++]);
      if (first != 0x00 && first != 0x10) return std::nullopt;
      std::optional<std::string> name = GetHpackString(block, at);
      if (!name.has_value()) return std::nullopt;
      std::optional<std::string> value = GetHpackString(block, at);
      if (!value.has_value()) return std::nullopt;
      fields[*name] = *value;
    }
    return fields;
  }

  bool Send(const std::string& bytes) {
    size_t sent = 0;
    while (sent < bytes.size()) {
      const ssize_t n =
          send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        error_ = "send failed, errno " + std::to_string(errno);
        return false;
      }
      sent += static_cast<size_t>(n);
    }
    return true;
  }

  bool SendFrame(uint8_t type, uint8_t flags, uint32_t stream,
                 const std::string& payload) {
    std::string frame;
    PutUint(payload.size(), 3, frame);
    frame.push_back(static_cast<char>(type));
    frame.push_back(static_cast<char>(flags));
    PutUint(stream & 0x7fffffffu, 4, frame);
    frame += payload;
    return Send(frame);
  }

  // Handles the complete frames in input_; false after a send failure.
  bool HandleFrames() {
    size_t at = 0;
    while (input_.size() - at >= kFrameHeader) {
      const uint32_t length = GetUint(input_, at, 3);
      if (input_.size() - at < kFrameHeader + length) break;
      const auto type = static_cast<uint8_t>(input_[at + 3]);
      const auto flags = static_cast<uint8_t>(input_[at + 4]);
      const uint32_t stream = GetUint(input_, at + 5, 4) & 0x7fffffffu;
      const std::string payload = input_.substr(at + kFrameHeader, length);
      at += kFrameHeader + length;
      switch (type) {
        case kData:
          data_bytes_ += length;
          if ((flags & kEndStream) != 0) ended_.insert(stream);
          break;
        case kHeaders:
          with_headers_.insert(stream);
          if ((flags & kEndStream) != 0) {
            ended_.insert(stream);
            std::optional<std::map<std::string, std::string>> fields =
                DecodeLiterals(payload);
            if (fields.has_value()) trailers_[stream] = *std::move(fields);
          }
          break;
        case kRstStream:
          ended_.insert(stream);
          break;
        case kSettings:
          if ((flags & kAck) == 0 && !SendFrame(kSettings, kAck, 0, "")) {
            return false;
          }
          break;
        case kPing:
          if ((flags & kAck) == 0 && !SendFrame(kPing, kAck, 0, payload)) {
            return false;
          }
          break;
        default:  // GOAWAY, WINDOW_UPDATE, ...: nothing to answer
          break;
      }
    }
    input_.erase(0, at);
    return true;
  }

  int fd_ = -1;
  uint32_t next_stream_id_ = 1;
  std::string input_;
  std::set<uint32_t> with_headers_;
  std::set<uint32_t> ended_;
  std::map<uint32_t, std::map<std::string, std::string>> trailers_;
  uint64_t data_bytes_ = 0;
  bool closed_ = false;
  std::string error_;
};

}  // namespace poise::test_support

#endif  // POISE_TEST_SERVER_RAW_HTTP2_CLIENT_H_
