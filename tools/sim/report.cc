#include "report.h"

#include <algorithm>
#include <cinttypes>

namespace poise_sim {
namespace {

// The lesson's rule column is 19 wide; longer names (bounded-rendezvous-100)
// widen it so the numeric columns stay aligned.
int RuleWidth(const Report& report) {
  size_t width = 19;
  for (const LoadRow& row : report.rows) {
    width = std::max(width, row.rule.size());
  }
  for (const MovedRow& row : report.moved) {
    width = std::max(width, row.rule.size());
  }
  return static_cast<int>(width);
}

size_t IndexOf(const std::vector<Subject>& subjects, uint32_t no) {
  for (size_t i = 0; i < subjects.size(); ++i) {
    if (subjects[i].no == no) return i;
  }
  return subjects.size();
}

std::vector<Subject> Without(const std::vector<Subject>& subjects,
                             uint32_t no) {
  std::vector<Subject> remaining;
  for (const Subject& s : subjects) {
    if (s.no != no) remaining.push_back(s);
  }
  return remaining;
}

// The lesson reruns the rule on the 39 remaining subjects and counts the jobs
// whose subject changed; proportional has no jobs to follow, so it is absent.
std::vector<MovedRow> RemovalTable(const std::vector<Subject>& subjects,
                                   const std::vector<Rule>& rules) {
  std::vector<MovedRow> table;
  const size_t removed = IndexOf(subjects, kRemovedSubject);
  if (removed == subjects.size()) return table;
  const std::vector<Subject> remaining = Without(subjects, kRemovedSubject);
  for (const Rule& rule : rules) {
    if (!rule.maps_keys) continue;
    const Distribution before = rule.run(subjects, kRemovalLoad);
    const Distribution after = rule.run(remaining, kRemovalLoad);
    table.push_back(
        {rule.name, before.share[removed], MovedKeys(before, after)});
  }
  return table;
}

}  // namespace

Metrics Measure(const std::vector<Subject>& subjects, uint64_t load,
                const Distribution& distribution) {
  Metrics m;
  uint64_t placed = 0;
  for (size_t i = 0; i < subjects.size(); ++i) {
    const uint64_t share = distribution.share[i];
    const uint64_t capacity = subjects[i].capacity;
    placed += share;
    if (share > capacity) {
      ++m.over;
      m.over_units += share - capacity;
    } else {
      m.idle += capacity - share;
    }
    if (share == 0) ++m.no_load;
  }
  m.undistributed = load - placed;
  return m;
}

Report Simulate(const std::vector<Subject>& subjects,
                const std::vector<Rule>& rules,
                const std::vector<uint64_t>& loads) {
  Report report;
  report.subject_count = static_cast<uint32_t>(subjects.size());
  report.total_capacity = TotalCapacity(subjects);
  report.smallest = subjects.front().capacity;
  report.largest = subjects.front().capacity;
  for (const Subject& s : subjects) {
    report.smallest = std::min(report.smallest, s.capacity);
    report.largest = std::max(report.largest, s.capacity);
  }
  for (const Rule& rule : rules) {
    for (uint64_t load : loads) {
      report.rows.push_back(
          {rule.name, load, Measure(subjects, load, rule.run(subjects, load))});
    }
  }
  report.moved = RemovalTable(subjects, rules);
  return report;
}

void PrintText(std::FILE* out, const Report& report) {
  const int w = RuleWidth(report);
  std::fprintf(out,
               "subjects %" PRIu32 " | total capacity %" PRIu64
               " | smallest %" PRIu32 " largest %" PRIu32 "\n\n",
               report.subject_count, report.total_capacity, report.smallest,
               report.largest);
  std::fprintf(out, "%-*s %5s %10s %11s %12s %13s %16s\n", w, "rule", "load",
               "over", "over units", "idle", "undistributed", "no load at all");
  for (const LoadRow& row : report.rows) {
    const Metrics& m = row.metrics;
    std::fprintf(out,
                 "%-*s %5" PRIu64 " %10" PRIu64 " %11" PRIu64 " %12" PRIu64
                 " %13" PRIu64 " %16" PRIu64 "\n",
                 w, row.rule.c_str(), row.load, m.over, m.over_units, m.idle,
                 m.undistributed, m.no_load);
  }
  if (report.moved.empty()) return;
  std::fprintf(out, "\n%-*s %20s %19s\n", w, "rule",
               ("share of subject " + std::to_string(kRemovedSubject)).c_str(),
               "moved when removed");
  for (const MovedRow& row : report.moved) {
    std::fprintf(out, "%-*s %20" PRIu64 " %19" PRIu64 "\n", w, row.rule.c_str(),
                 row.share_of_removed, row.moved);
  }
}

void PrintCsv(std::FILE* out, const Report& report) {
  std::fprintf(out,
               "rule,load,over,over_units,idle,undistributed,no_load_at_all\n");
  for (const LoadRow& row : report.rows) {
    const Metrics& m = row.metrics;
    std::fprintf(out,
                 "%s,%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",%" PRIu64
                 ",%" PRIu64 "\n",
                 row.rule.c_str(), row.load, m.over, m.over_units, m.idle,
                 m.undistributed, m.no_load);
  }
  if (report.moved.empty()) return;
  std::fprintf(out, "\nrule,share_of_subject_%" PRIu32 ",moved_when_removed\n",
               kRemovedSubject);
  for (const MovedRow& row : report.moved) {
    std::fprintf(out, "%s,%" PRIu64 ",%" PRIu64 "\n", row.rule.c_str(),
                 row.share_of_removed, row.moved);
  }
}

}  // namespace poise_sim
