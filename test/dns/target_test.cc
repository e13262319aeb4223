// Target parsing: the identities each target gives, and an error message
// naming the part at fault for every way a target can be wrong.
#include "src/dns/target.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

namespace poise::dns {
namespace {

std::string Message(const absl::Status& status) {
  const absl::string_view message = status.message();
  return {message.data(), message.size()};
}

// The whole message of a target's error (and that it is INVALID_ARGUMENT).
std::string ErrorOf(std::string_view target) {
  const absl::StatusOr<Target> parsed = ParseTarget(target);
  EXPECT_FALSE(parsed.ok()) << target;
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  return Message(parsed.status());
}

std::vector<std::string> Identities(const Target& target) {
  std::vector<std::string> out;
  for (const NamedBackend& name : target.names) out.push_back(name.identity);
  return out;
}

TEST(ParseTarget, DnsNamesGiveLowerCasedHostPortIdentities) {
  const absl::StatusOr<Target> target =
      ParseTarget("poise-dns:///Host-A.Example:8443,host-b.example:8443");
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->scheme, Scheme::kDns);
  EXPECT_FALSE(target->server.has_value());
  EXPECT_TRUE(target->srv_name.empty());
  EXPECT_EQ(target->names,
            (std::vector<NamedBackend>{
                {"host-a.example", 8443, "host-a.example:8443"},
                {"host-b.example", 8443, "host-b.example:8443"}}));
}

TEST(ParseTarget, DnsTrailingDotIsQueriedButNotPartOfTheIdentity) {
  const absl::StatusOr<Target> target =
      ParseTarget("poise-dns:///Web-0.Web.Test.:8443,web-1.web.test:8443");
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->names[0].host, "web-0.web.test.");
  EXPECT_EQ(
      Identities(*target),
      (std::vector<std::string>{"web-0.web.test:8443", "web-1.web.test:8443"}));
}

TEST(ParseTarget, PathWithoutSlashesAndSingleLabelNames) {
  const absl::StatusOr<Target> target = ParseTarget("poise-dns:web-0:80");
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(Identities(*target), std::vector<std::string>{"web-0:80"});
  EXPECT_FALSE(target->server.has_value());
}

TEST(ParseTarget, AuthorityNamesTheDnsServer) {
  const absl::StatusOr<Target> v4 =
      ParseTarget("poise-srv://127.0.0.1:5353/_grpc._tcp.web.test");
  ASSERT_TRUE(v4.ok()) << v4.status();
  ASSERT_TRUE(v4->server.has_value());
  EXPECT_EQ(v4->server->family, IpFamily::kIpv4);
  EXPECT_EQ(v4->server->ip, "127.0.0.1");
  EXPECT_EQ(v4->server->port, 5353);
  EXPECT_EQ(v4->server->ToString(), "127.0.0.1:5353");

  const absl::StatusOr<Target> default_port =
      ParseTarget("poise-dns://127.0.0.1/a:1");
  ASSERT_TRUE(default_port.ok()) << default_port.status();
  EXPECT_EQ(default_port->server->port, kDefaultDnsPort);
  EXPECT_EQ(default_port->server->ToString(), "127.0.0.1:53");

  const absl::StatusOr<Target> v6 = ParseTarget("poise-dns://[0:0::1]:53/a:1");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->server->family, IpFamily::kIpv6);
  EXPECT_EQ(v6->server->ip, "::1");  // Canonical text.
  EXPECT_EQ(v6->server->ToString(), "[::1]:53");

  const absl::StatusOr<Target> v6_default =
      ParseTarget("poise-dns://[::1]/a:1");
  ASSERT_TRUE(v6_default.ok()) << v6_default.status();
  EXPECT_EQ(v6_default->server->port, 53);
}

