// Runs the poise-sim binary and checks its tables: the lesson's classic rows
// number for number, and for the rules the project adds only properties that
// hold by construction.
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

#ifndef POISE_SIM_PATH
#error "POISE_SIM_PATH must name the poise-sim binary"
#endif

namespace {

struct Output {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `[env] poise-sim args` through the shell; stdout via the pipe, stderr
// via a temporary file.
Output RunSim(const std::string& args, const std::string& env = "") {
  std::string err_path = testing::TempDir() + "poise_sim_err_XXXXXX";
  const int fd = mkstemp(err_path.data());
  if (fd >= 0) close(fd);
  const std::string command =
      env + " '" POISE_SIM_PATH "' " + args + " 2>'" + err_path + "'";
  Output result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    result.out.append(buffer, n);
  }
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.err = ReadFile(err_path);
  unlink(err_path.c_str());
  return result;
}

std::vector<std::string> Split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) parts.push_back(part);
  if (!text.empty() && text.back() == separator) parts.emplace_back();
  return parts;
}

std::vector<std::string> Words(const std::string& line) {
  std::vector<std::string> words;
  std::istringstream in(line);
  std::string word;
  while (in >> word) words.push_back(word);
  return words;
}

// over, over units, idle, undistributed, no load at all.
using Columns = std::array<uint64_t, 5>;
// share of subject 20, moved when removed.
using Moved = std::pair<uint64_t, uint64_t>;

struct Tables {
  std::string header;
  std::map<std::pair<std::string, uint64_t>, Columns> rows;
  std::map<std::string, Moved> moved;
  std::vector<std::string> row_order;
};

// Parses the text output: the subjects line, the load table (7 words a row)
// and the removal table (3 words a row), told apart by their header lines.
Tables ParseText(const std::string& text) {
  Tables t;
  int section = 0;
  for (const std::string& line : Split(text, '\n')) {
    const std::vector<std::string> w = Words(line);
    if (w.empty()) continue;
    if (w[0] == "subjects") {
      t.header = line;
    } else if (w[0] == "rule") {
      ++section;
    } else if (section == 1 && w.size() == 7) {
      Columns c;
      for (size_t i = 0; i < 5; ++i) c[i] = std::stoull(w[i + 2]);
      t.rows[{w[0], std::stoull(w[1])}] = c;
      t.row_order.push_back(w[0] + " " + w[1]);
    } else if (section == 2 && w.size() == 3) {
      t.moved[w[0]] = {std::stoull(w[1]), std::stoull(w[2])};
    } else {
      ADD_FAILURE() << "unexpected line: " << line;
    }
  }
  return t;
}

Tables RunDefault() {
  const Output o = RunSim("");
  EXPECT_EQ(o.exit_code, 0) << o.err;
  return ParseText(o.out);
}

constexpr uint64_t kTotalCapacity = 2336;
const std::vector<uint64_t> kLoads = {1200, 2000, 2600};
const std::vector<std::string> kKeyRules = {"round-robin",
                                            "least-connections",
                                            "consistent-hashing",
                                            "weighted-rendezvous",
                                            "bounded-rendezvous-100",
                                            "bounded-rendezvous-125",
                                            "bounded-rendezvous-150",
                                            "brpc-bounded-ring-125"};

TEST(PoiseSim, HeaderIsTheLessons) {
  EXPECT_EQ(RunDefault().header,
            "subjects 40 | total capacity 2336 | smallest 22 largest 99");
}

