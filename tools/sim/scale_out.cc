#include "scale_out.h"

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "poise/rendezvous.h"
#include "src/router/slow_start.h"

namespace poise_sim {
namespace {

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

}  // namespace

int RunScaleOut(int argc, char** argv) {
  uint64_t old_count = 4, keys = 100000, window_s = 60, min_percent = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fputs(kScaleOutUsage, stdout);
      return 0;
    }
    uint64_t* target = arg == "--backends"      ? &old_count
                       : arg == "--keys"        ? &keys
                       : arg == "--window-s"    ? &window_s
                       : arg == "--min-percent" ? &min_percent
                                                : nullptr;
    const uint64_t max = arg == "--keys"       ? 10000000
                         : arg == "--window-s" ? 3600
                         : arg == "--backends" ? 1000
                                               : 100;
    if (target == nullptr || i + 1 >= argc ||
        !Number(argv[++i], 1, max, target)) {
      std::fprintf(stderr, "poise-sim: bad --scale-out option '%s'\n%s",
                   argv[i], kScaleOutUsage);
      return 2;
    }
  }
  using poise::router::SlowStart;
  const auto m = static_cast<uint32_t>(min_percent);
  const uint32_t steps = SlowStart::StepsFor(m);
  const uint32_t scale = SlowStart::ScaleFor(1);
  std::vector<std::string> ids;
  for (uint64_t b = 0; b <= old_count; ++b) {
    ids.push_back("backend-" + std::to_string(b));
  }
  std::vector<poise::Candidate> c;
  c.reserve(ids.size());
  for (const std::string& id : ids) c.push_back({id, scale, true});
  const size_t added = ids.size() - 1;
  std::vector<std::string> key_text(keys);
  for (uint64_t k = 0; k < keys; ++k) key_text[k] = "key-" + std::to_string(k);
  auto owners = [&](const std::vector<poise::Candidate>& cands) {
    std::vector<size_t> out(keys);
    for (uint64_t k = 0; k < keys; ++k) {
      out[k] = poise::WeightedRendezvous::Pick(key_text[k], cands).value();
    }
    return out;
  };
  c[added].eligible = false;
  const std::vector<size_t> before = owners(c);
  c[added].eligible = true;
  const std::vector<size_t> full = owners(c);
  uint64_t moved_at_once = 0;
  for (uint64_t k = 0; k < keys; ++k) moved_at_once += full[k] != before[k];
  const double step_s = static_cast<double>(window_s) / steps;
  std::printf("scale-out %" PRIu64 " -> %" PRIu64 " backends, %" PRIu64
              " keys; slowStart window %" PRIu64
              "s, minWeightPercent %u: %u steps "
              "of %.3fs, weights x %u\n\n",
              old_count, old_count + 1, keys, window_s, m, steps, step_s,
              scale);
  std::printf(
      "without slow start: %" PRIu64
      " keys move at t = 0 (%.1f%% of all keys), 0 after\n\n",
      moved_at_once,
      100.0 * static_cast<double>(moved_at_once) / static_cast<double>(keys));
  std::printf("with slow start:\n%5s %8s %12s %12s %8s %10s\n", "step", "t(s)",
              "new weight", "keys on new", "moved", "moved/s");
  std::vector<size_t> previous = before;
  std::vector<uint8_t> moves(keys, 0);
  uint64_t twice = 0, between_old = 0, max_step = 0, total = 0;
  for (uint32_t j = 0; j <= steps; ++j) {
    c[added].weight = SlowStart::EffectiveWeight(1, scale, m, j, steps);
    const std::vector<size_t> now = owners(c);
    uint64_t moved = 0, on_new = 0;
    for (uint64_t k = 0; k < keys; ++k) {
      on_new += now[k] == added;
      if (now[k] == previous[k]) continue;
      ++moved;
      if (now[k] != added) ++between_old;
      if (++moves[k] > 1) ++twice;
    }
    total += moved;
    if (j > 0 && moved > max_step) max_step = moved;
    std::printf("%5u %8.2f %7u/%-4u %12" PRIu64 " %8" PRIu64 " %10.0f\n", j,
                j * step_s, c[added].weight, scale, on_new, moved,
                static_cast<double>(moved) / step_s);
    previous = now;
  }
  uint64_t differ_from_full = 0;
  for (uint64_t k = 0; k < keys; ++k) {
    differ_from_full += previous[k] != full[k];
  }
  std::printf("\nkeys moved in all: %" PRIu64 " (without slow start: %" PRIu64
              "); largest step after the start: %" PRIu64
              " (%.1f%% of the new backend's keys)\n"
              "keys moved twice: %" PRIu64
              "; keys moved between old backends: %" PRIu64
              "; keys off the full-weight owner at the end: %" PRIu64 "\n",
              total, moved_at_once, max_step,
              100.0 * static_cast<double>(max_step) /
                  static_cast<double>(moved_at_once),
              twice, between_old, differ_from_full);
  return twice == 0 && between_old == 0 && differ_from_full == 0 ? 0 : 1;
}

}  // namespace poise_sim