TEST(ParseTarget, SrvNameIsLowerCased) {
  const absl::StatusOr<Target> target =
      ParseTarget("poise-srv:///_grpc._tcp.Web.Default.svc.cluster.local");
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(target->scheme, Scheme::kSrv);
  EXPECT_EQ(target->srv_name, "_grpc._tcp.web.default.svc.cluster.local");
  EXPECT_TRUE(target->names.empty());
  EXPECT_FALSE(target->server.has_value());
}

TEST(ParseTargetParts, AcceptsGrpcsSplitWithLeadingSlash) {
  const absl::StatusOr<Target> target = ParseTargetParts(
      Scheme::kDns, "127.0.0.1:5353", "/a.test:1,b.test:2", "the target");
  ASSERT_TRUE(target.ok()) << target.status();
  EXPECT_EQ(Identities(*target),
            (std::vector<std::string>{"a.test:1", "b.test:2"}));
  EXPECT_EQ(target->server->port, 5353);
  const absl::StatusOr<Target> bad =
      ParseTargetParts(Scheme::kSrv, "", "/", "poise-srv:///");
  EXPECT_EQ(Message(bad.status()),
            "poise-srv target \"poise-srv:///\": no SRV name");
}

TEST(DefaultAuthority, TheServiceNameOrTheFirstBackend) {
  const auto authority = [](std::string_view text) {
    const absl::StatusOr<Target> target = ParseTarget(text);
    EXPECT_TRUE(target.ok()) << text;
    return target.ok() ? DefaultAuthority(*target) : std::string();
  };
  EXPECT_EQ(
      authority("poise-srv:///_grpc._tcp.Cache.Default.svc.cluster.local."),
      "cache.default.svc.cluster.local");
  EXPECT_EQ(authority("poise-srv://127.0.0.1:53/_grpc._tcp.web.test"),
            "web.test");
  EXPECT_EQ(authority("poise-srv:///_http.web.test"), "web.test");
  EXPECT_EQ(authority("poise-srv:///web.test"), "web.test");
  EXPECT_EQ(authority("poise-dns:///Web-0.Web.Test.:8443,web-1.web.test:8443"),
            "web-0.web.test:8443");
}

TEST(SrvIdentity, LowerCaseWithoutTrailingDotDecimalPort) {
  EXPECT_EQ(SrvIdentity("Web-0.Web.Default.svc.cluster.local.", 8443),
            "web-0.web.default.svc.cluster.local:8443");
  EXPECT_EQ(SrvIdentity("web-1.web.test", 80), "web-1.web.test:80");
  EXPECT_EQ(SrvIdentity("a.test", 65535), "a.test:65535");
}

TEST(ParseTargetErrors, EmptyName) {
  EXPECT_EQ(ErrorOf("poise-dns:///a:1,,b:2"),
            "poise-dns target \"poise-dns:///a:1,,b:2\": name 2 of 3 is "
            "empty");
  EXPECT_EQ(ErrorOf("poise-dns:///a:1,"),
            "poise-dns target \"poise-dns:///a:1,\": name 2 of 2 is empty");
  EXPECT_EQ(ErrorOf("poise-dns:///"),
            "poise-dns target \"poise-dns:///\": no names (expected "
            "host:port[,host:port...])");
  EXPECT_EQ(ErrorOf("poise-dns://127.0.0.1"),
            "poise-dns target \"poise-dns://127.0.0.1\": no names (expected "
            "host:port[,host:port...])");
}

