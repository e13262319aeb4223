#include "fleet.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <queue>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "number_args.h"
#include "poise/bound.h"
#include "poise/identity_table.h"
#include "poise/rendezvous.h"
#include "src/core/prepared_candidates.h"
#include "src/router/fleet_load.h"

namespace poise_sim {
namespace {

using poise::Bound;
using poise::BoundedLoadRendezvous;
using poise::Candidate;
using poise::PreparedCandidates;
using poise::UInt128;
using poise::router::FreshReport;

constexpr char kFleetUsage[] =
    "usage: poise-sim --fleet [options]\n"
    "\n"
    "  C client processes, each a closed loop with k calls in flight, call n\n"
    "  backends under bounded_load_rendezvous. A share of the calls carries\n"
    "  one hot key (the same in every client); the rest Zipf keys. Times are\n"
    "  in mean call times. For each way of counting the loads it prints the\n"
    "  backends' load over the global bound ceil(f C k w / (100 W)): the peak\n"
    "  and the time-averaged maximum, the spill rate, the share of calls\n"
    "  served by their key's owner, and the calls that ended on a backend at\n"
    "  its bound (room every client may ask for at once), per call started:\n"
    "    LOCAL  each client bounds its own calls (without serverLoad)\n"
    "    FLEET  serverLoad: the backends' reports, per call and out of band\n"
    "    IDEAL  one instantaneous view of every backend's load\n"
    "    PLAIN  (with --plain) FLEET without its herding rule\n"
    "    ADMIT  (with --admission) FLEET, and each backend refuses a call it\n"
    "           serves its client's bound for already; the refusal costs a\n"
    "           round trip, updates the client's report of that backend, and\n"
    "           the retry goes to the key's next choice with room (at most 5\n"
    "           attempts, then the call fails); it also prints the refused\n"
    "           and failed calls\n"
    "\n"
    "  --clients C        1..10000 (default 100)\n"
    "  --calls K          calls in flight per client, 1..64 (default 2)\n"
    "  --backends N       1..1000 (default 50)\n"
    "  --weights W,W,..   one per backend (default: all 1)\n"
    "  --factor F         balanceFactorPercent (default 150)\n"
    "  --call-time T      exp (default) or fixed\n"
    "  --hot-share P      share of calls on the hot key (default 0.25)\n"
    "  --keys M           Zipf keys (default 100000)\n"
    "  --zipf S           Zipf exponent (default 1.0)\n"
    "  --oob I            out-of-band report interval; 0: per-call reports\n"
    "                     only (default 0)\n"
    "  --delay D          out-of-band report delay (default 0.01)\n"
    "  --max-age A        maxReportAge (default 1000: 1 s of 1 ms calls)\n"
    "  --rtt R            a refusal's round trip (default 0.01)\n"
    "  --duration T       simulated time after warm-up (default 200)\n"
    "  --warmup T         simulated time not measured (default 20)\n"
    "  --seed S           (default 1)\n"
    "  --csv              one CSV row per mode\n"
    "  --plain            also PLAIN\n"
    "  --admission        also ADMIT\n"
    "  --check            exit 1 unless IDEAL never passes the bound and\n"
    "                     FLEET's time-averaged maximum is below LOCAL's\n";

// ---------------------------------------------------------------------------
// Options

struct FleetOptions {
  uint64_t clients = 100;
  uint64_t calls = 2;
  uint64_t backends = 50;
  std::vector<uint32_t> weights;
  uint64_t factor = 150;
  bool exponential = true;
  double hot_share = 0.25;
  uint64_t keys = 100000;
  double zipf = 1.0;
  double oob = 0.0;
  double delay = 0.01;
  double max_age = 1000.0;
  double rtt = 0.01;
  double duration = 200.0;
  double warmup = 20.0;
  uint64_t seed = 1;
  bool csv = false;
  bool plain = false;
  bool admission = false;
  bool check = false;
};

bool ParseWeights(std::string_view text, std::vector<uint32_t>* out) {
  out->clear();
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string item(text.substr(0, comma));
    uint64_t w = 0;
    if (!ParseUint(item.c_str(), 1, UINT32_MAX, &w)) return false;
    out->push_back(static_cast<uint32_t>(w));
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return !out->empty();
}

bool ParseCallTime(const char* text, bool* exponential) {
  const std::string_view v = text;
  *exponential = v == "exp";
  return v == "exp" || v == "fixed";
}

// The options that take a value: each parses it into its field.
struct ValueOption {
  std::string_view name;
  bool (*parse)(const char* value, FleetOptions* o);
};
constexpr ValueOption kValueOptions[] = {
    {"--clients",
     [](const char* v, FleetOptions* o) {
       return ParseUint(v, 1, 10000, &o->clients);
     }},
    {"--calls", [](const char* v,
                   FleetOptions* o) { return ParseUint(v, 1, 64, &o->calls); }},
    {"--backends",
     [](const char* v, FleetOptions* o) {
       return ParseUint(v, 1, 1000, &o->backends);
     }},
    {"--weights", [](const char* v,
                     FleetOptions* o) { return ParseWeights(v, &o->weights); }},
    {"--factor",
     [](const char* v, FleetOptions* o) {
       return ParseUint(v, 100, 10000, &o->factor);
     }},
    {"--call-time",
     [](const char* v, FleetOptions* o) {
       return ParseCallTime(v, &o->exponential);
     }},
    {"--hot-share",
     [](const char* v, FleetOptions* o) {
       return ParseDouble(v, 0.0, 1.0, &o->hot_share);
     }},
    {"--keys",
     [](const char* v, FleetOptions* o) {
       return ParseUint(v, 1, 10000000, &o->keys);
     }},
    {"--zipf",
     [](const char* v, FleetOptions* o) {
       return ParseDouble(v, 0.0, 5.0, &o->zipf);
     }},
    {"--oob",
     [](const char* v, FleetOptions* o) {
       return ParseDouble(v, 0.0, 1000.0, &o->oob);
     }},
    {"--delay",
     [](const char* v, FleetOptions* o) {
       return ParseDouble(v, 0.0, 1000.0, &o->delay);
     }},
    {"--max-age",
     [](const char* v, FleetOptions* o) {
       return ParseDouble(v, 1e-6, 1e9, &o->max_age);
     }},
    {"--rtt",
     [](const char* v, FleetOptions* o) {
       return ParseDouble(v, 0.0, 1000.0, &o->rtt);
     }},
    {"--duration",
     [](const char* v, FleetOptions* o) {
       return ParseDouble(v, 1.0, 1e6, &o->duration);
     }},
    {"--warmup",
     [](const char* v, FleetOptions* o) {
       return ParseDouble(v, 0.0, 1e6, &o->warmup);
     }},
    {"--seed",
     [](const char* v, FleetOptions* o) {
       return ParseUint(v, 0, UINT64_MAX, &o->seed);
     }},
};

// The flags: each sets its field.
struct FlagOption {
  std::string_view name;
  bool FleetOptions::*field;
};
constexpr FlagOption kFlagOptions[] = {
    {"--csv", &FleetOptions::csv},
    {"--plain", &FleetOptions::plain},
    {"--admission", &FleetOptions::admission},
    {"--check", &FleetOptions::check}};

// Parses argv[i] (and its value, advancing i): false for a bad option.
bool ParseOne(int argc, char** argv, int* i, FleetOptions* o) {
  const std::string_view arg = argv[*i];
  for (const FlagOption& flag : kFlagOptions) {
    if (flag.name == arg) return o->*flag.field = true;
  }
  for (const ValueOption& option : kValueOptions) {
    if (option.name == arg) {
      return *i + 1 < argc && option.parse(argv[++*i], o);
    }
  }
  return false;
}

// nullopt: run; else the exit code (0 after --help, 2 for a bad option).
std::optional<int> ParseFleetOptions(int argc, char** argv, FleetOptions* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kFleetUsage, stdout);
      return 0;
    }
    if (!ParseOne(argc, argv, &i, o)) {
      std::fprintf(stderr, "poise-sim: bad --fleet option '%s'\n%s", argv[i],
                   kFleetUsage);
      return 2;
    }
  }
  if (o->weights.empty()) o->weights.assign(o->backends, 1);
  if (o->weights.size() != o->backends) {
    std::fprintf(stderr,
                 "poise-sim: --weights has %zu weights for %" PRIu64
                 " backends\n",
                 o->weights.size(), o->backends);
    return 2;
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// The simulation

enum class Mode { kLocal, kFleet, kIdeal, kPlain, kAdmit };

const char* ModeName(Mode mode) {
  switch (mode) {
    case Mode::kLocal:
      return "LOCAL";
    case Mode::kFleet:
      return "FLEET";
    case Mode::kIdeal:
      return "IDEAL";
    case Mode::kPlain:
      return "PLAIN";
    case Mode::kAdmit:
      return "ADMIT";
  }
  return "?";
}

struct Outcome {
  double peak = 0;          // max over time and backends of load / bound
  double avg_max = 0;       // time average of the max over backends
  double spill = 0;         // share of calls not on their key's READY owner
  uint64_t calls = 0;       // calls started after warm-up
  bool peak_within = true;  // every load <= 1.25 bound + 1
  uint64_t refused = 0;     // ADMIT: attempts refused, of those calls
  uint64_t failed = 0;      // ADMIT: calls refused at every attempt
  // Calls that ended on a backend at or past its global bound: each frees
  // room that every client may ask for at once (IDEAL fills it at once).
  uint64_t freed_at_bound = 0;
};

// ADMIT: gRPC's cap on a call's attempts (maxAttempts 5).
constexpr uint32_t kMaxAttempts = 5;

// One call's record in its client's recent history (out-of-band reports
// count the client's own calls at the moment a report arrived).
struct CallRecord {
  uint32_t backend = 0;
  double start = 0;
  double end = HUGE_VAL;  // still in flight
};

struct Client {
  std::vector<uint32_t> own;  // calls in flight per backend
  uint64_t own_total = 0;
  // The latest per-call report per backend: the count, this client's own
  // calls then, and when it arrived (-inf: none).
  std::vector<uint64_t> reported;
  std::vector<uint64_t> own_then;
  std::unique_ptr<poise::router::AskRate[]> asks;
  std::vector<double> reported_at;
  std::vector<double> phase;       // out-of-band stream phase per backend
  std::vector<CallRecord> recent;  // ring
  size_t next_record = 0;
};

struct EndEvent {
  double time;
  uint32_t client;
  uint32_t backend;
  size_t record;
  // ADMIT: the refusal of attempt `attempt` of a call on `key` arrives back
  // at its client, with the backend's count when it refused.
  bool refusal = false;
  uint32_t attempt = 0;
  uint64_t count = 0;
  std::string key;

  static EndEvent Of(double time, uint32_t client, uint32_t backend,
                     size_t record) {
    return {time, client, backend, record, false, 0, 0, {}};
  }
  bool operator>(const EndEvent& other) const { return time > other.time; }
};

class Fleet final {
 public:
  Fleet(const FleetOptions& options, Mode mode)
      : o_(options),
        mode_(mode),
        rng_(options.seed),
        policy_(
            BoundedLoadRendezvous::Create(static_cast<uint32_t>(options.factor))
                .value()) {
    for (uint64_t b = 0; b < o_.backends; ++b) {
      ids_.push_back("backend-" + std::to_string(b));
    }
    std::vector<Candidate> candidates;
    for (size_t b = 0; b < ids_.size(); ++b) {
      candidates.push_back({ids_[b], o_.weights[b], true});
      total_weight_ += o_.weights[b];
    }
    table_ = std::make_shared<const poise::IdentityTable>(candidates);
    prepared_ = std::make_unique<PreparedCandidates>(candidates, table_);
    candidates_ = candidates;
    for (size_t b = 0; b < ids_.size(); ++b) {
      const Bound bound(static_cast<uint32_t>(o_.factor),
                        o_.clients * o_.calls - 1, o_.weights[b],
                        total_weight_);
      global_bound_.push_back(static_cast<double>(bound.Capacity()));
    }
    // Zipf over the keys: the cumulative weights of ranks 1..M.
    zipf_cdf_.resize(o_.keys);
    double sum = 0;
    for (uint64_t k = 0; k < o_.keys; ++k) {
      sum += 1.0 / std::pow(static_cast<double>(k + 1), o_.zipf);
      zipf_cdf_[k] = sum;
    }
    for (double& c : zipf_cdf_) c /= sum;
    load_.assign(ids_.size(), 0);
    history_.resize(ids_.size());
    for (size_t b = 0; b < ids_.size(); ++b) history_[b].push_back({-1.0, 0});
    clients_.resize(o_.clients);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (Client& c : clients_) {
      c.own.assign(ids_.size(), 0);
      c.reported.assign(ids_.size(), 0);
      c.own_then.assign(ids_.size(), 0);
      c.asks = std::make_unique<poise::router::AskRate[]>(ids_.size());
      c.reported_at.assign(ids_.size(), -HUGE_VAL);
      c.recent.resize(64);
      if (o_.oob > 0) {
        c.phase.resize(ids_.size());
        for (double& p : c.phase) p = unit(rng_) * o_.oob;
      }
    }
  }

  Outcome Run() {
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    // Every client starts its calls at random moments of the first call time.
    for (uint32_t c = 0; c < clients_.size(); ++c) {
      for (uint64_t k = 0; k < o_.calls; ++k) {
        pending_starts_.push_back(EndEvent::Of(unit(rng_), c, 0, 0));
      }
    }
    std::sort(
        pending_starts_.begin(), pending_starts_.end(),
        [](const EndEvent& a, const EndEvent& b) { return a.time < b.time; });
    size_t next_start = 0;
    const double end_time = o_.warmup + o_.duration;
    double now = 0;
    while (true) {
      const bool start_next =
          next_start < pending_starts_.size() &&
          (ends_.empty() ||
           pending_starts_[next_start].time < ends_.top().time);
      const double t =
          start_next ? pending_starts_[next_start].time : ends_.top().time;
      if (t > end_time) break;
      Advance(now, t);
      now = t;
      if (start_next) {
        StartCall(pending_starts_[next_start++].client, now);
        continue;
      }
      const EndEvent e = ends_.top();
      ends_.pop();
      if (e.refusal) {
        Refused(e, now);
        continue;
      }
      EndCall(e, now);
      StartCall(e.client, now);
    }
    Advance(now, end_time);
    Outcome out = outcome_;
    out.avg_max = measured_time_ > 0 ? area_ / measured_time_ : 0;
    out.spill = out.calls > 0 ? static_cast<double>(spills_) /
                                    static_cast<double>(out.calls)
                              : 0;
    return out;
  }

 private:
  // The time between two events: the loads were constant.
  void Advance(double from, double to) {
    if (to <= o_.warmup) return;
    const double start = std::max(from, o_.warmup);
    area_ += MaxRatio() * (to - start);
    measured_time_ += to - start;
  }

  double MaxRatio() const {
    double max = 0;
    for (size_t b = 0; b < load_.size(); ++b) {
      max = std::max(max, static_cast<double>(load_[b]) / global_bound_[b]);
    }
    return max;
  }

  std::string NextKey() {
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    if (unit(rng_) < o_.hot_share) return "hot";
    const auto it =
        std::lower_bound(zipf_cdf_.begin(), zipf_cdf_.end(), unit(rng_));
    const auto rank = static_cast<size_t>(it - zipf_cdf_.begin());
    return "key-" + std::to_string(std::min(rank, zipf_cdf_.size() - 1));
  }

  // The backend's load at time t (the step function of its history).
  uint64_t LoadAt(size_t b, double t) const {
    const auto& h = history_[b];
    auto it =
        std::upper_bound(h.begin(), h.end(), t,
                         [](double v, const std::pair<double, uint64_t>& e) {
                           return v < e.first;
                         });
    return it == h.begin() ? 0 : std::prev(it)->second;
  }

  static uint64_t OwnAt(const Client& c, size_t b, double t) {
    uint64_t n = 0;
    for (const CallRecord& r : c.recent) {
      if (r.backend == b && r.start <= t && t < r.end) ++n;
    }
    return n;
  }

  // Simulated time in ns: one mean call time is 1 ms.
  static int64_t Ns(double t) { return std::llround(t * 1e6); }

  // Client c's latest fresh report of backend b at `now`: the per-call one
  // or the out-of-band one, whichever came last.
  std::optional<FreshReport> Fresh(const Client& c, size_t b,
                                   double now) const {
    double at = c.reported_at[b];
    uint64_t reported = c.reported[b];
    uint64_t own_then = c.own_then[b];
    if (o_.oob > 0) {
      // The stream's last report sent by now - delay; the client's own
      // calls counted as it arrived.
      const double k = std::floor((now - o_.delay - c.phase[b]) / o_.oob);
      const double sent = c.phase[b] + k * o_.oob;
      const double arrived = sent + o_.delay;
      if (k >= 0 && arrived > at) {
        reported = LoadAt(b, sent);
        own_then = OwnAt(c, b, arrived);
        at = arrived;
      }
    }
    if (now - at > o_.max_age) return std::nullopt;
    return FreshReport{poise::router::OthersOf(reported, own_then), own_then,
                       Ns(now - at)};
  }

  // L as client c sees it at `now` (estimate_ and reports_ filled in).
  uint64_t EstimateTotal(const Client& c, double now) {
    const size_t n = ids_.size();
    estimate_.assign(n, 0);
    reports_.resize(n);
    uint64_t total = 0;
    for (size_t b = 0; b < n; ++b) {
      switch (mode_) {
        case Mode::kLocal:
          estimate_[b] = c.own[b];
          break;
        case Mode::kIdeal:
          estimate_[b] = load_[b];
          break;
        case Mode::kFleet:
        case Mode::kPlain:
        case Mode::kAdmit:
          reports_[b] = Fresh(c, b, now);
          estimate_[b] = poise::router::FleetEstimate(reports_[b], c.own[b]);
          break;
      }
      total += estimate_[b];
    }
    if (mode_ != Mode::kLocal && mode_ != Mode::kIdeal) {
      // L as the picker sums it, each backend capped (OthersPartOfL).
      parts_.clear();
      for (size_t b = 0; b < n; ++b) {
        parts_.push_back({estimate_[b] - c.own[b], c.own[b], o_.weights[b]});
      }
      total = c.own_total +
              poise::router::OthersPartOfL(parts_, c.own_total,
                                           static_cast<uint32_t>(o_.factor),
                                           total_weight_);
    }
    return total;
  }

  // The bound a decision at `total` holds backend b to (room below it).
  uint64_t BoundOf(size_t b, uint64_t total) const {
    const UInt128 capacity = Bound(static_cast<uint32_t>(o_.factor), total,
                                   o_.weights[b], total_weight_)
                                 .Capacity();
    return capacity > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(capacity);
  }

  // FLEET's and ADMIT's loads for client c's pick at `now` under `total`:
  // the herding rule (fleet_load.h), as the picker applies it: only the
  // backends the decision visits are read, each read of a first attempt an
  // ask (`visits_ask`), a retry's not.
  auto HerdingLoads(Client& c, uint64_t total, double now, bool visits_ask) {
    const double share =
        static_cast<double>(c.own_total + 1) / static_cast<double>(total + 1);
    return [this, &c, total, now, share, visits_ask](size_t b) -> uint64_t {
      std::uniform_real_distribution<double> unit(0.0, 1.0);
      const double asks = visits_ask ? c.asks[b].Ask(Ns(now), Ns(o_.max_age))
                                     : c.asks[b].Rate(Ns(now), Ns(o_.max_age));
      const UInt128 capacity = Bound(static_cast<uint32_t>(o_.factor), total,
                                     o_.weights[b], total_weight_)
                                   .Capacity();
      return poise::router::HerdingLoad(reports_[b], c.own[b], capacity, share,
                                        asks, unit(rng_));
    };
  }

  // Client c's pick of the key's (n + 1)-th choice with room under `total`
  // (n = 0: a first attempt; n > 0: a retry, as the picker's NEXT_CHOICE):
  // FLEET and ADMIT by the herding rule, as the picker applies it, every
  // mode by the bound alone where it has no rule or the rule left no room.
  PreparedCandidates::Routed Route(Client& c, const std::string& key,
                                   uint64_t total, size_t n, double now) {
    if (mode_ == Mode::kFleet || mode_ == Mode::kAdmit) {
      const auto routed = prepared_->NthWithRoomForTotal(
          policy_, key, total, HerdingLoads(c, total, now, n == 0), n,
          scratch_);
      if (!routed.value().stale_total) return routed.value();
    }
    return prepared_
        ->NthWithRoomForTotal(
            policy_, key, total, [this](size_t b) { return estimate_[b]; }, n,
            scratch_)
        .value();
  }

  // A first attempt's backend; `bound` gets the bound the pick used.
  size_t Decide(uint32_t client, const std::string& key, double now,
                uint64_t* bound) {
    Client& c = clients_[client];
    const uint64_t total = EstimateTotal(c, now);
    const PreparedCandidates::Routed r = Route(c, key, total, 0, now);
    if (now >= o_.warmup) {
      ++outcome_.calls;
      // ADMIT counts where a call is served, at its admission.
      if (r.spilled && mode_ != Mode::kAdmit) ++spills_;
    }
    *bound = BoundOf(r.selection, total);
    owner_ = r.affinity;
    return r.selection;
  }

  // A retry's backend (attempt n + 1); `bound` as for Decide.
  size_t DecideRetry(uint32_t client, const std::string& key, uint32_t n,
                     double now, uint64_t* bound) {
    Client& c = clients_[client];
    const uint64_t total = EstimateTotal(c, now);
    const size_t chosen = Route(c, key, total, n, now).selection;
    *bound = BoundOf(chosen, total);
    return chosen;
  }

  void StartCall(uint32_t client, double now) {
    const std::string key = NextKey();
    uint64_t bound = 0;
    const size_t b = Decide(client, key, now, &bound);
    Attempt(client, key, 0, b, bound, now);
  }

  // ADMIT: a refusal back at its client, one round trip after it: the
  // report of the backend's count, then the call's next attempt.
  void Refused(const EndEvent& e, double now) {
    Client& c = clients_[e.client];
    const size_t b = e.backend;
    --c.own[b];  // the refused call held its slot until now
    --c.own_total;
    c.reported[b] = e.count;
    c.own_then[b] = c.own[b];
    c.reported_at[b] = now;
    if (e.attempt + 1 >= kMaxAttempts) {
      if (now >= o_.warmup) ++outcome_.failed;
      StartCall(e.client, now);
      return;
    }
    uint64_t bound = 0;
    const size_t next =
        DecideRetry(e.client, e.key, e.attempt + 1, now, &bound);
    Attempt(e.client, e.key, e.attempt + 1, next, bound, now);
  }

  // Attempt `attempt` of a call on `key` reaches backend b with `bound`.
  void Attempt(uint32_t client, const std::string& key, uint32_t attempt,
               size_t b, uint64_t bound, double now) {
    Client& c = clients_[client];
    if (mode_ == Mode::kAdmit) {
      if (load_[b] >= bound) {
        if (now >= o_.warmup) ++outcome_.refused;
        ++c.own[b];
        ++c.own_total;
        EndEvent refusal =
            EndEvent::Of(now + o_.rtt, client, static_cast<uint32_t>(b), 0);
        refusal.refusal = true;
        refusal.attempt = attempt;
        refusal.count = load_[b];
        refusal.key = key;
        ends_.push(std::move(refusal));
        return;
      }
      if (attempt == 0 ? b != owner_ : b != KeyOwner(key)) {
        if (now >= o_.warmup) ++spills_;
      }
    }
    ++c.own[b];
    ++c.own_total;
    ++load_[b];
    history_[b].push_back({now, load_[b]});
    if (now >= o_.warmup) {
      const double ratio = static_cast<double>(load_[b]) / global_bound_[b];
      outcome_.peak = std::max(outcome_.peak, ratio);
      if (static_cast<double>(load_[b]) > 1.25 * global_bound_[b] + 1) {
        outcome_.peak_within = false;
      }
    }
    std::exponential_distribution<double> exp(1.0);
    const double length = o_.exponential ? exp(rng_) : 1.0;
    const size_t record = c.next_record;
    c.next_record = (c.next_record + 1) % c.recent.size();
    c.recent[record] = {static_cast<uint32_t>(b), now, HUGE_VAL};
    ends_.push(
        EndEvent::Of(now + length, client, static_cast<uint32_t>(b), record));
  }

  void EndCall(const EndEvent& e, double now) {
    Client& c = clients_[e.client];
    const size_t b = e.backend;
    if (now >= o_.warmup && static_cast<double>(load_[b]) >= global_bound_[b]) {
      ++outcome_.freed_at_bound;
    }
    // The per-call report: the backend's count as the call ends (the call
    // itself still counted), against the client's own then (also with it).
    c.reported[b] = load_[b];
    c.own_then[b] = c.own[b];
    c.reported_at[b] = now;
    --c.own[b];
    --c.own_total;
    --load_[b];
    history_[b].push_back({now, load_[b]});
    CallRecord& r = c.recent[e.record];
    if (r.backend == e.backend && r.end == HUGE_VAL) r.end = now;
  }

  // The key's owner among every backend (all READY here).
  size_t KeyOwner(const std::string& key) const {
    return poise::WeightedRendezvous::Pick(key, candidates_, *table_).value();
  }

  const FleetOptions& o_;
  const Mode mode_;
  std::mt19937_64 rng_;
  const BoundedLoadRendezvous policy_;
  std::vector<std::string> ids_;
  uint64_t total_weight_ = 0;
  std::shared_ptr<const poise::IdentityTable> table_;
  std::vector<Candidate> candidates_;
  std::unique_ptr<PreparedCandidates> prepared_;
  size_t owner_ = 0;  // the last first attempt's key owner
  std::vector<double> global_bound_;
  std::vector<double> zipf_cdf_;
  std::vector<uint64_t> load_;
  std::vector<std::vector<std::pair<double, uint64_t>>> history_;
  std::vector<Client> clients_;
  std::vector<EndEvent> pending_starts_;
  std::priority_queue<EndEvent, std::vector<EndEvent>, std::greater<>> ends_;
  poise::DecisionScratch scratch_;
  std::vector<uint64_t> estimate_;
  std::vector<poise::router::LoadPart> parts_;
  std::vector<std::optional<FreshReport>> reports_;
  Outcome outcome_;
  uint64_t spills_ = 0;
  double area_ = 0;
  double measured_time_ = 0;
};

// The global bound of the heaviest backend: ceil(f C k w / (100 W)).
double GlobalBound(const FleetOptions& o) {
  uint64_t w = 0;
  for (uint32_t x : o.weights) w += x;
  return static_cast<double>(
      Bound(static_cast<uint32_t>(o.factor), o.clients * o.calls - 1,
            *std::max_element(o.weights.begin(), o.weights.end()), w)
          .Capacity());
}

void PrintHeader(const FleetOptions& o, double bound) {
  if (o.csv) {
    std::printf(
        "mode,clients,calls,backends,oob,bound,peak,avg_max,peak_ratio,"
        "avg_max_ratio,spill,owner_share,peak_within,refused_share,failed,"
        "freed_at_bound_share\n");
    return;
  }
  std::printf(
      "%" PRIu64 " clients x %" PRIu64 " calls, %" PRIu64
      " backends, f = %" PRIu64
      ", hot share %.2f, %s calls, %s; global bound %.0f\n",
      o.clients, o.calls, o.backends, o.factor, o.hot_share,
      o.exponential ? "exponential" : "fixed",
      o.oob > 0 ? "per-call and out-of-band reports" : "per-call reports only",
      bound);
  std::printf("%-6s %8s %8s %10s %10s %7s %12s %15s\n", "mode", "peak",
              "avg max", "peak/B", "avg max/B", "spill", "owner share",
              "freed at bound");
}

void PrintRow(const FleetOptions& o, double bound, Mode mode,
              const Outcome& out) {
  const auto per_call = [&out](uint64_t count) {
    return out.calls > 0
               ? static_cast<double>(count) / static_cast<double>(out.calls)
               : 0.0;
  };
  const double refused_share = per_call(out.refused);
  const double freed_share = per_call(out.freed_at_bound);
  if (o.csv) {
    std::printf("%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64
                ",%g,%.0f,%.2f,%.2f,%.3f,%.3f,%.4f,%.4f,%d,%.4f,%" PRIu64
                ",%.4f\n",
                ModeName(mode), o.clients, o.calls, o.backends, o.oob, bound,
                out.peak * bound, out.avg_max * bound, out.peak, out.avg_max,
                out.spill, 1 - out.spill, out.peak_within ? 1 : 0,
                refused_share, out.failed, freed_share);
    return;
  }
  std::printf("%-6s %8.1f %8.2f %10.2f %10.3f %6.1f%% %11.1f%% %14.1f%%",
              ModeName(mode), out.peak * bound, out.avg_max * bound, out.peak,
              out.avg_max, 100 * out.spill, 100 * (1 - out.spill),
              100 * freed_share);
  if (mode == Mode::kAdmit) {
    std::printf("  refused %.2f%% of %" PRIu64 " calls, %" PRIu64 " failed",
                100 * refused_share, out.calls, out.failed);
  }
  std::printf("\n");
}

}  // namespace

