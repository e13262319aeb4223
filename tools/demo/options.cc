#include "options.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace poise_demo {
namespace {

int Usage(const char* why) {
  if (why != nullptr) std::fprintf(stderr, "poise-demo: %s\n", why);
  std::fprintf(
      stderr,
      "usage: poise-demo [--backends N] [--weights a,b,...] [--factor PCT]\n"
      "                  [--duration SECONDS] [--keys N] [--concurrency N]\n"
      "                  [--delay-ms MS] [--stop INDEX] [--json]\n"
      "  --backends N       backends to start on 127.0.0.1 (1..64, default "
      "5)\n"
      "  --weights a,b,...  one weight per backend (default 1,1,2,3,5, "
      "repeated)\n"
      "  --factor PCT       bounded_load_rendezvous balance factor (>= 100, "
      "default 150)\n"
      "  --duration S       measured seconds per policy (0.2..120, default "
      "4)\n"
      "  --keys N           distinct Zipf keys besides the hot key (default "
      "1000)\n"
      "  --concurrency N    calls in flight (1..256, default 16)\n"
      "  --delay-ms MS      server-side delay per call (0..1000, default 2)\n"
      "  --stop INDEX       backend stopped mid-run (default backends/2)\n"
      "  --json             print the figures as one JSON object\n");
  return 2;
}

bool ParseUint(const std::string& text, uint64_t lo, uint64_t hi,
               uint64_t* out) {
  uint64_t value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < lo || value > hi) {
    return false;
  }
  *out = value;
  return true;
}

// One option that takes a value. Returns 0 on success, else the exit code.
int ParseValue(const std::string& arg, const std::string& value, Options* opt,
               bool* backends_given) {
  uint64_t n = 0;
  if (arg == "--backends") {
    if (!ParseUint(value, 1, 64, &n)) return Usage("bad --backends");
    opt->backends = static_cast<size_t>(n);
    *backends_given = true;
  } else if (arg == "--weights") {
    opt->weights.clear();
    for (absl::string_view part : absl::StrSplit(value, ',')) {
      if (!ParseUint(std::string{part}, 1, 1000000, &n)) {
        return Usage("bad --weights (positive integers, comma-separated)");
      }
      opt->weights.push_back(n);
    }
  } else if (arg == "--factor") {
    if (!ParseUint(value, 100, 100000, &n)) return Usage("bad --factor");
    opt->factor = n;
  } else if (arg == "--duration") {
    double d = 0;
    if (!absl::SimpleAtod(value, &d) || !(d >= 0.2 && d <= 120)) {
      return Usage("bad --duration");
    }
    opt->duration = d;
  } else if (arg == "--keys") {
    if (!ParseUint(value, 1, 1000000, &n)) return Usage("bad --keys");
    opt->keys = static_cast<size_t>(n);
  } else if (arg == "--concurrency") {
    if (!ParseUint(value, 1, 256, &n)) return Usage("bad --concurrency");
    opt->concurrency = static_cast<size_t>(n);
  } else if (arg == "--delay-ms") {
    if (!ParseUint(value, 0, 1000, &n)) return Usage("bad --delay-ms");
    opt->delay_ms = static_cast<uint32_t>(n);
  } else if (arg == "--stop") {
    if (!ParseUint(value, 0, 63, &n)) return Usage("bad --stop");
    opt->stop = static_cast<size_t>(n);
  } else {
    return Usage(("unknown option " + arg).c_str());
  }
  return 0;
}

// The options that depend on others: --weights alone sets the number of
// backends, and the default weights and stopped backend follow that number.
int Complete(bool backends_given, Options* opt) {
  if (!opt->weights.empty()) {
    if (!backends_given) opt->backends = opt->weights.size();
    if (opt->weights.size() != opt->backends) {
      return Usage("--weights needs one weight per backend");
    }
  } else {
    static constexpr uint64_t kDefault[] = {1, 1, 2, 3, 5};
    for (size_t i = 0; i < opt->backends; ++i) {
      opt->weights.push_back(kDefault[i % 5]);
    }
  }
  if (!opt->stop.has_value()) opt->stop = opt->backends / 2;
  if (*opt->stop >= opt->backends) return Usage("--stop is not a backend");
  return 0;
}

}  // namespace

int ParseOptions(int argc, char** argv, Options* opt) {
  bool backends_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      opt->json = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") return Usage(nullptr);
    static const char* const kValued[] = {
        "--backends", "--weights",     "--factor",   "--duration",
        "--keys",     "--concurrency", "--delay-ms", "--stop"};
    if (std::find(std::begin(kValued), std::end(kValued), arg) ==
        std::end(kValued)) {
      return Usage(("unknown option " + arg).c_str());
    }
    if (i + 1 >= argc) return Usage(("missing value for " + arg).c_str());
    const std::string value = argv[++i];
    if (int rc = ParseValue(arg, value, opt, &backends_given); rc != 0) {
      return rc;
    }
  }
  return Complete(backends_given, opt);
}

}  // namespace poise_demo