TEST(ParseTargetErrors, Ports) {
  EXPECT_EQ(ErrorOf("poise-dns:///host-a.example"),
            "poise-dns target \"poise-dns:///host-a.example\": name 1 of 1 "
            "\"host-a.example\": missing port");
  EXPECT_EQ(ErrorOf("poise-dns:///a:1,b"),
            "poise-dns target \"poise-dns:///a:1,b\": name 2 of 2 \"b\": "
            "missing port");
  EXPECT_EQ(ErrorOf("poise-dns:///a:"),
            "poise-dns target \"poise-dns:///a:\": name 1 of 1 \"a:\": empty "
            "port");
  EXPECT_EQ(ErrorOf("poise-dns:///a:http"),
            "poise-dns target \"poise-dns:///a:http\": name 1 of 1 "
            "\"a:http\": port \"http\" is not a decimal number");
  EXPECT_EQ(ErrorOf("poise-dns:///a:+1"),
            "poise-dns target \"poise-dns:///a:+1\": name 1 of 1 \"a:+1\": "
            "port \"+1\" is not a decimal number");
  EXPECT_EQ(ErrorOf("poise-dns:///a:0"),
            "poise-dns target \"poise-dns:///a:0\": name 1 of 1 \"a:0\": "
            "port \"0\" is out of range 1..65535");
  EXPECT_EQ(ErrorOf("poise-dns:///a:65536"),
            "poise-dns target \"poise-dns:///a:65536\": name 1 of 1 "
            "\"a:65536\": port \"65536\" is out of range 1..65535");
  EXPECT_EQ(ErrorOf("poise-dns:///a:1000000"),
            "poise-dns target \"poise-dns:///a:1000000\": name 1 of 1 "
            "\"a:1000000\": port \"1000000\" is out of range 1..65535");
  EXPECT_EQ(ErrorOf("poise-dns:///a:08443"),
            "poise-dns target \"poise-dns:///a:08443\": name 1 of 1 "
            "\"a:08443\": port \"08443\" has a leading zero");
  EXPECT_TRUE(ParseTarget("poise-dns:///a:65535").ok());
  EXPECT_TRUE(ParseTarget("poise-dns:///a:1").ok());
}

TEST(ParseTargetErrors, Hosts) {
  EXPECT_EQ(ErrorOf("poise-dns:///:80"),
            "poise-dns target \"poise-dns:///:80\": name 1 of 1 \":80\": "
            "empty host");
  EXPECT_EQ(ErrorOf("poise-dns:///a:1:2"),
            "poise-dns target \"poise-dns:///a:1:2\": name 1 of 1 \"a:1:2\": "
            "is not host:port");
  EXPECT_EQ(ErrorOf("poise-dns:///a..b:1"),
            "poise-dns target \"poise-dns:///a..b:1\": name 1 of 1 "
            "\"a..b:1\": host \"a..b\" label 2 is empty");
  EXPECT_EQ(ErrorOf("poise-dns:///.a:1"),
            "poise-dns target \"poise-dns:///.a:1\": name 1 of 1 \".a:1\": "
            "host \".a\" label 1 is empty");
  EXPECT_EQ(ErrorOf("poise-dns:///a b:1"),
            "poise-dns target \"poise-dns:///a b:1\": name 1 of 1 \"a b:1\": "
            "host \"a b\" character '\\x20' is not allowed in a DNS name");
  EXPECT_EQ(ErrorOf("poise-dns:///a%41:1"),
            "poise-dns target \"poise-dns:///a%41:1\": name 1 of 1 "
            "\"a%41:1\": host \"a%41\" character '%' is not allowed in a DNS "
            "name");
  const std::string label64(64, 'x');
  EXPECT_EQ(ErrorOf("poise-dns:///a." + label64 + ":1"),
            "poise-dns target \"poise-dns:///a." + label64 +
                ":1\": name 1 of 1 \"a." + label64 + ":1\": host \"a." +
                label64 +
                "\" label 2 is 64 bytes long; a DNS label has at "
                "most 63");
  std::string long_name;
  for (int i = 0; i < 64; ++i) long_name += "abc.";
  long_name.pop_back();  // 255 bytes.
  EXPECT_NE(ErrorOf("poise-dns:///" + long_name + ":1")
                .find("is 255 bytes long; a DNS name has at most 253"),
            std::string::npos);
  EXPECT_EQ(ErrorOf("poise-dns:///127.0.0.1:80"),
            "poise-dns target \"poise-dns:///127.0.0.1:80\": name 1 of 1 "
            "\"127.0.0.1:80\": is an IP address; poise-dns lists DNS host "
            "names");
  EXPECT_EQ(ErrorOf("poise-dns:///[::1]:80"),
            "poise-dns target \"poise-dns:///[::1]:80\": name 1 of 1 "
            "\"[::1]:80\": is an IP address; poise-dns lists DNS host names");
  EXPECT_EQ(ErrorOf("poise-dns:///.:80"),
            "poise-dns target \"poise-dns:///.:80\": name 1 of 1 \".:80\": "
            "host \".\" is not a DNS name");
}

