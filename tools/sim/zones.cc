#include "zones.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "number_args.h"
#include "poise/bound.h"
#include "poise/rendezvous.h"
#include "src/router/backend_set.h"
#include "src/router/config.h"
#include "src/router/connectivity.h"
#include "src/router/fleet_load.h"
#include "src/router/picker.h"
#include "src/router/stats_registry.h"

namespace poise_sim {
namespace {

using poise::router::BackendSet;
using poise::router::BackendState;
using poise::router::Config;
using poise::router::Picker;
using poise::router::PickOutcome;
using poise::router::PickRequest;
using poise::router::PolicyStats;
using poise::router::ResolverEntry;
using poise::router::RoutingState;

constexpr char kZonesUsage[] =
    "usage: poise-sim --zones [options]\n"
    "\n"
    "  C client processes in zones, each a closed loop with k calls in\n"
    "  flight (exponential call times, mean 1 ms), route through the\n"
    "  policies' own pick engine (bounded_load_rendezvous with localZone) to\n"
    "  backends in zones. A share of the calls carries one hot key (the same\n"
    "  in every client), the rest Zipf keys. It prints the share of calls\n"
    "  sent out of their client's zone (in all and per zone), the busiest\n"
    "  backend's load over the fleet-wide bound ceil(f (C k + 1) w / (100 W))\n"
    "  (the peak of load - bound, read at every pick), the share of calls\n"
    "  served by their key's owner in the client's zone, and with --outage\n"
    "  the keys moved when a zone's backends all fail (idle clients, one per\n"
    "  zone): per client zone, how many, how many to their global next READY\n"
    "  choice, and how many come back when the zone recovers.\n"
    "\n"
    "  --zones Z:N[:W],..  zones with their backend count and weight\n"
    "                      (default a:3,b:3,c:3; weight 1)\n"
    "  --callers Z:S,..    the clients' shares per zone (default: in\n"
    "                      proportion to the zones' weights)\n"
    "  --clients C         1..2000 (default 30)\n"
    "  --calls K           calls in flight per client, 1..64 (default 2)\n"
    "  --factor F          balanceFactorPercent (default 150)\n"
    "  --hot-share P       share of calls on the hot key (default 0)\n"
    "  --keys M            Zipf keys (default 10000)\n"
    "  --zipf S            Zipf exponent (default 1.0)\n"
    "  --server-load       serverLoad on (per-call reports)\n"
    "  --without-zones     the clients have no local zone (the baseline)\n"
    "  --picks N           picks measured (default 200000), after N / 10\n"
    "  --outage Z          also the outage of zone Z\n"
    "  --seed S            (default 1)\n";

struct ZoneSpec {
  std::string name;
  uint64_t backends = 0;
  uint32_t weight = 1;
  double callers = 0.0;  // share of the clients
};

struct ZonesOptions {
  std::vector<ZoneSpec> zones;
  uint64_t clients = 30;
  uint64_t calls = 2;
  uint64_t factor = 150;
  double hot_share = 0.0;
  uint64_t keys = 10000;
  double zipf = 1.0;
  bool server_load = false;
  bool without_zones = false;  // clients without a local zone: the baseline
  uint64_t picks = 200000;
  std::string outage;
  uint64_t seed = 1;
};

// "a:3,b:3:2": zones with backend counts and weights.
bool ParseZones(std::string_view text, std::vector<ZoneSpec>* out) {
  out->clear();
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = text.substr(0, comma);
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos) return false;
    ZoneSpec z;
    z.name = std::string(item.substr(0, colon));
    if (!poise::router::IsValidZone(z.name)) return false;
    item.remove_prefix(colon + 1);
    const size_t second = item.find(':');
    if (!ParseUint(item.substr(0, second), 1, 1000, &z.backends)) return false;
    if (second != std::string_view::npos) {
      uint64_t w = 0;
      if (!ParseUint(item.substr(second + 1), 1, 1000000, &w)) return false;
      z.weight = static_cast<uint32_t>(w);
    }
    out->push_back(z);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return !out->empty();
}

// "a:0.5,b:0.25": the callers' shares, into the zones already parsed.
bool ParseCallers(std::string_view text, std::vector<ZoneSpec>* zones) {
  for (ZoneSpec& z : *zones) z.callers = 0.0;
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    const size_t colon = item.find(':');
    if (colon == std::string_view::npos) return false;
    const std::string_view name = item.substr(0, colon);
    const auto it =
        std::find_if(zones->begin(), zones->end(),
                     [&](const ZoneSpec& z) { return z.name == name; });
    if (it == zones->end()) return false;
    if (!ParseDouble(item.substr(colon + 1), 0.0, 1e9, &it->callers)) {
      return false;
    }
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return true;
}

int Usage(const std::string& problem) {
  std::fprintf(stderr, "poise-sim --zones: %s\n%s", problem.c_str(),
               kZonesUsage);
  return 2;
}

// The simulated clock, in ns, for the fleet's report ages.
int64_t sim_now_ns = 0;
int64_t SimNow() { return sim_now_ns; }

std::string BackendAddress(size_t i) {
  return "10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1) +
         ":80";
}

// One client: its own backend set (its counters) and picker, in a zone.
struct SimClient {
  size_t zone;
  BackendSet set;
  std::shared_ptr<PolicyStats> stats;
  std::unique_ptr<Picker> picker;
};

class ZonesSim {
 public:
  explicit ZonesSim(const ZonesOptions& o) : o_(o), rng_(o.seed) {
    for (size_t z = 0; z < o_.zones.size(); ++z) {
      for (uint64_t b = 0; b < o_.zones[z].backends; ++b) {
        zone_of_.push_back(z);
        weight_of_.push_back(o_.zones[z].weight);
        total_weight_ += o_.zones[z].weight;
      }
    }
    double sum = 0.0;
    for (double k = 1; k <= static_cast<double>(o_.keys); ++k) {
      sum += 1.0 / std::pow(k, o_.zipf);
      zipf_cdf_.push_back(sum);
    }
  }

