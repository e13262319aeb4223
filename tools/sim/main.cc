// poise-sim: the load-balancing lesson's forty-subject simulation, with the
// project's rendezvous rules (through poise::core) and brpc's bounded-load
// ring added next to the lesson's four rules.
//
// With no options it prints the lesson's tables for loads 1200, 2000, 2600;
// the four classic rules reproduce the lesson's numbers exactly. Bad options
// print the usage on stderr and exit 2; a failed plot exits 1.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "fleet.h"
#include "plot.h"
#include "report.h"
#include "rules.h"
#include "scale_out.h"
#include "subjects.h"
#include "zones.h"

namespace poise_sim {
namespace {

constexpr char kUsage[] =
    "usage: poise-sim [--subjects N] [--seed S] [--loads A,B,...]\n"
    "                 [--factors F,G,...] [--csv]\n"
    "                 [--plot FILE.png|FILE.svg [--plot-load N]]\n"
    "\n"
    "  --subjects N   subjects to generate, 1..1000 (default 40)\n"
    "  --seed S       generator seed, unsigned 64-bit (default 20260812)\n"
    "  --loads L,...  loads (units = jobs) to run, each 0..1000000\n"
    "                 (default 1200,2000,2600)\n"
    "  --factors F,.. bounded-rendezvous balance factors in percent,\n"
    "                 each 100..1000000 (default 100,125,150)\n"
    "  --csv          print CSV instead of the text tables\n"
    "  --plot FILE    also draw per-subject load vs capacity for every rule\n"
    "                 with gnuplot; the extension picks PNG or SVG\n"
    "  --plot-load N  the load to plot, 0..1000000 (default 2000)\n"
    "  --help         this text\n"
    "  --scale-out    slow start's scale-out scenario instead (first option;\n"
    "                 poise-sim --scale-out --help)\n"
    "  --fleet        bounds over a fleet of clients instead (first option;\n"
    "                 poise-sim --fleet --help)\n"
    "  --zones        clients and backends in zones instead (first option;\n"
    "                 poise-sim --zones --help)\n"
    "\n"
    "Terms (a load-balancing lesson's vocabulary, kept so its figures\n"
    "compare):\n"
    "  subject   a backend: subject-01.. with a random capacity of 20..100\n"
    "            units (its weight in the rendezvous rules)\n"
    "  job       one request key (0, 1, 2, ...); each job is one unit of\n"
    "            load, placed once by each rule\n"
    "  load      the number of jobs placed in one run\n"
    "  over      subjects given more units than their capacity; over units:\n"
    "            the units past it; idle: capacity left unused; "
    "undistributed:\n"
    "            jobs a rule did not place; no load at all: subjects with "
    "none\n"
    "\n"
    "Rules: round-robin, proportional, least-connections, consistent-hashing\n"
    "(the lesson's four), weighted-rendezvous and bounded-rendezvous-F\n"
    "(poise::core; weight = capacity, identity = subject-NN, key = job number\n"
    "in decimal), brpc-bounded-ring-125 (the lesson's ring, each subject\n"
    "capped at ceil(1.25 * (placed + 1) / subjects), overflow clockwise).\n"
    "\n"
    "CSV format (--csv): two sections separated by one empty line.\n"
    "  1. header  rule,load,over,over_units,idle,undistributed,no_load_at_all\n"
    "     then one row per rule x load, rules in the order above.\n"
    "  2. header  rule,share_of_subject_20,moved_when_removed\n"
    "     then one row per rule that maps jobs (all but proportional): at\n"
    "     load 1200, the units subject 20 held and the jobs whose subject\n"
    "     changed when subject 20 is removed. Absent with fewer than 20\n"
    "     subjects (so is the second text table).\n";

constexpr uint64_t kMaxLoad = 1000000;
constexpr uint64_t kMaxSubjects = 1000;
constexpr uint64_t kMaxFactor = 1000000;

struct Options {
  uint32_t subjects = kLessonSubjects;
  uint64_t seed = kLessonSeed;
  std::vector<uint64_t> loads = {1200, 2000, 2600};
  std::vector<uint32_t> factors = {100, 125, 150};
  bool csv = false;
  bool help = false;
  std::string plot;
  PlotFormat plot_format = PlotFormat::kPng;
  uint64_t plot_load = 2000;
  bool plot_load_given = false;
};

int Usage(const std::string& problem) {
  std::fprintf(stderr, "poise-sim: %s\n%s", problem.c_str(), kUsage);
  return 2;
}

// All of `text` as an unsigned decimal in [min, max].
bool ParseUnsigned(std::string_view text, uint64_t min, uint64_t max,
                   uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  unsigned __int128 value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<unsigned>(c - '0');
  }
  if (value < min || value > max) return false;
  *out = static_cast<uint64_t>(value);
  return true;
}

// A comma-separated, non-empty list of unsigned decimals in [min, max].
bool ParseList(std::string_view text, uint64_t min, uint64_t max,
               std::vector<uint64_t>* out) {
  out->clear();
  while (true) {
    const size_t comma = text.find(',');
    uint64_t value = 0;
    if (!ParseUnsigned(text.substr(0, comma), min, max, &value)) return false;
    out->push_back(value);
    if (comma == std::string_view::npos) return true;
    text.remove_prefix(comma + 1);
  }
}

// Applies one option that takes a value; false when the value is bad.
bool ApplyValue(std::string_view name, std::string_view value, Options* o) {
  uint64_t number = 0;
  std::vector<uint64_t> list;
  if (name == "--subjects") {
    if (!ParseUnsigned(value, 1, kMaxSubjects, &number)) return false;
    o->subjects = static_cast<uint32_t>(number);
  } else if (name == "--seed") {
    return ParseUnsigned(value, 0, UINT64_MAX, &o->seed);
  } else if (name == "--loads") {
    return ParseList(value, 0, kMaxLoad, &o->loads);
  } else if (name == "--factors") {
    if (!ParseList(value, 100, kMaxFactor, &list)) return false;
    o->factors.clear();
    for (uint64_t f : list) o->factors.push_back(static_cast<uint32_t>(f));
  } else if (name == "--plot") {
    o->plot = std::string(value);
    return PlotFormatOf(o->plot, &o->plot_format);
  } else if (name == "--plot-load") {
    o->plot_load_given = true;
    return ParseUnsigned(value, 0, kMaxLoad, &o->plot_load);
  }
  return true;
}

bool TakesValue(std::string_view name) {
  return name == "--subjects" || name == "--seed" || name == "--loads" ||
         name == "--factors" || name == "--plot" || name == "--plot-load";
}

// Fills `options`; on a bad command line returns false with `problem` set.
bool ParseArgs(int argc, char** argv, Options* options, std::string* problem) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--csv") {
      options->csv = true;
    } else if (arg == "--help" || arg == "-h") {
      options->help = true;
    } else if (!TakesValue(arg)) {
      *problem = "unknown option '" + std::string(arg) + "'";
      return false;
    } else if (i + 1 >= argc) {
      *problem = std::string(arg) + " needs a value";
      return false;
    } else if (!ApplyValue(arg, argv[++i], options)) {
      *problem =
          "bad value '" + std::string(argv[i]) + "' for " + std::string(arg);
      return false;
    }
  }
  if (options->plot_load_given && options->plot.empty()) {
    *problem = "--plot-load needs --plot";
    return false;
  }
  return true;
}

