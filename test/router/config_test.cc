// The config's rules C1-C8 (src/router/config.h): every rule names its field,
// addresses are normalised before they are compared, and no rule bounds the
// weights' sum.
#include "src/router/config.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "test/router/router_test_util.h"

namespace poise::router {
namespace {

using test::AddressOf;
using test::ValidConfig;

TEST(RouterConfig, AValidConfigHasNoErrors) {
  Config config = ValidConfig(/*bounded=*/true);
  config.balance_factor_percent = 100;
  config.default_weight = 2;
  config.max_in_flight_per_backend = 1;
  config.endpoints = {{"10.0.0.1:80", 3, "a"}, {"[2001:db8::1]:80", {}, {}}};
  EXPECT_TRUE(NormalizeAndValidate(config).empty());
  EXPECT_TRUE(config.tracks_load());
  EXPECT_FALSE(ValidConfig().tracks_load());
}

struct RuleCase {
  const char* name;
  std::function<void(Config&)> change;
  ConfigError expected;
};

// What ctest and gtest print for a case: its name, not its bytes.
void PrintTo(const RuleCase& c, std::ostream* os) { *os << c.name; }

class RouterConfigRule : public ::testing::TestWithParam<RuleCase> {};

// Each broken rule alone gives exactly one error, on its field, with the
// message gRPC's parse reports (test/grpc checks the same strings end to
// end).
TEST_P(RouterConfigRule, NamesItsField) {
  Config config = ValidConfig(/*bounded=*/true);
  GetParam().change(config);
  EXPECT_EQ(NormalizeAndValidate(config),
            std::vector<ConfigError>{GetParam().expected});
}

constexpr char kMetricRule[] =
    "must be 1 to 64 printable ASCII characters without spaces (an "
    "OrcaLoadReport.utilization key, like \"rif\")";
constexpr char kAgeRule[] =
    "must be longer than outOfBandInterval (else every report expires before "
    "the next)";

const RuleCase kRuleCases[] = {
    {"UpperCaseHeader",
     [](Config& c) { c.hash_header = "X-Session"; },
     {"hashHeader",
      "must be a lower-case metadata key of characters [0-9a-z_.-]"}},
    {"EmptyHeader",
     [](Config& c) { c.hash_header = ""; },
     {"hashHeader",
      "must be a lower-case metadata key of characters [0-9a-z_.-]"}},
    {"ReservedHeader",
     [](Config& c) { c.hash_header = "grpc-timeout"; },
     {"hashHeader", "keys starting with \"grpc-\" are reserved by gRPC"}},
    {"UserAgentHeader",
     [](Config& c) { c.hash_header = "user-agent"; },
     {"hashHeader",
      "\"user-agent\" is not visible to the pick: gRPC's transport sets it "
      "after the pick"}},
    {"TeHeader",
     [](Config& c) { c.hash_header = "te"; },
     {"hashHeader",
      "\"te\" is not visible to the pick: gRPC's transport sets it after "
      "the pick"}},
    {"LoadReportHeader",
     [](Config& c) { c.hash_header = "endpoint-load-metrics-bin"; },
     {"hashHeader",
      "\"endpoint-load-metrics-bin\" is not visible to the pick: it is the "
      "backends' ORCA load report"}},
    {"SmallFactor",
     [](Config& c) { c.balance_factor_percent = 99; },
     {"balanceFactorPercent",
      "must be at least 100 (a smaller factor can leave no backend with "
      "room)"}},
    {"ZeroDefaultWeight",
     [](Config& c) { c.default_weight = 0; },
     {"defaultWeight", "must be at least 1"}},
    {"ZeroLimit",
     [](Config& c) { c.max_in_flight_per_backend = 0; },
     {"maxInFlightPerBackend", "must be at least 1 (omit it for no limit)"}},
    {"HostName",
     [](Config& c) {
       c.endpoints = {{"db.local:80", {}, {}}};
     },
     {"endpoints[0].address",
      "must be an IP literal with a port, like 10.0.0.7:8443 or "
      "[2001:db8::7]:8443"}},
    {"NeitherAddressNorIdentity",
     [](Config& c) {
       c.endpoints = {{"10.0.0.1:80", {}, {}}, {std::nullopt, 2, {}}};
     },
     {"endpoints[1].address",
      "missing: an entry needs an address (an IP literal with a port) or an "
      "identity (matched against the resolver's identities, like a poise-dns "
      "host:port)"}},
    {"IdentityOnlyTwice",
     [](Config& c) {
       c.endpoints = {{std::nullopt, 2, "a.test:1"},
                      {std::nullopt, 3, "a.test:1"}};
     },
     {"endpoints[1].identity",
      "identity \"a.test:1\" is also used by endpoints[0]"}},
    {"ZeroWeight",
     [](Config& c) {
       c.endpoints = {{"10.0.0.1:80", {}, {}}, {"10.0.0.2:80", 0, {}}};
     },
     {"endpoints[1].weight", "must be at least 1"}},
    {"EmptyIdentity",
     [](Config& c) {
       c.endpoints = {{"10.0.0.1:80", {}, ""}};
     },
     {"endpoints[0].identity",
      "must not be empty (omit it to hash the address)"}},
    {"DuplicateAddress",
     [](Config& c) {
       c.endpoints = {{"10.0.0.1:80", {}, "a"}, {"10.0.0.1:80", {}, "b"}};
     },
     {"endpoints[1].address", "duplicate of endpoints[0]"}},
    {"DuplicateIdentity",
     [](Config& c) {
       c.endpoints = {{"10.0.0.1:80", {}, "a"}, {"10.0.0.2:80", {}, "a"}};
     },
     {"endpoints[1].identity", "identity \"a\" is also used by endpoints[0]"}},
    {"IdentityEqualToAnotherAddress",
     [](Config& c) {
       c.endpoints = {{"10.0.0.1:80", {}, {}},
                      {"10.0.0.2:80", {}, "10.0.0.1:80"}};
     },
     {"endpoints[1].identity",
      "identity \"10.0.0.1:80\" is also used by endpoints[0]"}},
    // C8. serverLoad (on the bounded policy: ValidConfig(true) above).
    {"ServerLoadEmptyMetric",
     [](Config& c) {
       c.server_load = ServerLoadConfig();
       c.server_load->metric = "";
     },
     {"serverLoad.metric", kMetricRule}},
    {"ServerLoadLongMetric",
     [](Config& c) {
       c.server_load = ServerLoadConfig();
       c.server_load->metric = std::string(65, 'a');
     },
     {"serverLoad.metric", kMetricRule}},
    {"ServerLoadMetricWithSpace",
     [](Config& c) {
       c.server_load = ServerLoadConfig();
       c.server_load->metric = "calls in flight";
     },
     {"serverLoad.metric", kMetricRule}},
    {"ServerLoadMetricNotAscii",
     [](Config& c) {
       c.server_load = ServerLoadConfig();
       c.server_load->metric =
           "r\xc3\xaf"
           "f";  // "rïf"
     },
     {"serverLoad.metric", kMetricRule}},
    {"ServerLoadMetricControl",
     [](Config& c) {
       c.server_load = ServerLoadConfig();
       c.server_load->metric = "rif\t";
     },
     {"serverLoad.metric", kMetricRule}},
    {"ServerLoadInterval9ms",
     [](Config& c) {
       c.server_load = ServerLoadConfig();
       c.server_load->out_of_band_interval = absl::Milliseconds(9);
     },
     {"serverLoad.outOfBandInterval", kOutOfBandIntervalRule}},
    {"ServerLoadIntervalNegative",
     [](Config& c) {
       c.server_load = ServerLoadConfig();
       c.server_load->out_of_band_interval = -absl::Milliseconds(100);
     },
     {"serverLoad.outOfBandInterval", kOutOfBandIntervalRule}},
    {"ServerLoadIntervalPastAnHour",
     [](Config& c) {
       c.server_load = ServerLoadConfig();
       c.server_load->out_of_band_interval =
           absl::Hours(1) + absl::Milliseconds(1);
       c.server_load->max_report_age = absl::Hours(1);
     },
     {"serverLoad.outOfBandInterval", kOutOfBandIntervalRule}},
    {"ServerLoadAgeZero",
     [](Config& c) {
       c.server_load = ServerLoadConfig();
       c.server_load->out_of_band_interval = absl::ZeroDuration();
       c.server_load->max_report_age = absl::ZeroDuration();
     },
     {"serverLoad.maxReportAge", kMaxReportAgeRule}},
    {"ServerLoadAgePastAnHour",
     [](Config& c) {
       c.server_load = ServerLoadConfig();
       c.server_load->max_report_age = absl::Hours(1) + absl::Milliseconds(1);
     },
     {"serverLoad.maxReportAge", kMaxReportAgeRule}},
    {"ServerLoadAgeEqualToInterval",
     [](Config& c) {
       c.server_load = ServerLoadConfig();
       c.server_load->max_report_age = absl::Milliseconds(100);
     },
     {"serverLoad.maxReportAge", kAgeRule}},
    {"ServerLoadAgeBelowInterval",
     [](Config& c) {
       c.server_load = ServerLoadConfig();
       c.server_load->out_of_band_interval = absl::Hours(1);
       c.server_load->max_report_age = absl::Minutes(59);
     },
     {"serverLoad.maxReportAge", kAgeRule}},
    {"ServerLoadOnWeighted",
     [](Config& c) {
       c.bounded = false;
       // Only C8's first part: the members are not checked on weighted.
       c.server_load =
           ServerLoadConfig{"", absl::Milliseconds(1), absl::ZeroDuration()};
     },
     {"serverLoad",
      "belongs to bounded_load_rendezvous (only it bounds loads)"}},
    {"KeyCacheTooSmall",
     [](Config& c) { c.key_cache.entries = KeyCacheConfig::kMinEntries - 1; },
     {"keyCache", kKeyCacheRule}},
    {"KeyCacheTooLarge",
     [](Config& c) { c.key_cache.entries = KeyCacheConfig::kMaxEntries + 1; },
     {"keyCache", kKeyCacheRule}},
};

INSTANTIATE_TEST_SUITE_P(Rules, RouterConfigRule,
                         ::testing::ValuesIn(kRuleCases),
                         [](const ::testing::TestParamInfo<RuleCase>& rule) {
                           return std::string(rule.param.name);
                         });

TEST(RouterConfig, KeyCacheEntriesByListSize) {
  const KeyCacheConfig absent;
  EXPECT_FALSE(absent.enabled);
  EXPECT_EQ(absent.EntriesFor(1000), 0u);
  KeyCacheConfig on;
  on.enabled = true;
  EXPECT_EQ(on.EntriesFor(0), 0u);
  EXPECT_EQ(on.EntriesFor(KeyCacheConfig::kDefaultMinBackends - 1), 0u);
  EXPECT_EQ(on.EntriesFor(KeyCacheConfig::kDefaultMinBackends),
            KeyCacheConfig::kDefaultEntries);
  KeyCacheConfig sized;
  sized.enabled = true;
  sized.entries = KeyCacheConfig::kMinEntries;
  EXPECT_EQ(sized.EntriesFor(1), KeyCacheConfig::kMinEntries);
  KeyCacheConfig off;
  off.enabled = false;
  EXPECT_EQ(off.EntriesFor(1000), 0u);
  EXPECT_FALSE(off == on);
  EXPECT_TRUE(off == absent);
  for (const uint32_t entries :
       {KeyCacheConfig::kMinEntries, KeyCacheConfig::kMaxEntries}) {
    Config config;
    config.hash_header = "k";
    config.key_cache.entries = entries;
    EXPECT_TRUE(NormalizeAndValidate(config).empty()) << entries;
  }
}

TEST(RouterConfig, ServerLoadDefaults) {
  const ServerLoadConfig load;
  EXPECT_EQ(load.metric, "rif");
  EXPECT_EQ(load.out_of_band_interval, absl::Milliseconds(100));
  EXPECT_EQ(load.max_report_age, absl::Seconds(1));
  Config config = ValidConfig(/*bounded=*/true);
  EXPECT_FALSE(config.server_load.has_value());
  config.server_load = load;
  EXPECT_TRUE(NormalizeAndValidate(config).empty());
}

TEST(RouterConfig, ServerLoadComparesEveryField) {
  const ServerLoadConfig load;
  EXPECT_EQ(load, ServerLoadConfig());
  EXPECT_FALSE(load == (ServerLoadConfig{"cpu", absl::Milliseconds(100),
                                         absl::Seconds(1)}));
  EXPECT_FALSE(load == (ServerLoadConfig{"rif", absl::ZeroDuration(),
                                         absl::Seconds(1)}));
  EXPECT_FALSE(load == (ServerLoadConfig{"rif", absl::Milliseconds(100),
                                         absl::Seconds(2)}));
}

// The boundaries C8 accepts, each with the rest at its default (or the
// smallest change that keeps maxReportAge longer than the interval).
TEST(RouterConfig, ServerLoadBoundariesAccepted) {
  const std::vector<ServerLoadConfig> accepted = {
      {"rif", absl::Milliseconds(10), absl::Milliseconds(11)},
      {"rif", absl::ZeroDuration(), absl::Milliseconds(1)},
      {"rif", absl::ZeroDuration(), absl::Nanoseconds(1)},
      {"rif", absl::Hours(1) - absl::Milliseconds(1), absl::Hours(1)},
      {"rif", absl::Milliseconds(100), absl::Hours(1)},
      {"x", absl::Milliseconds(100), absl::Seconds(1)},
      {std::string(64, 'a'), absl::Milliseconds(100), absl::Seconds(1)},
      {"named_metrics.rif!~", absl::Milliseconds(100), absl::Seconds(1)},
  };
  for (const ServerLoadConfig& load : accepted) {
    Config config = ValidConfig(/*bounded=*/true);
    config.server_load = load;
    EXPECT_TRUE(NormalizeAndValidate(config).empty())
        << load.metric << " " << load.out_of_band_interval << " "
        << load.max_report_age;
  }
  // An interval of exactly 1 h: accepted (only maxReportAge, which cannot
  // exceed 1 h and so not the interval either, is reported).
  Config config = ValidConfig(/*bounded=*/true);
  config.server_load = ServerLoadConfig{"rif", absl::Hours(1), absl::Hours(1)};
  EXPECT_EQ(NormalizeAndValidate(config),
            (std::vector<ConfigError>{{"serverLoad.maxReportAge", kAgeRule}}));
}

TEST(RouterConfig, ServerLoadReportsEachBrokenMember) {
  Config config = ValidConfig(/*bounded=*/true);
  config.server_load =
      ServerLoadConfig{"", absl::Milliseconds(5), absl::Hours(2)};
  EXPECT_EQ(NormalizeAndValidate(config),
            (std::vector<ConfigError>{
                {"serverLoad.metric", kMetricRule},
                {"serverLoad.outOfBandInterval", kOutOfBandIntervalRule},
                {"serverLoad.maxReportAge", kMaxReportAgeRule}}));
  // An invalid interval is not compared with maxReportAge.
  config.server_load =
      ServerLoadConfig{"rif", absl::Hours(2), absl::Seconds(1)};
  EXPECT_EQ(NormalizeAndValidate(config),
            (std::vector<ConfigError>{
                {"serverLoad.outOfBandInterval", kOutOfBandIntervalRule}}));
}

TEST(RouterConfig, ValidHeaderNames) {
  for (const char* name : {"k", "x-session-id", "k-bin", "a.b_c-9"}) {
    Config config = ValidConfig();
    config.hash_header = name;
    EXPECT_TRUE(NormalizeAndValidate(config).empty()) << name;
  }
}

TEST(RouterConfig, BrokenEndpointsReportEveryErrorOfTheField) {
  // An unparsable address that is also a duplicate: both, in that order
  // (and its identity, the address text, is a duplicate too).
  Config config = ValidConfig();
  config.endpoints = {{"db.local:80", {}, {}}, {"db.local:80", {}, {}}};
  const std::vector<ConfigError> errors = NormalizeAndValidate(config);
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(errors[0].field, "endpoints[0].address");
  EXPECT_EQ(errors[1].field, "endpoints[1].address");
  EXPECT_EQ(errors[2],
            (ConfigError{"endpoints[1].address", "duplicate of endpoints[0]"}));
  EXPECT_EQ(errors[3].field, "endpoints[1].identity");
}

TEST(RouterConfig, DuplicatesAreFoundAfterNormalisation) {
  Config config = ValidConfig();
  config.endpoints = {{"[::1]:80", {}, {}}, {"[0:0::1]:0080", {}, {}}};
  EXPECT_EQ(NormalizeAndValidate(config),
            (std::vector<ConfigError>{
                {"endpoints[1].address", "duplicate of endpoints[0]"},
                {"endpoints[1].identity",
                 "identity \"[::1]:80\" is also used by endpoints[0]"}}));
  EXPECT_EQ(config.endpoints[1].address, "[::1]:80");
}

// The rule that the weights sum to at most 2^32 - 1 is gone: the core sums
// eligible weights in 64 bits.
TEST(RouterConfig, WeightsMaySumPast32Bits) {
  Config config = ValidConfig();
  for (size_t i = 0; i < 300; ++i) {
    config.endpoints.push_back({AddressOf(i), 15000000, {}});
  }
  EXPECT_TRUE(NormalizeAndValidate(config).empty());
  config.endpoints = {{"10.0.0.1:80", UINT32_MAX, {}},
                      {"10.0.0.2:80", UINT32_MAX, {}}};
  config.default_weight = UINT32_MAX;
  EXPECT_TRUE(NormalizeAndValidate(config).empty());
}

TEST(RouterConfig, ManyEndpointsValidateInLinearTime) {
  Config config = ValidConfig();
  for (size_t i = 0; i < 20000; ++i) {
    config.endpoints.push_back({AddressOf(i), {}, {}});
  }
  config.endpoints.push_back({AddressOf(7), {}, {}});
  const std::vector<ConfigError> errors = NormalizeAndValidate(config);
  ASSERT_EQ(errors.size(), 2u);
  EXPECT_EQ(errors[0], (ConfigError{"endpoints[20000].address",
                                    "duplicate of endpoints[7]"}));
}

TEST(RouterConfig, MissingKeySpellings) {
  EXPECT_EQ(ParseMissingKey("RANDOM"), MissingKey::kRandom);
  EXPECT_EQ(ParseMissingKey("FAIL"), MissingKey::kFail);
  EXPECT_EQ(ParseMissingKey("fail"), std::nullopt);
  EXPECT_EQ(ParseMissingKey(""), std::nullopt);
  EXPECT_STREQ(kMissingKeyRule, R"(must be "RANDOM" or "FAIL")");
}

// ---------------------------------------------------------------------------
// NormalizeAddress (test/grpc compares it with grpc_sockaddr_to_string)

TEST(NormalizeAddress, PrintsWhatGrpcPrints) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"10.0.0.7:8443", "10.0.0.7:8443"},
      {"10.0.0.7:08443", "10.0.0.7:8443"},
      {"10.0.0.7:0000080", "10.0.0.7:80"},
      {"[::1]:65535", "[::1]:65535"},
      {"127.0.0.1:0", "127.0.0.1:0"},
      {"255.255.255.255:65535", "255.255.255.255:65535"},
      {"[::1]:80", "[::1]:80"},
      {"[0:0::1]:80", "[::1]:80"},
      {"[2001:DB8:0:0:0:0:0:7]:8443", "[2001:db8::7]:8443"},
      {"[::ffff:10.0.0.1]:80", "[::ffff:10.0.0.1]:80"},
      {"[fe80::1%2]:80", "[fe80::1%2]:80"},
      {"[fe80::1%0]:80", "[fe80::1]:80"},
      {"[fe80::1%lo]:80", "[fe80::1%1]:80"},
  };
  for (const auto& [text, expected] : cases) {
    EXPECT_EQ(NormalizeAddress(text), expected) << text;
  }
}

