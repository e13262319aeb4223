#include "src/dns/target.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "src/dns/cat_and_split.h"

namespace poise::dns {
namespace {

using internal::Cat;
using internal::Split;

constexpr size_t kMaxNameLength = 253;  // Without the trailing dot.
constexpr size_t kMaxLabelLength = 63;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

std::string Printable(char c) {
  const auto byte = static_cast<unsigned char>(c);
  if (byte >= 0x21 && byte < 0x7f) {
    std::string out(1, c);
    return out;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\\x";
  out.push_back(kHex[byte >> 4]);
  out.push_back(kHex[byte & 0xf]);
  return out;
}

// A decimal port 1..65535 without sign or leading zero, so that the identity
// text, which prints the number, is the text as listed (stricter than
// src/router/config.cc's ParsePortAsGrpcReadsIt, for IP literals gRPC
// parses itself). Empty on success, else the reason.
std::string ParsePortAsListed(std::string_view text, uint16_t* port) {
  if (text.empty()) return "empty port";
  for (const char c : text) {
    if (!IsDigit(c)) {
      return Cat("port \"", text, "\" is not a decimal number");
    }
  }
  if (text.size() > 1 && text[0] == '0') {
    return Cat("port \"", text, "\" has a leading zero");
  }
  if (text.size() > 5) {
    return Cat("port \"", text, "\" is out of range 1..65535");
  }
  uint32_t value = 0;
  for (const char c : text) value = value * 10 + static_cast<uint32_t>(c - '0');
  if (value < 1 || value > 65535) {
    return Cat("port \"", text, "\" is out of range 1..65535");
  }
  *port = static_cast<uint16_t>(value);
  return "";
}

bool IsIpv4Literal(std::string_view text) {
  in_addr addr{};
  const std::string copy(text);
  return inet_pton(AF_INET, copy.c_str(), &addr) == 1;
}

// A DNS name as the resolvers query it: labels of letters, digits, '-' and
// '_' (SRV names start with "_service._proto"), each 1..63 bytes, at most 253
// bytes in all, one optional trailing dot. Empty on success, else the reason.
std::string CheckDnsName(std::string_view name) {
  std::string_view body = name;
  if (!body.empty() && body.back() == '.') body.remove_suffix(1);
  if (body.empty()) return "is not a DNS name";
  if (body.size() > kMaxNameLength) {
    return Cat("is ", body.size(), " bytes long; a DNS name has at most 253");
  }
  size_t index = 0;
  for (const std::string_view label : Split(body, '.')) {
    ++index;
    if (label.empty()) return Cat("label ", index, " is empty");
    if (label.size() > kMaxLabelLength) {
      return Cat("label ", index, " is ", label.size(),
                 " bytes long; a DNS label has at most 63");
    }
    for (const char c : label) {
      const bool ok = IsDigit(c) || (c >= 'a' && c <= 'z') ||
                      (c >= 'A' && c <= 'Z') || c == '-' || c == '_';
      if (!ok) {
        return Cat("character '", Printable(c),
                   "' is not allowed in a DNS name");
      }
    }
  }
  return "";
}

std::string StripTrailingDot(std::string_view name) {
  if (!name.empty() && name.back() == '.') name.remove_suffix(1);
  return std::string(name);
}

absl::Status TargetError(Scheme scheme, std::string_view target_text,
                         std::string_view what) {
  return absl::InvalidArgumentError(
      Cat(SchemeName(scheme), " target \"", target_text, "\": ", what));
}

// One "host:port" of a poise-dns target. Empty on success, else the reason.
std::string ParseNamedBackend(std::string_view part, NamedBackend* out) {
  if (part.front() == '[') {
    return "is an IP address; poise-dns lists DNS host names";
  }
  const size_t colon = part.rfind(':');
  if (colon == std::string_view::npos) return "missing port";
  if (part.find(':') != colon) return "is not host:port";
  const std::string_view host = part.substr(0, colon);
  const std::string_view port_text = part.substr(colon + 1);
  if (host.empty()) return "empty host";
  uint16_t port = 0;
  if (std::string reason = ParsePortAsListed(port_text, &port);
      !reason.empty()) {
    return reason;
  }
  if (IsIpv4Literal(StripTrailingDot(host))) {
    return "is an IP address; poise-dns lists DNS host names";
  }
  if (std::string reason = CheckDnsName(host); !reason.empty()) {
    return Cat("host \"", host, "\" ", reason);
  }
  out->host = AsciiLower(host);
  out->port = port;
  out->identity = Cat(StripTrailingDot(out->host), ":", port_text);
  return "";
}

absl::Status ParseDnsNames(std::string_view path, std::string_view text,
                           Target* out) {
  if (path.empty()) {
    return TargetError(Scheme::kDns, text,
                       "no names (expected host:port[,host:port...])");
  }
  const std::vector<std::string_view> parts = Split(path, ',');
  const size_t n = parts.size();
  // Identity -> its name's index, for one lookup per name (100,000 names
  // are checked in milliseconds; compared pairwise they took seconds).
  std::unordered_map<std::string, size_t> listed;
  listed.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string_view part = parts[i];
    const std::string which = Cat("name ", i + 1, " of ", n);
    if (part.empty()) {
      return TargetError(Scheme::kDns, text, Cat(which, " is empty"));
    }
    NamedBackend backend;
    if (std::string reason = ParseNamedBackend(part, &backend);
        !reason.empty()) {
      return TargetError(Scheme::kDns, text,
                         Cat(which, " \"", part, "\": ", reason));
    }
    if (const auto [it, added] = listed.emplace(backend.identity, i); !added) {
      return TargetError(
          Scheme::kDns, text,
          Cat("names ", it->second + 1, " and ", i + 1,
              " are the same backend \"", backend.identity, "\""));
    }
    out->names.push_back(std::move(backend));
  }
  return absl::OkStatus();
}

absl::Status ParseSrvName(std::string_view path, std::string_view text,
                          Target* out) {
  if (path.empty()) return TargetError(Scheme::kSrv, text, "no SRV name");
  if (const size_t commas =
          static_cast<size_t>(std::count(path.begin(), path.end(), ','));
      commas > 0) {
    return TargetError(Scheme::kSrv, text,
                       Cat("path \"", path, "\" lists ", commas + 1,
                           " names; poise-srv takes one SRV name"));
  }
  if (path.find(':') != std::string_view::npos) {
    return TargetError(Scheme::kSrv, text,
                       Cat("SRV name \"", path,
                           "\" has a port; the SRV records give the ports"));
  }
  if (std::string reason = CheckDnsName(path); !reason.empty()) {
    return TargetError(Scheme::kSrv, text,
                       Cat("SRV name \"", path, "\" ", reason));
  }
  out->srv_name = AsciiLower(path);
  return absl::OkStatus();
}

absl::Status BadAuthority(std::string_view authority, std::string_view reason) {
  return absl::InvalidArgumentError(
      Cat("bad authority \"", authority, "\": ", reason));
}

// "[ipv6]" or "[ipv6]:port": the server's address, and the port's text when
// there is one. Empty on success, else the reason.
std::string ParseBracketedServer(std::string_view authority, DnsServer* server,
                                 std::optional<std::string_view>* port_text) {
  const size_t close = authority.find(']');
  if (close == std::string_view::npos) return "missing ']'";
  const std::string_view host = authority.substr(1, close - 1);
  const std::string_view rest = authority.substr(close + 1);
  if (!rest.empty()) {
    if (rest.front() != ':') {
      return Cat("unexpected \"", rest, "\" after ']'");
    }
    *port_text = rest.substr(1);
  }
  in6_addr addr{};
  const std::string copy(host);
  if (inet_pton(AF_INET6, copy.c_str(), &addr) != 1) {
    return Cat("\"", host, "\" is not an IPv6 address");
  }
  char buffer[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, &addr, buffer, sizeof(buffer));
  server->family = IpFamily::kIpv6;
  server->ip = buffer;
  return "";
}

// "ipv4" or "ipv4:port": the server's address, and the port's text when
// there is one. Empty on success, else the reason.
std::string ParsePlainServer(std::string_view authority, DnsServer* server,
                             std::optional<std::string_view>* port_text) {
  const size_t colon = authority.find(':');
  if (colon != std::string_view::npos &&
      authority.find(':', colon + 1) != std::string_view::npos) {
    return "an IPv6 address must be in brackets, as in [::1]:53";
  }
  const std::string_view host = authority.substr(0, colon);
  if (colon != std::string_view::npos) *port_text = authority.substr(colon + 1);
  in_addr addr{};
  const std::string copy(host);
  if (host.empty() || inet_pton(AF_INET, copy.c_str(), &addr) != 1) {
    return Cat("host \"", host,
               "\" is not an IPv4 address or a bracketed IPv6 "
               "address (name the DNS server by its address)");
  }
  char buffer[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &addr, buffer, sizeof(buffer));
  server->family = IpFamily::kIpv4;
  server->ip = buffer;
  return "";
}

}  // namespace

std::string_view SchemeName(Scheme scheme) {
  return scheme == Scheme::kDns ? kDnsScheme : kSrvScheme;
}

std::string DnsServer::ToString() const {
  return family == IpFamily::kIpv6 ? Cat("[", ip, "]:", port)
                                   : Cat(ip, ":", port);
}

std::string AsciiLower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string SrvIdentity(std::string_view target, uint16_t port) {
  return Cat(StripTrailingDot(AsciiLower(target)), ":", port);
}

std::string DefaultAuthority(const Target& target) {
  if (target.scheme == Scheme::kDns) return target.names.front().identity;
  std::string_view name = target.srv_name;
  // "_service._proto." labels name the service's protocol, not its host.
  for (int label = 0; label < 2 && !name.empty() && name.front() == '_';
       ++label) {
    const size_t dot = name.find('.');
    if (dot == std::string_view::npos) break;
    name.remove_prefix(dot + 1);
  }
  return StripTrailingDot(name);
}

absl::StatusOr<DnsServer> ParseDnsServer(std::string_view authority) {
  if (authority.empty()) return BadAuthority(authority, "empty");
  DnsServer server;
  std::optional<std::string_view> port_text;
  std::string reason =
      authority.front() == '['
          ? ParseBracketedServer(authority, &server, &port_text)
          : ParsePlainServer(authority, &server, &port_text);
  if (reason.empty() && port_text.has_value()) {
    reason = ParsePortAsListed(*port_text, &server.port);
  }
  if (!reason.empty()) return BadAuthority(authority, reason);
  return server;
}

absl::StatusOr<Target> ParseTargetParts(Scheme scheme,
                                        std::string_view authority,
                                        std::string_view path,
                                        std::string_view target_text) {
  Target target;
  target.scheme = scheme;
  if (!authority.empty()) {
    absl::StatusOr<DnsServer> server = ParseDnsServer(authority);
    if (!server.ok()) {
      const absl::string_view reason = server.status().message();
      return TargetError(scheme, target_text,
                         std::string_view(reason.data(), reason.size()));
    }
    target.server = *std::move(server);
  }
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  absl::Status status = scheme == Scheme::kDns
                            ? ParseDnsNames(path, target_text, &target)
                            : ParseSrvName(path, target_text, &target);
  if (!status.ok()) return status;
  return target;
}

absl::StatusOr<Target> ParseTarget(std::string_view target) {
  const size_t colon = target.find(':');
  const std::string_view scheme_text = colon == std::string_view::npos
                                           ? std::string_view()
                                           : target.substr(0, colon);
  Scheme scheme;
  if (scheme_text == kDnsScheme) {
    scheme = Scheme::kDns;
  } else if (scheme_text == kSrvScheme) {
    scheme = Scheme::kSrv;
  } else {
    return absl::InvalidArgumentError(Cat("target \"", target, "\": scheme \"",
                                          scheme_text,
                                          "\" is not poise-dns or poise-srv"));
  }
  std::string_view rest = target.substr(colon + 1);
  if (const size_t extra = rest.find_first_of("?#");
      extra != std::string_view::npos) {
    return TargetError(scheme, target,
                       Cat("\"", rest.substr(extra),
                           "\": a query or fragment is not allowed"));
  }
  std::string_view authority;
  if (rest.substr(0, 2) == "//") {
    rest.remove_prefix(2);
    const size_t slash = rest.find('/');
    authority = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view()
                                           : rest.substr(slash);
  }
  return ParseTargetParts(scheme, authority, rest, target);
}

}  // namespace poise::dns