int Run(const Options& options) {
  const std::vector<Subject> subjects =
      MakeSubjects(options.subjects, options.seed);
  const std::vector<Rule> rules = AllRules(options.factors);
  const Report report = Simulate(subjects, rules, options.loads);
  if (options.csv) {
    PrintCsv(stdout, report);
  } else {
    PrintText(stdout, report);
  }
  if (options.plot.empty()) return 0;
  std::string error;
  if (!WritePlot(options.plot, options.plot_format, subjects, rules,
                 options.plot_load, &error)) {
    std::fprintf(stderr, "poise-sim: %s\n", error.c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace poise_sim

int main(int argc, char** argv) {
  // Slow start's scale-out scenario: its own options (scale_out.h).
  if (argc > 1 && std::string_view(argv[1]) == "--scale-out") {
    return poise_sim::RunScaleOut(argc - 1, argv + 1);
  }
  // Clients and backends in zones: its own options (zones.h).
  if (argc > 1 && std::string_view(argv[1]) == "--zones") {
    return poise_sim::RunZones(argc - 1, argv + 1);
  }
  // Bounds over a fleet of clients: its own options (fleet.h).
  if (argc > 1 && std::string_view(argv[1]) == "--fleet") {
    return poise_sim::RunFleet(argc - 1, argv + 1);
  }
  poise_sim::Options options;
  std::string problem;
  if (!poise_sim::ParseArgs(argc, argv, &options, &problem)) {
    return poise_sim::Usage(problem);
  }
  if (options.help) {
    std::fputs(poise_sim::kUsage, stdout);
    return 0;
  }
  try {
    return poise_sim::Run(options);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "poise-sim: %s\n", e.what());
    return 1;
  }
}