  std::vector<ResolverEntry> Entries() const {
    std::vector<ResolverEntry> entries;
    for (size_t i = 0; i < zone_of_.size(); ++i) {
      ResolverEntry e{BackendAddress(i), weight_of_[i], std::nullopt};
      e.zone = o_.zones[zone_of_[i]].name;
      entries.push_back(std::move(e));
    }
    return entries;
  }

  std::shared_ptr<const Config> ConfigFor(size_t zone) const {
    Config c;
    c.bounded = true;
    c.hash_header = "x-key";
    c.balance_factor_percent = static_cast<uint32_t>(o_.factor);
    if (!o_.without_zones) c.local_zone = o_.zones[zone].name;
    if (o_.server_load) c.server_load.emplace();
    poise::router::NormalizeAndValidate(c);
    return std::make_shared<const Config>(std::move(c));
  }

  // A client of `zone` over the backends in `states`.
  std::unique_ptr<SimClient> MakeClient(
      size_t zone, const std::vector<BackendState>& states) const {
    auto client = std::make_unique<SimClient>();
    client->zone = zone;
    const std::shared_ptr<const Config> config = ConfigFor(zone);
    client->set.Update(Entries(), *config);
    client->stats = std::make_shared<PolicyStats>("sim", "bounded");
    client->picker = std::make_unique<Picker>(config, client->set.list(),
                                              states, client->stats);
    return client;
  }

  std::vector<BackendState> States(const std::string& failed_zone) const {
    std::vector<BackendState> states(zone_of_.size());
    for (size_t i = 0; i < zone_of_.size(); ++i) {
      states[i].routing = o_.zones[zone_of_[i]].name == failed_zone
                              ? RoutingState::kFailed
                              : RoutingState::kReady;
    }
    return states;
  }

  std::string KeyOf(uint64_t rank) const { return "k" + std::to_string(rank); }
  std::string DrawKey() {
    if (o_.hot_share > 0 && unit_(rng_) < o_.hot_share) return "hot";
    const double u = unit_(rng_) * zipf_cdf_.back();
    const auto it = std::lower_bound(zipf_cdf_.begin(), zipf_cdf_.end(), u);
    return KeyOf(static_cast<uint64_t>(it - zipf_cdf_.begin()));
  }