TEST(ParseTargetErrors, SameBackendListedTwice) {
  EXPECT_EQ(ErrorOf("poise-dns:///a.test:1,b.test:1,A.Test.:1"),
            "poise-dns target \"poise-dns:///a.test:1,b.test:1,A.Test.:1\": "
            "names 1 and 3 are the same backend \"a.test:1\"");
  EXPECT_TRUE(ParseTarget("poise-dns:///a.test:1,a.test:2").ok());
}

// 100,000 names, each looked up once: the last one repeats the 50,000th.
TEST(ParseTargetErrors, SameBackendFoundAmongManyNames) {
  std::string path;
  for (int i = 0; i < 100000; ++i) {
    path += (i ? "," : "") + std::string("n") + std::to_string(i) + ".test:1";
  }
  const absl::StatusOr<Target> all =
      ParseTargetParts(Scheme::kDns, "", path, "many");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->names.size(), 100000u);
  EXPECT_EQ(Message(ParseTargetParts(Scheme::kDns, "", path + ",N49999.test.:1",
                                     "many")
                        .status()),
            "poise-dns target \"many\": names 50000 and 100001 are the same "
            "backend \"n49999.test:1\"");
}

TEST(ParseTargetErrors, Authority) {
  EXPECT_EQ(ErrorOf("poise-srv://x:y/_grpc._tcp.web.test"),
            "poise-srv target \"poise-srv://x:y/_grpc._tcp.web.test\": bad "
            "authority \"x:y\": host \"x\" is not an IPv4 address or a "
            "bracketed IPv6 address (name the DNS server by its address)");
  EXPECT_EQ(ErrorOf("poise-srv://127.0.0.1:y/_a._tcp.test"),
            "poise-srv target \"poise-srv://127.0.0.1:y/_a._tcp.test\": bad "
            "authority \"127.0.0.1:y\": port \"y\" is not a decimal number");
  EXPECT_EQ(ErrorOf("poise-dns://127.0.0.1:/a:1"),
            "poise-dns target \"poise-dns://127.0.0.1:/a:1\": bad authority "
            "\"127.0.0.1:\": empty port");
  EXPECT_EQ(ErrorOf("poise-dns://127.0.0.1:70000/a:1"),
            "poise-dns target \"poise-dns://127.0.0.1:70000/a:1\": bad "
            "authority \"127.0.0.1:70000\": port \"70000\" is out of range "
            "1..65535");
  EXPECT_EQ(ErrorOf("poise-dns://dns.example:53/a:1"),
            "poise-dns target \"poise-dns://dns.example:53/a:1\": bad "
            "authority \"dns.example:53\": host \"dns.example\" is not an "
            "IPv4 address or a bracketed IPv6 address (name the DNS server by "
            "its address)");
  EXPECT_EQ(ErrorOf("poise-dns://:53/a:1"),
            "poise-dns target \"poise-dns://:53/a:1\": bad authority \":53\": "
            "host \"\" is not an IPv4 address or a bracketed IPv6 address "
            "(name the DNS server by its address)");
  EXPECT_EQ(ErrorOf("poise-dns://::1/a:1"),
            "poise-dns target \"poise-dns://::1/a:1\": bad authority \"::1\": "
            "an IPv6 address must be in brackets, as in [::1]:53");
  EXPECT_EQ(ErrorOf("poise-dns://[::1/a:1"),
            "poise-dns target \"poise-dns://[::1/a:1\": bad authority "
            "\"[::1\": missing ']'");
  EXPECT_EQ(ErrorOf("poise-dns://[::1]53/a:1"),
            "poise-dns target \"poise-dns://[::1]53/a:1\": bad authority "
            "\"[::1]53\": unexpected \"53\" after ']'");
  EXPECT_EQ(ErrorOf("poise-dns://[127.0.0.1]/a:1"),
            "poise-dns target \"poise-dns://[127.0.0.1]/a:1\": bad authority "
            "\"[127.0.0.1]\": \"127.0.0.1\" is not an IPv6 address");
  EXPECT_EQ(ErrorOf("poise-dns://[fe80::1%eth0]/a:1"),
            "poise-dns target \"poise-dns://[fe80::1%eth0]/a:1\": bad "
            "authority \"[fe80::1%eth0]\": \"fe80::1%eth0\" is not an IPv6 "
            "address");
}