TEST(NormalizeAddress, RefusesWhatIsNotAnIpLiteralWithAPort) {
  for (const std::string text : {"",
                                 "db.local:80",
                                 "10.0.0.1",
                                 "10.0.0.1:",
                                 "10.0.0.1:65536",
                                 "10.0.0.1:+80",
                                 "10.0.0.1: 80",
                                 "10.0.0.1:80x",
                                 "10.0.0.1:-1",
                                 "10.0.0:80",
                                 "[10.0.0.1]:80",
                                 "::1:80",
                                 "[::1]",
                                 "[::1]80",
                                 "[::1:80",
                                 "[::g]:80",
                                 "[fe80::1%]:80",
                                 "[fe80::1%nosuchif0]:80",
                                 "[fe80::1%99999999999]:80",
                                 "10.0.0.1:80:80"}) {
    EXPECT_EQ(NormalizeAddress(text), std::nullopt) << text;
  }
  EXPECT_EQ(NormalizeAddress(std::string("10.0.0.1\0:80", 12)), std::nullopt);
  EXPECT_EQ(NormalizeAddress(std::string("10.0.0.1:80\0", 12)), std::nullopt);
}

// Every header gRPC 1.51 keeps from the pick is refused, with the reason;
// names that only look like them are keys like any other.
TEST(RouterConfig, HeadersThePickCannotSeeAreRefusedTheirLookalikesAccepted) {
  for (const char* hidden :
       {"user-agent", "content-type", "te", "host", "endpoint-load-metrics-bin",
        "lb-token", "lb-cost-bin", "grpclb_client_stats"}) {
    Config config = ValidConfig(/*bounded=*/true);
    config.hash_header = hidden;
    const std::vector<ConfigError> errors = NormalizeAndValidate(config);
    ASSERT_EQ(errors.size(), 1u) << hidden;
    EXPECT_EQ(errors[0].field, "hashHeader");
    EXPECT_NE(errors[0].message.find("is not visible to the pick"),
              std::string::npos)
        << errors[0].message;
  }
  for (const char* visible : {"x-user-agent", "hosts", "tenant", "te-x",
                              "authorization", "x-tenant-bin"}) {
    Config config = ValidConfig(/*bounded=*/true);
    config.hash_header = visible;
    EXPECT_TRUE(NormalizeAndValidate(config).empty()) << visible;
  }
}

