#include "scale_out.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "poise/rendezvous.h"
#include "src/router/slow_start.h"

namespace poise_sim {
namespace {

using poise::router::SlowStart;

constexpr char kScaleOutUsage[] =
    "usage: poise-sim --scale-out [--backends N] [--keys K] [--window-s S]\n"
    "                 [--min-percent M]\n"
    "\n"
    "  N backends (default 4, weight 1, identities backend-0..) serve K keys\n"
    "  (default 100000, \"key-0\"..); backend-N joins. Prints the keys moved\n"
    "  at each slow-start step (window S seconds, default 60; "
    "minWeightPercent\n"
    "  M, default 10) next to the one-shot move without slow start, and\n"
    "  checks that no key moves twice or between two old backends.\n";

bool Number(const char* text, uint64_t min, uint64_t max, uint64_t* out) {
  char* end = nullptr;
  const uint64_t v = std::strtoull(text, &end, 10);
  if (end == text || *end != '\0' || v < min || v > max) return false;
  *out = v;
  return true;
}

struct Options {
  uint64_t old_count = 4;
  uint64_t keys = 100000;
  uint64_t window_s = 60;
  uint64_t min_percent = 10;
};

// The options that take a number: the field each sets and its largest value.
struct NumberOption {
  std::string_view name;
  uint64_t Options::*field;
  uint64_t max;
};
constexpr NumberOption kNumberOptions[] = {
    {"--backends", &Options::old_count, 1000},
    {"--keys", &Options::keys, 10000000},
    {"--window-s", &Options::window_s, 3600},
    {"--min-percent", &Options::min_percent, 100},
};

const NumberOption* FindNumberOption(std::string_view name) {
  for (const NumberOption& option : kNumberOptions) {
    if (option.name == name) return &option;
  }
  return nullptr;
}

// The options after "--scale-out": nullopt to run the scenario, else the
// exit code (0 after --help, 2 for a bad option).
std::optional<int> ParseOptions(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kScaleOutUsage, stdout);
      return 0;
    }
    const NumberOption* option = FindNumberOption(arg);
    if (option == nullptr || i + 1 >= argc ||
        !Number(argv[++i], 1, option->max, &(o->*option->field))) {
      std::fprintf(stderr, "poise-sim: bad --scale-out option '%s'\n%s",
                   argv[i], kScaleOutUsage);
      return 2;
    }
  }
  return std::nullopt;
}

// The old backends backend-0.. at weight `scale`, the added one after them,
// and the keys. The candidates borrow the identities: neither copied nor
// moved.
class Scenario final {
 public:
  Scenario(uint64_t old_count, uint64_t keys, uint32_t scale) {
    for (uint64_t b = 0; b <= old_count; ++b) {
      ids_.push_back("backend-" + std::to_string(b));
    }
    candidates_.reserve(ids_.size());
    for (const std::string& id : ids_) candidates_.push_back({id, scale, true});
    keys_.resize(keys);
    for (uint64_t k = 0; k < keys; ++k) keys_[k] = "key-" + std::to_string(k);
  }
  Scenario(const Scenario&) = delete;
  Scenario& operator=(const Scenario&) = delete;

  // The added backend's index and candidate.
  size_t added() const { return candidates_.size() - 1; }
  poise::Candidate& added_candidate() { return candidates_.back(); }
  uint64_t keys() const { return keys_.size(); }

  // Every key's owner over the candidates as they are now.
  std::vector<size_t> Owners() const {
    std::vector<size_t> out(keys_.size());
    for (size_t k = 0; k < keys_.size(); ++k) {
      out[k] = poise::WeightedRendezvous::Pick(keys_[k], candidates_).value();
    }
    return out;
  }

 private:
  std::vector<std::string> ids_;
  std::vector<poise::Candidate> candidates_;
  std::vector<std::string> keys_;
};

// What the steps moved, over all of them.
struct Moves {
  uint64_t total = 0;
  uint64_t twice = 0;        // moves of keys that had moved already
  uint64_t between_old = 0;  // moves onto an old backend
  uint64_t max_step = 0;     // the most in one step after the start
  std::vector<size_t> last;  // the owners after the last step
};