// The lesson's printed table, all twelve rows.
TEST(PoiseSim, ClassicRowsEqualTheLesson) {
  const std::map<std::pair<std::string, uint64_t>, Columns> lesson = {
      {{"round-robin", 1200}, {6, 24, 1160, 0, 0}},
      {{"round-robin", 2000}, {14, 239, 575, 0, 0}},
      {{"round-robin", 2600}, {23, 533, 269, 0, 0}},
      {{"proportional", 1200}, {0, 0, 1156, 20, 0}},
      {{"proportional", 2000}, {0, 0, 357, 21, 0}},
      {{"proportional", 2600}, {40, 245, 0, 19, 0}},
      {{"least-connections", 1200}, {0, 0, 1136, 0, 0}},
      {{"least-connections", 2000}, {0, 0, 336, 0, 0}},
      {{"least-connections", 2600}, {40, 264, 0, 0, 0}},
      {{"consistent-hashing", 1200}, {7, 66, 1202, 0, 0}},
      {{"consistent-hashing", 2000}, {13, 277, 613, 0, 0}},
      {{"consistent-hashing", 2600}, {22, 559, 295, 0, 0}},
  };
  const Tables t = RunDefault();
  for (const auto& [key, expected] : lesson) {
    const auto it = t.rows.find(key);
    ASSERT_NE(it, t.rows.end()) << key.first << " " << key.second;
    EXPECT_EQ(it->second, expected) << key.first << " " << key.second;
  }
  // Nine rules at three loads, in the lesson's order (rule-major).
  ASSERT_EQ(t.row_order.size(), 27u);
  EXPECT_EQ(t.row_order[0], "round-robin 1200");
  EXPECT_EQ(t.row_order[11], "consistent-hashing 2600");
}

TEST(PoiseSim, ClassicMovedRowsEqualTheLesson) {
  const Tables t = RunDefault();
  EXPECT_EQ(t.moved.at("round-robin"), Moved(30, 1181));
  EXPECT_EQ(t.moved.at("least-connections"), Moved(15, 1181));
  EXPECT_EQ(t.moved.at("consistent-hashing"), Moved(29, 29));
  EXPECT_EQ(t.moved.count("proportional"), 0u);  // no key mapping
  EXPECT_EQ(t.moved.size(), kKeyRules.size());
}

// Rendezvous hashing's minimal disruption: removing a candidate moves exactly
// the keys it owned, and no others.
TEST(PoiseSim, WeightedRendezvousMovesOnlyTheRemovedSubjectsKeys) {
  const Moved m = RunDefault().moved.at("weighted-rendezvous");
  EXPECT_GT(m.first, 0u);
  EXPECT_EQ(m.second, m.first);
}

// The removed subject's own jobs must land elsewhere under any rule.
TEST(PoiseSim, EveryRuleMovesAtLeastTheRemovedSubjectsKeys) {
  const Tables t = RunDefault();
  for (const std::string& rule : kKeyRules) {
    const Moved m = t.moved.at(rule);
    EXPECT_GE(m.second, m.first) << rule;
  }
}

// Only proportional leaves units unplaced (it floors shares, TM10); every
// other rule places every job, bounded ones included (their caps sum past
// the load).
TEST(PoiseSim, EveryRuleButProportionalPlacesEveryUnit) {
  const Tables t = RunDefault();
  for (const std::string& rule : kKeyRules) {
    for (uint64_t load : kLoads) {
      EXPECT_EQ(t.rows.at({rule, load})[3], 0u) << rule << " " << load;
    }
  }
}

// idle - over units = total capacity - placed units, for every row.
TEST(PoiseSim, ColumnsAreConsistent) {
  const Tables t = RunDefault();
  for (const auto& [key, c] : t.rows) {
    const auto placed = static_cast<int64_t>(key.second - c[3]);
    EXPECT_EQ(static_cast<int64_t>(c[2]) - static_cast<int64_t>(c[1]),
              static_cast<int64_t>(kTotalCapacity) - placed)
        << key.first << " " << key.second;
  }
}