// ParseDuration reads google.protobuf.Duration's JSON form exactly: limits
// hold to the nanosecond (gRPC's parse keeps whole milliseconds).
TEST(RouterConfig, DurationsAreParsedToTheNanosecond) {
  const std::pair<const char*, absl::Duration> accepted[] = {
      {"60s", absl::Seconds(60)},
      {"0s", absl::ZeroDuration()},
      {"0.0009s", absl::Microseconds(900)},
      {"3600.000000001s", absl::Hours(1) + absl::Nanoseconds(1)},
      {"1.5s", absl::Milliseconds(1500)},
      {"-1.25s", -absl::Milliseconds(1250)},
      {"315576000000s", absl::Seconds(315576000000)},
  };
  for (const auto& [text, expected] : accepted) {
    EXPECT_EQ(ParseDuration(text), std::optional<absl::Duration>(expected))
        << text;
  }
  for (const char* text :
       {"", "s", "2h", "60", "1e3s", "1.s", ".5s", "1.0000000001s", "+1s",
        "--1s", "1 s", "315576000001s", "1000000000000s", "0x10s", "1.5ss"}) {
    EXPECT_EQ(ParseDuration(text), std::nullopt) << text;
  }
}

// The duration rules hold exactly: just inside a limit passes, just outside
// fails with the limit in the message.
TEST(RouterConfig, DurationLimitsHoldToTheNanosecond) {
  Config config = ValidConfig(/*bounded=*/true);
  config.slow_start = SlowStartConfig();
  for (const auto& [window, ok] :
       {std::pair{absl::Nanoseconds(1), true},
        std::pair{absl::ZeroDuration(), false}, std::pair{absl::Hours(1), true},
        std::pair{absl::Hours(1) + absl::Nanoseconds(1), false}}) {
    config.slow_start->window = window;
    const std::vector<ConfigError> expected =
        ok ? std::vector<ConfigError>{}
           : std::vector<ConfigError>{{"slowStart.window", kWindowRule}};
    EXPECT_EQ(NormalizeAndValidate(config), expected) << window;
  }
}