// Steps 0 (slow start's start) to `steps` (full weight) from the owners
// `before` it, one row each.
Moves RunSteps(Scenario& scenario, const std::vector<size_t>& before,
               uint32_t m, uint32_t steps, uint32_t scale, double step_s) {
  const uint64_t keys = scenario.keys();
  const size_t added = scenario.added();
  Moves moves;
  moves.last = before;
  std::vector<uint8_t> moved_before(keys, 0);
  for (uint32_t j = 0; j <= steps; ++j) {
    poise::Candidate& candidate = scenario.added_candidate();
    candidate.weight = SlowStart::EffectiveWeight(1, scale, m, j, steps);
    const std::vector<size_t> now = scenario.Owners();
    uint64_t moved = 0, on_new = 0;
    for (uint64_t k = 0; k < keys; ++k) {
      on_new += now[k] == added;
      if (now[k] == moves.last[k]) continue;
      ++moved;
      if (now[k] != added) ++moves.between_old;
      if (++moved_before[k] > 1) ++moves.twice;
    }
    moves.total += moved;
    if (j > 0 && moved > moves.max_step) moves.max_step = moved;
    std::printf("%5u %8.2f %7u/%-4u %12" PRIu64 " %8" PRIu64 " %10.0f\n", j,
                j * step_s, candidate.weight, scale, on_new, moved,
                static_cast<double>(moved) / step_s);
    moves.last = now;
  }
  return moves;
}

}  // namespace

int RunScaleOut(int argc, char** argv) {
  Options o;
  if (const std::optional<int> exit_code = ParseOptions(argc, argv, &o)) {
    return *exit_code;
  }
  const auto m = static_cast<uint32_t>(o.min_percent);
  const uint32_t steps = SlowStart::StepsFor(m);
  const uint32_t scale = SlowStart::ScaleFor(1);
  Scenario scenario(o.old_count, o.keys, scale);
  scenario.added_candidate().eligible = false;
  const std::vector<size_t> before = scenario.Owners();
  scenario.added_candidate().eligible = true;
  const std::vector<size_t> full = scenario.Owners();
  uint64_t moved_at_once = 0;
  for (uint64_t k = 0; k < o.keys; ++k) moved_at_once += full[k] != before[k];
  const double step_s = static_cast<double>(o.window_s) / steps;
  std::printf("scale-out %" PRIu64 " -> %" PRIu64 " backends, %" PRIu64
              " keys; slowStart window %" PRIu64
              "s, minWeightPercent %u: %u steps "
              "of %.3fs, weights x %u\n\n",
              o.old_count, o.old_count + 1, o.keys, o.window_s, m, steps,
              step_s, scale);
  std::printf(
      "without slow start: %" PRIu64
      " keys move at t = 0 (%.1f%% of all keys), 0 after\n\n",
      moved_at_once,
      100.0 * static_cast<double>(moved_at_once) / static_cast<double>(o.keys));
  std::printf("with slow start:\n%5s %8s %12s %12s %8s %10s\n", "step", "t(s)",
              "new weight", "keys on new", "moved", "moved/s");
  const Moves moves = RunSteps(scenario, before, m, steps, scale, step_s);
  uint64_t differ_from_full = 0;
  for (uint64_t k = 0; k < o.keys; ++k) {
    differ_from_full += moves.last[k] != full[k];
  }
  std::printf("\nkeys moved in all: %" PRIu64 " (without slow start: %" PRIu64
              "); largest step after the start: %" PRIu64
              " (%.1f%% of the new backend's keys)\n"
              "keys moved twice: %" PRIu64
              "; keys moved between old backends: %" PRIu64
              "; keys off the full-weight owner at the end: %" PRIu64 "\n",
              moves.total, moved_at_once, moves.max_step,
              100.0 * static_cast<double>(moves.max_step) /
                  static_cast<double>(moved_at_once),
              moves.twice, moves.between_old, differ_from_full);
  return moves.twice == 0 && moves.between_old == 0 && differ_from_full == 0
             ? 0
             : 1;
}

}  // namespace poise_sim
