#include "plot.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "report.h"

// POSIX has the application declare environ; glibc's <unistd.h> declares it
// only under _GNU_SOURCE.
extern char** environ;  // NOLINT(readability-redundant-declaration)

namespace poise_sim {
namespace {

constexpr int kColumns = 3;  // panels per row

// A gnuplot single-quoted string: the only escape is '' for a quote, so any
// file name survives.
std::string Quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    out += c;
    if (c == '\'') out += '\'';
  }
  return out + "'";
}

std::string Terminal(PlotFormat format, int rows) {
  std::ostringstream s;
  const int width = 1800;
  const int height = 80 + 420 * rows;
  if (format == PlotFormat::kPng) {
    s << "set terminal pngcairo size " << width << "," << height
      << " font 'sans,11'\n";
  } else {
    s << "set terminal svg size " << width << "," << height
      << " font 'sans,11' background '#ffffff'\n";
  }
  return s.str();
}

// One datablock per rule: subject number, units placed, capacity.
std::string DataBlock(int index, const std::vector<Subject>& subjects,
                      const Distribution& d) {
  std::ostringstream s;
  s << "$rule" << index << " << EOD\n";
  for (size_t i = 0; i < subjects.size(); ++i) {
    s << subjects[i].no << ' ' << d.share[i] << ' ' << subjects[i].capacity
      << '\n';
  }
  s << "EOD\n";
  return s.str();
}

// Capacity as a wide pale bar, the load as a narrow bar inside it: blue when
// it fits, red when the subject is over capacity, so the tail is visible. The
// load is drawn twice with the other half filtered out (NaN is skipped), so
// the key shows both colours.
std::string Panel(int index, const std::string& rule, const Metrics& m) {
  const std::string data = "$rule" + std::to_string(index);
  std::ostringstream s;
  s << "set title " << Quoted(rule) << " . sprintf(': over %d (%d units), "
    << "undistributed %d', " << m.over << ", " << m.over_units << ", "
    << m.undistributed << ")\n"
    << "plot " << data
    << " using 1:3:(0.8) with boxes fs solid 0.35 lc rgb '#9e9e9e' "
       "title 'capacity', \\\n"
    << "     " << data
    << " using 1:($2 > $3 ? NaN : $2):(0.45) with boxes fs solid 0.9 "
       "lc rgb '#1f77b4' title 'load', \\\n"
    << "     " << data
    << " using 1:($2 > $3 ? $2 : NaN):(0.45) with boxes fs solid 0.9 "
       "lc rgb '#d62728' title 'load over capacity'\n";
  return s.str();
}

std::string Script(const std::string& path, PlotFormat format,
                   const std::vector<Subject>& subjects,
                   const std::vector<Rule>& rules, uint64_t load) {
  const int count = static_cast<int>(rules.size());
  const int rows = (count + kColumns - 1) / kColumns;
  std::ostringstream data, panels;
  uint64_t top = 0;
  for (int i = 0; i < count; ++i) {
    const Distribution d = rules[static_cast<size_t>(i)].run(subjects, load);
    data << DataBlock(i, subjects, d);
    panels << Panel(i, rules[static_cast<size_t>(i)].name,
                    Measure(subjects, load, d));
    for (size_t j = 0; j < subjects.size(); ++j) {
      top = std::max({top, d.share[j], uint64_t{subjects[j].capacity}});
    }
  }
  std::ostringstream s;
  s << Terminal(format, rows) << "set output " << Quoted(path) << "\n"
    << data.str()
    // One y range for every panel, so heights compare across rules; the
    // headroom keeps the key clear of the bars.
    << "set yrange [0:" << (top + top / 3 + 1) << "]\n"
    << "set xrange [0.5:" << subjects.size() << ".5]\n"
    << "set xlabel 'subject'\nset ylabel 'units'\n"
    << "set key top left horizontal font ',9'\nset grid ytics\n"
    << "set multiplot layout " << rows << "," << kColumns
    << " title 'per-subject load vs capacity at load " << load << " ("
    << subjects.size() << " subjects, total capacity "
    << TotalCapacity(subjects) << ")'\n"
    << panels.str() << "unset multiplot\nset output\n";
  return s.str();
}

// Writes the script to a private temporary file; returns its name or "".
std::string WriteTemp(const std::string& text) {
  const char* dir = std::getenv("TMPDIR");
  std::string name =
      std::string(dir && *dir ? dir : "/tmp") + "/poise-sim-XXXXXX.gp";
  const int fd = mkstemps(name.data(), 3);
  if (fd < 0) return "";
  const bool ok =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  close(fd);
  if (!ok) {
    unlink(name.c_str());
    return "";
  }
  return name;
}

// Runs `gnuplot SCRIPT` without a shell, so a missing gnuplot is ENOENT
// rather than a shell's exit status 127.
bool RunGnuplot(const std::string& script, std::string* error) {
  std::string program = "gnuplot";
  std::string argument = script;
  char* argv[] = {program.data(), argument.data(), nullptr};
  pid_t pid = 0;
  const int spawned =
      posix_spawnp(&pid, "gnuplot", nullptr, nullptr, argv, environ);
  if (spawned != 0) {
    *error =
        spawned == ENOENT
            ? "gnuplot not found on PATH; install it (Debian: apt-get "
              "install gnuplot-nox)"
            : std::string("cannot start gnuplot: ") + std::strerror(spawned);
    return false;
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) {
    *error = std::string("waiting for gnuplot: ") + std::strerror(errno);
    return false;
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *error = "gnuplot failed on the generated script (exit status " +
             std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
             "); its messages are above";
    return false;
  }
  return true;
}

bool EndsWith(std::string text, const std::string& suffix) {
  std::transform(text.begin(), text.end(), text.begin(), [](char c) {
    return static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  });
  return text.size() > suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

bool PlotFormatOf(const std::string& path, PlotFormat* format) {
  if (EndsWith(path, ".png")) {
    *format = PlotFormat::kPng;
    return true;
  }
  if (EndsWith(path, ".svg")) {
    *format = PlotFormat::kSvg;
    return true;
  }
  return false;
}

bool WritePlot(const std::string& path, PlotFormat format,
               const std::vector<Subject>& subjects,
               const std::vector<Rule>& rules, uint64_t load,
               std::string* error) {
  const std::string script =
      WriteTemp(Script(path, format, subjects, rules, load));
  if (script.empty()) {
    *error =
        std::string("cannot write the gnuplot script: ") + std::strerror(errno);
    return false;
  }
  const bool ok = RunGnuplot(script, error);
  unlink(script.c_str());
  return ok;
}

}  // namespace poise_sim