// 100,000 copies of one endpoint: ten errors of each kind and a count of the
// rest, not one error per copy (megabytes of message).
TEST(RouterConfig, ManyErrorsOfAKindAreCountedNotListed) {
  Config config = ValidConfig(/*bounded=*/true);
  config.endpoints.assign(100000, EndpointConfig{"10.0.0.1:80", {}, {}});
  config.endpoints[5].weight = 0;
  const std::vector<ConfigError> errors = NormalizeAndValidate(config);
  ASSERT_EQ(errors.size(), 1u + 10u + 10u + 2u);
  EXPECT_EQ(errors[0],
            (ConfigError{"endpoints[5].weight", "must be at least 1"}));
  EXPECT_EQ(errors[1],
            (ConfigError{"endpoints[1].address", "duplicate of endpoints[0]"}));
  EXPECT_EQ(errors[21],
            (ConfigError{"endpoints",
                         "99989 more errors on endpoints[].address (the first "
                         "10 are listed)"}));
  EXPECT_EQ(errors[22],
            (ConfigError{"endpoints",
                         "99989 more errors on endpoints[].identity (the first "
                         "10 are listed)"}));
  size_t bytes = 0;
  for (const ConfigError& e : errors)
    bytes += e.field.size() + e.message.size();
  EXPECT_LT(bytes, 2000u);
  // Ten of a kind are all listed.
  config.endpoints.resize(11);
  config.endpoints[5].weight.reset();
  EXPECT_EQ(NormalizeAndValidate(config).size(), 20u);
}

}  // namespace
}  // namespace poise::router