// With factor f the core admits a job to subject i only while its load is
// below ceil(f (L + 1) w_i / (100 W)), so no subject ends above
// ceil(f load w_i / (100 W)); with weight = capacity that is <= capacity
// whenever f * load <= 100 * total capacity. Nothing can be over then.
TEST(PoiseSim, BoundedRendezvousNeverOverrunsWhenTheBoundFits) {
  const Tables t = RunDefault();
  int checked = 0;
  for (const uint64_t f : {uint64_t{100}, uint64_t{125}, uint64_t{150}}) {
    for (uint64_t load : kLoads) {
      if (f * load > 100 * kTotalCapacity) continue;
      const std::string rule = "bounded-rendezvous-" + std::to_string(f);
      EXPECT_EQ(t.rows.at({rule, load})[0], 0u) << rule << " " << load;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4);  // 100@1200, 100@2000, 125@1200, 150@1200
  // In particular factor 100 at load 1200: every unit placed, none over.
  const Columns c = t.rows.at({"bounded-rendezvous-100", 1200});
  EXPECT_EQ(c[0], 0u);
  EXPECT_EQ(c[1], 0u);
  EXPECT_EQ(c[3], 0u);
}

// A bound no subject can reach makes bounded loads plain weighted
// rendezvous: same shares, same moves.
TEST(PoiseSim, UnreachableBoundEqualsWeightedRendezvous) {
  const Output o = RunSim("--factors 1000000");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const Tables t = ParseText(o.out);
  for (uint64_t load : kLoads) {
    EXPECT_EQ(t.rows.at({"bounded-rendezvous-1000000", load}),
              t.rows.at({"weighted-rendezvous", load}))
        << load;
  }
  EXPECT_EQ(t.moved.at("bounded-rendezvous-1000000"),
            t.moved.at("weighted-rendezvous"));
}

TEST(PoiseSim, CsvHasTwoSectionsWithTheRightColumnsAndValues) {
  const Output o = RunSim("--csv");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const Tables text = RunDefault();
  const std::vector<std::string> lines = Split(o.out, '\n');
  size_t i = 0;
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines[i++],
            "rule,load,over,over_units,idle,undistributed,no_load_at_all");
  size_t rows = 0;
  for (; i < lines.size() && !lines[i].empty(); ++i, ++rows) {
    const std::vector<std::string> f = Split(lines[i], ',');
    ASSERT_EQ(f.size(), 7u) << lines[i];
    Columns c;
    for (size_t k = 0; k < 5; ++k) c[k] = std::stoull(f[k + 2]);
    EXPECT_EQ(c, text.rows.at({f[0], std::stoull(f[1])})) << lines[i];
  }
  EXPECT_EQ(rows, 27u);
  ASSERT_LT(++i, lines.size());  // skip the empty separator line
  EXPECT_EQ(lines[i++], "rule,share_of_subject_20,moved_when_removed");
  size_t moved_rows = 0;
  for (; i < lines.size() && !lines[i].empty(); ++i, ++moved_rows) {
    const std::vector<std::string> f = Split(lines[i], ',');
    ASSERT_EQ(f.size(), 3u) << lines[i];
    EXPECT_EQ(Moved(std::stoull(f[1]), std::stoull(f[2])), text.moved.at(f[0]));
  }
  EXPECT_EQ(moved_rows, kKeyRules.size());
  EXPECT_EQ(i, lines.size() - 1);  // only the final newline remains
}

// poise-sim --fleet's FLEET keeps keys at their owners (serverLoad's
// affinity): 100 clients x 2 calls over 50 backends with out-of-band reports
// every call time, where two rules that passed every router test drained the
// owners (a pick that asked every backend: 10.9 %; a room aged by the report
// before it: 8.2 %), its owner share within 5 points of IDEAL's, and its
// busiest backend well below LOCAL's (each client's own counts). And the
// room a full backend frees is a large share of the calls (what bounds how
// few refusals admission at the backend can reach: docs/sim-results.md).
// The simulation is seeded: the same figures on every host.
TEST(PoiseSim, FleetKeepsKeysAtTheirOwnersWithOutOfBandReports) {
  const Output r = RunSim(
      "--fleet --clients 100 --calls 2 --backends 50 --oob 1 --duration 100 "
      "--warmup 1100 --seed 1 --csv");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::map<std::string, std::vector<std::string>> rows;
  for (const std::string& line : Split(r.out, '\n')) {
    const std::vector<std::string> f = Split(line, ',');
    if (f.size() == 16) rows[f[0]] = f;
  }
  ASSERT_EQ(rows.count("FLEET"), 1u) << r.out;
  ASSERT_EQ(rows.count("IDEAL"), 1u) << r.out;
  ASSERT_EQ(rows.count("LOCAL"), 1u) << r.out;
  ASSERT_EQ(rows["mode"][11], "owner_share") << r.out;
  ASSERT_EQ(rows["mode"][7], "avg_max") << r.out;
  const double fleet_owner = std::stod(rows["FLEET"][11]);
  const double ideal_owner = std::stod(rows["IDEAL"][11]);
  EXPECT_GT(fleet_owner, ideal_owner - 0.05) << r.out;
  EXPECT_LT(std::stod(rows["FLEET"][7]), std::stod(rows["LOCAL"][7]) / 2)
      << r.out;
  ASSERT_EQ(rows["mode"][15], "freed_at_bound_share") << r.out;
  EXPECT_GT(std::stod(rows["IDEAL"][15]), 0.3) << r.out;
  EXPECT_LE(std::stod(rows["IDEAL"][15]), 1.0) << r.out;
}