TEST(ParseDnsServer, StandsAlone) {
  const absl::StatusOr<DnsServer> server = ParseDnsServer("127.0.0.1:5353");
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(*server, (DnsServer{IpFamily::kIpv4, "127.0.0.1", 5353}));
  EXPECT_EQ(Message(ParseDnsServer("").status()), "bad authority \"\": empty");
  EXPECT_EQ(Message(ParseDnsServer("1.2.3").status()),
            "bad authority \"1.2.3\": host \"1.2.3\" is not an IPv4 address "
            "or a bracketed IPv6 address (name the DNS server by its "
            "address)");
}

TEST(ParseTargetErrors, SrvName) {
  EXPECT_EQ(ErrorOf("poise-srv:///"),
            "poise-srv target \"poise-srv:///\": no SRV name");
  EXPECT_EQ(ErrorOf("poise-srv:"),
            "poise-srv target \"poise-srv:\": no SRV "
            "name");
  EXPECT_EQ(ErrorOf("poise-srv:///_a._tcp.test,_b._tcp.test"),
            "poise-srv target \"poise-srv:///_a._tcp.test,_b._tcp.test\": "
            "path \"_a._tcp.test,_b._tcp.test\" lists 2 names; poise-srv "
            "takes one SRV name");
  EXPECT_EQ(ErrorOf("poise-srv:///_grpc._tcp.web.test:443"),
            "poise-srv target \"poise-srv:///_grpc._tcp.web.test:443\": SRV "
            "name \"_grpc._tcp.web.test:443\" has a port; the SRV records give "
            "the ports");
  EXPECT_EQ(ErrorOf("poise-srv:///_grpc.._tcp.test"),
            "poise-srv target \"poise-srv:///_grpc.._tcp.test\": SRV name "
            "\"_grpc.._tcp.test\" label 2 is empty");
}

TEST(ParseTargetErrors, SchemeQueryAndFragment) {
  EXPECT_EQ(ErrorOf("dns:///a:1"),
            "target \"dns:///a:1\": scheme \"dns\" is not poise-dns or "
            "poise-srv");
  EXPECT_EQ(ErrorOf("a.example:1"),
            "target \"a.example:1\": scheme \"a.example\" is not poise-dns or "
            "poise-srv");
  EXPECT_EQ(ErrorOf("no-colon"),
            "target \"no-colon\": scheme \"\" is not poise-dns or poise-srv");
  EXPECT_EQ(ErrorOf("POISE-DNS:///a:1"),
            "target \"POISE-DNS:///a:1\": scheme \"POISE-DNS\" is not "
            "poise-dns or poise-srv");
  EXPECT_EQ(ErrorOf("poise-dns:///a:1?x=1"),
            "poise-dns target \"poise-dns:///a:1?x=1\": \"?x=1\": a query or "
            "fragment is not allowed");
  EXPECT_EQ(ErrorOf("poise-srv:///_a._tcp.test#f"),
            "poise-srv target \"poise-srv:///_a._tcp.test#f\": \"#f\": a "
            "query or fragment is not allowed");
}

}  // namespace
}  // namespace poise::dns