int RunFleet(int argc, char** argv) {
  FleetOptions o;
  if (const std::optional<int> exit = ParseFleetOptions(argc, argv, &o)) {
    return *exit;
  }
  const double bound = GlobalBound(o);
  PrintHeader(o, bound);
  std::vector<Mode> modes = {Mode::kLocal, Mode::kFleet, Mode::kIdeal};
  if (o.plain) modes.push_back(Mode::kPlain);
  if (o.admission) modes.push_back(Mode::kAdmit);
  std::vector<Outcome> outcomes;
  for (const Mode mode : modes) {
    outcomes.push_back(Fleet(o, mode).Run());
    PrintRow(o, bound, mode, outcomes.back());
  }
  // One instant view never passes a backend's bound (the simulation's own
  // invariant); the reports bound the fleet below each client's own counts.
  const bool ideal_within = outcomes[2].peak <= 1.0;
  if (o.check && !(ideal_within && outcomes[1].avg_max < outcomes[0].avg_max)) {
    std::fprintf(stderr,
                 "poise-sim: check failed: IDEAL within its bound: %s; FLEET's "
                 "time-averaged maximum %.3f B, LOCAL's %.3f B\n",
                 ideal_within ? "yes" : "no", outcomes[1].avg_max,
                 outcomes[0].avg_max);
    return 1;
  }
  return 0;
}

}  // namespace poise_sim