// poise-sim --zones (issue 38): an outage moves only the failed zone's
// clients' keys, each to its global next READY choice, and every one comes
// back; balanced zones without serverLoad send nothing out of zone (the
// zone's bound alone never does).
TEST(PoiseSim, ZonesOutageMovesOnlyTheZonesClientsKeysAndBringsThemBack) {
  const Output r = RunSim(
      "--zones --zones a:3,b:2:2,c:3 --outage b --picks 20000 "
      "--hot-share 0.25 --keys 2000");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("cross-zone share: 0.0000 % ( a 0.0000 %, b 0.0000 "
                       "%, c 0.0000 %)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("clients of a: 0 keys moved, 0 of them to their "
                       "global next READY choice, 0 came back; 2000 of 2000"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("clients of b: 2000 keys moved, 2000 of them to their "
                       "global next READY choice, 2000 came back; 2000 of "
                       "2000"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("clients of c: 0 keys moved"), std::string::npos)
      << r.out;
}

TEST(PoiseSim, ZonesBadOptionsPrintTheirUsageAndExit2) {
  for (const char* args :
       {"--zones --zones a", "--zones --zones a:0", "--zones --callers x:1",
        "--zones --outage", "--zones --bogus 1"}) {
    const Output r = RunSim(args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find("usage: poise-sim --zones"), std::string::npos)
        << args << ": " << r.err;
  }
}

TEST(PoiseSim, BadOptionsPrintUsageAndExit2) {
  for (const char* args :
       {"--bogus", "--loads", "--loads 1,,2", "--loads x", "--loads 1200,",
        "--factors 99", "--factors 100,abc", "--subjects 0", "--subjects 1001",
        "--seed -1", "--plot out.txt", "--plot-load 2000", "extra"}) {
    const Output o = RunSim(args);
    EXPECT_EQ(o.exit_code, 2) << args;
    EXPECT_NE(o.err.find("usage: poise-sim"), std::string::npos) << args;
    EXPECT_TRUE(o.out.empty()) << args;
  }
}

TEST(PoiseSim, HelpDocumentsTheCsvFormat) {
  const Output o = RunSim("--help");
  EXPECT_EQ(o.exit_code, 0);
  EXPECT_NE(o.out.find("rule,share_of_subject_20,moved_when_removed"),
            std::string::npos);
}

// Every term the default mode's tables use is explained by --help.
TEST(PoiseSim, HelpExplainsItsTerms) {
  const Output o = RunSim("--help");
  EXPECT_EQ(o.exit_code, 0);
  for (const char* term :
       {"  subject   a backend", "  job       one request key",
        "  load      the number of jobs", "  over      subjects given more",
        "over units", "idle", "undistributed", "no load at all"}) {
    EXPECT_NE(o.out.find(term), std::string::npos) << term;
  }
}

TEST(PoiseSim, FewerThanTwentySubjectsHasNoRemovalTable) {
  const Output o = RunSim("--subjects 10 --loads 100");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const Tables t = ParseText(o.out);
  EXPECT_EQ(t.header.rfind("subjects 10 |", 0), 0u) << t.header;
  EXPECT_EQ(t.rows.size(), 9u);
  EXPECT_TRUE(t.moved.empty());
}

TEST(PoiseSim, PlotsSvgWithGnuplot) {
  if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "gnuplot is not installed";
  }
  const std::string path = testing::TempDir() + "poise_sim_test_plot.svg";
  unlink(path.c_str());
  const Output o = RunSim("--plot '" + path + "' --plot-load 1200");
  ASSERT_EQ(o.exit_code, 0) << o.err;
  const std::string svg = ReadFile(path);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("bounded-rendezvous-100"), std::string::npos);
  unlink(path.c_str());
}

TEST(PoiseSim, MissingGnuplotFailsClearly) {
  const std::string path = testing::TempDir() + "poise_sim_test_nogp.png";
  const Output o = RunSim("--plot '" + path + "'", "PATH=/nonexistent");
  EXPECT_EQ(o.exit_code, 1);
  EXPECT_NE(o.err.find("gnuplot not found"), std::string::npos) << o.err;
}

}  // namespace
