// Targets of the poise-dns and poise-srv resolvers: parsing, validation and
// the backend identities they give. Pure functions, no gRPC, no I/O: the
// resolvers call them when a channel is created, and
// poise::grpc_lb::ValidateTarget() before one is.
//
//   poise-dns:[//[server]/]host:port[,host:port...]
//     Each listed name is resolved (A and AAAA); its addresses get the
//     identity "host:port" as listed, host lower-cased, a trailing dot
//     dropped ("Host-A.Example.:8443" -> "host-a.example:8443").
//   poise-srv:[//[server]/]srv-name
//     One SRV name; each SRV record's target gets the identity
//     "target:port" (SrvIdentity()).
//
// server is the DNS server to ask: an IPv4 address or a bracketed IPv6
// address, optionally ":port" (default 53), as in gRPC's dns: resolver. An
// empty authority ("poise-dns:///...") or none ("poise-dns:...") means the
// system's resolver configuration.
//
// Every error is INVALID_ARGUMENT and names the scheme, quotes the whole
// target and then the part at fault, e.g.
//   poise-dns target "poise-dns:///a:1,,b:2": name 2 of 3 is empty
#ifndef POISE_DNS_TARGET_H_
#define POISE_DNS_TARGET_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace poise::dns {

inline constexpr std::string_view kDnsScheme = "poise-dns";
inline constexpr std::string_view kSrvScheme = "poise-srv";
inline constexpr uint16_t kDefaultDnsPort = 53;

enum class Scheme { kDns, kSrv };

enum class IpFamily { kIpv4, kIpv6 };

// "poise-dns" or "poise-srv".
std::string_view SchemeName(Scheme scheme);

// A DNS server named by a target's authority.
struct DnsServer {
  IpFamily family = IpFamily::kIpv4;
  std::string ip;  // Canonical text without brackets: "127.0.0.1", "::1".
  uint16_t port = kDefaultDnsPort;

  // "127.0.0.1:5353", "[::1]:53".
  std::string ToString() const;
  friend bool operator==(const DnsServer& a, const DnsServer& b) {
    return a.family == b.family && a.ip == b.ip && a.port == b.port;
  }
};

// One name listed in a poise-dns target.
struct NamedBackend {
  std::string host;      // Lower-cased, as queried (a trailing dot is kept).
  uint16_t port = 0;     // 1..65535.
  std::string identity;  // "host:port", host without a trailing dot.
  friend bool operator==(const NamedBackend& a, const NamedBackend& b) {
    return a.host == b.host && a.port == b.port && a.identity == b.identity;
  }
};

struct Target {
  Scheme scheme = Scheme::kDns;
  // The authority's server; nullopt: the system's resolver configuration.
  std::optional<DnsServer> server;
  // poise-dns: the listed names, in the order listed (never empty).
  std::vector<NamedBackend> names;
  // poise-srv: the SRV name, lower-cased (empty for poise-dns).
  std::string srv_name;
};

// Parses a whole target, "poise-dns://127.0.0.1:5353/a.example:1,b:2", split
// by a plain RFC 3986 reading without percent-decoding, and refusing a query
// or fragment: for tests and tools without gRPC. Channels, and
// poise::grpc_lb::ValidateTarget, split with gRPC's URI parser and call
// ParseTargetParts.
absl::StatusOr<Target> ParseTarget(std::string_view target);

// Parses a target already split into parts, as a resolver receives it from
// gRPC's URI parser. path may start with '/' (gRPC keeps it: "/a:1,b:2").
// target_text is only quoted in error messages.
absl::StatusOr<Target> ParseTargetParts(Scheme scheme,
                                        std::string_view authority,
                                        std::string_view path,
                                        std::string_view target_text);

// Parses an authority: "127.0.0.1", "127.0.0.1:5353", "[::1]", "[::1]:53".
// Errors read: bad authority "x:y": <reason>.
absl::StatusOr<DnsServer> ParseDnsServer(std::string_view authority);

// The identity of an SRV target: "target:port", target lower-cased and
// without its trailing dot ("Web-0.Web.Test." , 8443 -> "web-0.web.test:8443").
// The target must not be empty.
std::string SrvIdentity(std::string_view target, uint16_t port);

// The channel's default authority (its :authority and the name a TLS
// certificate is checked against, unless grpc.default_authority or
// grpc.ssl_target_name_override is set):
//   poise-srv: the service's name, the SRV name without its leading
//     "_service._proto" labels ("_grpc._tcp.cache.default.svc" ->
//     "cache.default.svc");
//   poise-dns: the first listed backend's identity, "host:port"
//     ("web-0.web.default.svc:8443"): every pod's certificate must carry
//     that name, so a StatefulSet's certificates carry a wildcard of its
//     Service's domain ("*.web.default.svc") or the channel sets the
//     authority (docs/dns.md, TLS).
std::string DefaultAuthority(const Target& target);

// Lower-cases ASCII letters (DNS names compare case-insensitively).
std::string AsciiLower(std::string_view text);

}  // namespace poise::dns

#endif  // POISE_DNS_TARGET_H_
