// Helpers shared by the router tests: resolver entries, configs and backend
// lists without a channel.
#ifndef POISE_TEST_ROUTER_ROUTER_TEST_UTIL_H_
#define POISE_TEST_ROUTER_ROUTER_TEST_UTIL_H_

#include <cstddef>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "poise/rendezvous.h"
#include "src/router/backend_set.h"
#include "src/router/config.h"
#include "src/router/connectivity.h"

namespace poise::router::test {

// "10.0.<i / 250>.<i % 250 + 1>:80": n distinct IPv4 addresses.
inline std::string AddressOf(size_t i) {
  return "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1) +
         ":80";
}

inline ResolverEntry Entry(std::string address,
                           std::optional<uint32_t> weight = std::nullopt,
                           std::optional<std::string> identity = std::nullopt) {
  return ResolverEntry{std::move(address), weight, std::move(identity)};
}

inline std::vector<ResolverEntry> Entries(size_t n) {
  std::vector<ResolverEntry> entries;
  for (size_t i = 0; i < n; ++i) entries.push_back(Entry(AddressOf(i)));
  return entries;
}

inline Config ValidConfig(bool bounded = false) {
  Config config;
  config.bounded = bounded;
  config.hash_header = "x-session-id";
  return config;
}

// Every backend in `state`.
inline std::vector<BackendState> States(size_t n, RoutingState state) {
  std::vector<BackendState> states(n);
  for (BackendState& s : states) s.routing = state;
  return states;
}

// The list as the core's candidates; eligible where `states` is READY (every
// backend when `states` is empty).
inline std::vector<Candidate> CandidatesOf(
    const std::vector<ListedBackend>& backends,
    const std::vector<BackendState>& states = {}) {
  std::vector<Candidate> out;
  for (size_t i = 0; i < backends.size(); ++i) {
    out.push_back(
        {backends[i].identity, backends[i].weight,
         states.empty() || states[i].routing == RoutingState::kReady});
  }
  return out;
}

// Random bytes of up to `max_size`, with the pieces that broke text output
// before (invalid UTF-8, NUL, quotes, a lone surrogate, JSON-looking text)
// more likely.
inline std::string RandomBytes(std::mt19937_64& rng, size_t max_size) {
  static const std::vector<std::string> kPieces = {"\xFF\xFE",
                                                   std::string(1, '\0'),
                                                   "\xC3\xBC",
                                                   "\xED\xA0\x80",
                                                   "\"",
                                                   "\\",
                                                   "\xF0\x9F\x98\x80",
                                                   "\xC3",
                                                   "\n",
                                                   "factor\":",
                                                   "\"ranking\":[{"};
  std::string out;
  const size_t size = rng() % (max_size + 1);
  while (out.size() < size) {
    if (rng() % 4 == 0) {
      out += kPieces[rng() % kPieces.size()];
    } else {
      out += static_cast<char>(rng() & 0xFF);
    }
  }
  return out;
}
}  // namespace poise::router::test

#endif  // POISE_TEST_ROUTER_ROUTER_TEST_UTIL_H_