  // The key's first backend in its order among those `admitted` picks.
  template <typename Admitted>
  size_t FirstAmong(std::string_view key, const BackendSet& set,
                    Admitted admitted) const {
    std::vector<poise::Candidate> candidates;
    std::vector<size_t> index;
    for (size_t i = 0; i < set.backends().size(); ++i) {
      if (!admitted(i)) continue;
      candidates.push_back(
          {set.backends()[i].identity, set.backends()[i].weight, true});
      index.push_back(i);
    }
    return index[poise::WeightedRendezvous::Pick(key, candidates).value()];
  }

  int RunLoad() {
    // Clients per zone by the callers' shares (largest remainders).
    double share_sum = 0.0;
    for (const ZoneSpec& z : o_.zones) share_sum += z.callers;
    std::vector<size_t> client_zone;
    for (size_t z = 0; z < o_.zones.size(); ++z) {
      const auto n = static_cast<uint64_t>(std::llround(
          static_cast<double>(o_.clients) * o_.zones[z].callers / share_sum));
      for (uint64_t c = 0; c < n; ++c) client_zone.push_back(z);
    }
    const std::vector<BackendState> ready = States("");
    std::vector<std::unique_ptr<SimClient>> clients;
    for (const size_t z : client_zone) clients.push_back(MakeClient(z, ready));
    const size_t n = zone_of_.size();
    std::vector<uint64_t> load(n, 0);  // every client's calls, per backend
    struct Call {
      int64_t end_ns;
      size_t client;
      size_t backend;
      std::shared_ptr<PickOutcome> outcome;  // holds the slot
      bool operator>(const Call& other) const { return end_ns > other.end_ns; }
    };
    std::priority_queue<Call, std::vector<Call>, std::greater<>> calls;
    std::exponential_distribution<double> call_time(1.0);
    const uint64_t in_flight = clients.size() * o_.calls;
    const uint64_t warmup = o_.picks / 10;
    uint64_t picks = 0;
    uint64_t measured = 0;
    uint64_t out_of_zone = 0;
    uint64_t by_owner = 0;
    std::vector<uint64_t> zone_picks(o_.zones.size(), 0);
    std::vector<uint64_t> zone_out(o_.zones.size(), 0);
    int64_t worst_over = INT64_MIN;  // load - bound
    double worst_ratio = 0.0;
    const auto start = [&](size_t c) {
      SimClient& client = *clients[c];
      const std::string key = DrawKey();
      auto outcome = std::make_shared<PickOutcome>(
          client.picker->Pick(PickRequest{key, 0}));
      const auto* done = std::get_if<PickOutcome::Complete>(&outcome->result);
      if (done == nullptr) return false;
      const size_t b = done->backend;
      ++load[b];
      ++picks;
      if (picks > warmup) {
        ++measured;
        const bool out = zone_of_[b] != client.zone;
        out_of_zone += out ? 1 : 0;
        ++zone_picks[client.zone];
        zone_out[client.zone] += out ? 1 : 0;
        const size_t zone = client.zone;
        by_owner +=
            b == FirstAmong(key, client.set,
                            [&](size_t i) { return zone_of_[i] == zone; })
                ? 1
                : 0;
        // Every backend against the fleet-wide bound of C k calls.
        for (size_t i = 0; i < n; ++i) {
          const auto bound = static_cast<int64_t>(
              poise::Bound(static_cast<uint32_t>(o_.factor), in_flight,
                           weight_of_[i], total_weight_)
                  .Capacity());
          worst_over =
              std::max(worst_over, static_cast<int64_t>(load[i]) - bound);
          worst_ratio = std::max(worst_ratio, static_cast<double>(load[i]) /
                                                  static_cast<double>(bound));
        }
      }
      calls.push(
          Call{sim_now_ns + static_cast<int64_t>(call_time(rng_) * 1e6) + 1, c,
               b, std::move(outcome)});
      return true;
    };
    for (size_t c = 0; c < clients.size(); ++c) {
      for (uint64_t k = 0; k < o_.calls; ++k) {
        if (!start(c)) return Fail("a pick did not complete");
      }
    }
    while (measured < o_.picks) {
      Call call = calls.top();
      calls.pop();
      sim_now_ns = call.end_ns;
      --load[call.backend];
      call.outcome.reset();  // releases the client's slot
      if (o_.server_load) {
        // The call's reply carries the backend's load (every client's).
        poise::router::BackendCell& cell =
            *clients[call.client]->set.backends()[call.backend].cell;
        cell.fleet().report.Store(load[call.backend], cell.in_flight->Load(),
                                  sim_now_ns);
        clients[call.client]->stats->load_reports.fetch_add(1);
      }
      if (!start(call.client)) return Fail("a pick did not complete");
    }
    std::printf("%sclients %zu x %" PRIu64
                " calls, serverLoad %s, hot share "
                "%.2f, Zipf %.2f over %" PRIu64 " keys, %" PRIu64
                " picks measured\n",
                o_.without_zones ? "without zones: " : "", clients.size(),
                o_.calls, o_.server_load ? "on" : "off", o_.hot_share, o_.zipf,
                o_.keys, measured);
    std::printf("cross-zone share: %.4f %%", Percent(out_of_zone, measured));
    for (size_t z = 0; z < o_.zones.size(); ++z) {
      std::printf("%s %s %.4f %%", z == 0 ? " (" : ",",
                  o_.zones[z].name.c_str(),
                  Percent(zone_out[z], zone_picks[z]));
    }
    std::printf(")\n");
    std::printf("busiest backend: peak load - bound %" PRId64
                ", peak load / bound %.3f\n",
                worst_over, worst_ratio);
    std::printf(
        "owner share: %.2f %% (calls served by their key's owner in "
        "the client's zone)\n",
        Percent(by_owner, measured));
    // The zones' minimum excess: their calls beyond their backends' bounds.
    for (size_t z = 0; z < o_.zones.size(); ++z) {
      uint64_t room = 0;
      for (size_t i = 0; i < n; ++i) {
        if (zone_of_[i] != z) continue;
        room += static_cast<uint64_t>(
            poise::Bound(static_cast<uint32_t>(o_.factor), in_flight,
                         weight_of_[i], total_weight_)
                .Capacity());
      }
      uint64_t zone_calls = 0;
      for (const size_t cz : client_zone) zone_calls += cz == z ? o_.calls : 0;
      const uint64_t excess = zone_calls > room ? zone_calls - room : 0;
      std::printf("zone %s: %" PRIu64 " calls in flight, room %" PRIu64
                  " by the bound, excess %.2f %% of its calls, sent out %.2f "
                  "%%\n",
                  o_.zones[z].name.c_str(), zone_calls, room,
                  Percent(excess, zone_calls),
                  Percent(zone_out[z], zone_picks[z]));
    }
    return 0;
  }

  int RunOutage() {
    size_t failed = o_.zones.size();
    for (size_t z = 0; z < o_.zones.size(); ++z) {
      if (o_.zones[z].name == o_.outage) failed = z;
    }
    if (failed == o_.zones.size()) return Fail("no zone " + o_.outage);
    const std::vector<BackendState> up = States("");
    const std::vector<BackendState> down = States(o_.outage);
    std::printf("outage of zone %s (%" PRIu64 " keys, idle clients):\n",
                o_.outage.c_str(), o_.keys);
    for (size_t z = 0; z < o_.zones.size(); ++z) {
      const std::unique_ptr<SimClient> before = MakeClient(z, up);
      const std::unique_ptr<SimClient> during = MakeClient(z, down);
      const std::unique_ptr<SimClient> after = MakeClient(z, up);
      uint64_t moved = 0;
      uint64_t to_next = 0;
      uint64_t back = 0;
      uint64_t moved_back = 0;
      for (uint64_t k = 0; k < o_.keys; ++k) {
        const std::string key = KeyOf(k);
        const size_t was = Picked(*before, key);
        const size_t now = Picked(*during, key);
        const size_t again = Picked(*after, key);
        back += again == was ? 1 : 0;
        if (now == was) continue;
        ++moved;
        moved_back += again == was ? 1 : 0;
        const size_t next = FirstAmong(key, during->set, [&](size_t i) {
          return down[i].routing == RoutingState::kReady;
        });
        to_next += now == next ? 1 : 0;
      }
      std::printf("  clients of %s: %" PRIu64 " keys moved, %" PRIu64
                  " of them to their global next READY choice, %" PRIu64
                  " came back; %" PRIu64 " of %" PRIu64
                  " keys where they were after the recovery\n",
                  o_.zones[z].name.c_str(), moved, to_next, moved_back, back,
                  o_.keys);
    }
    return 0;
  }

 private:
  static double Percent(uint64_t part, uint64_t whole) {
    return whole == 0
               ? 0.0
               : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
  }
  static int Fail(const std::string& why) {
    std::fprintf(stderr, "poise-sim --zones: %s\n", why.c_str());
    return 1;
  }
  static size_t Picked(SimClient& client, const std::string& key) {
    const PickOutcome outcome = client.picker->Pick(PickRequest{key, 0});
    const auto* c = std::get_if<PickOutcome::Complete>(&outcome.result);
    return c != nullptr ? c->backend : SIZE_MAX;
  }

  const ZonesOptions& o_;
  std::mt19937_64 rng_;
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  std::vector<size_t> zone_of_;
  std::vector<uint32_t> weight_of_;
  uint64_t total_weight_ = 0;
  std::vector<double> zipf_cdf_;
};

}  // namespace

int RunZones(int argc, char** argv) {
  ZonesOptions o;
  ParseZones("a:3,b:3,c:3", &o.zones);
  for (int i = 1; i < argc; ++i) {
    const std::string_view flag = argv[i];
    if (flag == "--help") {
      std::fputs(kZonesUsage, stdout);
      return 0;
    }
    if (flag == "--server-load") {
      o.server_load = true;
      continue;
    }
    if (flag == "--without-zones") {
      o.without_zones = true;
      continue;
    }
    if (i + 1 >= argc) return Usage(std::string(flag) + " needs a value");
    const std::string_view v = argv[++i];
    bool ok = false;
    if (flag == "--zones") {
      ok = ParseZones(v, &o.zones);
    } else if (flag == "--callers") {
      ok = true;  // read once the zones are known (below)
    } else if (flag == "--clients") {
      ok = ParseUint(v, 1, 2000, &o.clients);
    } else if (flag == "--calls") {
      ok = ParseUint(v, 1, 64, &o.calls);
    } else if (flag == "--factor") {
      ok = ParseUint(v, 100, 10000, &o.factor);
    } else if (flag == "--hot-share") {
      ok = ParseDouble(v, 0.0, 1.0, &o.hot_share);
    } else if (flag == "--keys") {
      ok = ParseUint(v, 1, 10000000, &o.keys);
    } else if (flag == "--zipf") {
      ok = ParseDouble(v, 0.0, 5.0, &o.zipf);
    } else if (flag == "--picks") {
      ok = ParseUint(v, 1, 1000000000, &o.picks);
    } else if (flag == "--outage") {
      o.outage = std::string(v);
      ok = poise::router::IsValidZone(o.outage);
    } else if (flag == "--seed") {
      ok = ParseUint(v, 0, UINT64_MAX, &o.seed);
    } else {
      return Usage("unknown option " + std::string(flag));
    }
    if (!ok) return Usage("bad value for " + std::string(flag));
  }
  for (ZoneSpec& z : o.zones) {
    z.callers = static_cast<double>(z.backends * z.weight);
  }
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string_view(argv[i]) == "--callers" &&
        !ParseCallers(argv[i + 1], &o.zones)) {
      return Usage("bad value for --callers");
    }
  }
  double share_sum = 0.0;
  for (const ZoneSpec& z : o.zones) share_sum += z.callers;
  if (!(share_sum > 0.0)) return Usage("--callers gives no zone a client");
  poise::router::SetFleetClockForTesting(&SimNow);
  ZonesSim sim(o);
  int rc = sim.RunLoad();
  if (rc == 0 && !o.outage.empty()) rc = sim.RunOutage();
  poise::router::SetFleetClockForTesting(nullptr);
  return rc;
}

}  // namespace poise_sim
