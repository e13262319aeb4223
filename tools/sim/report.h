// Measuring distributions and printing the lesson's two tables.
#ifndef POISE_TOOLS_SIM_REPORT_H_
#define POISE_TOOLS_SIM_REPORT_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "rules.h"
#include "subjects.h"

namespace poise_sim {

// The lesson's membership-change experiment: subject 20 leaves at load 1200.
inline constexpr uint32_t kRemovedSubject = 20;
inline constexpr uint64_t kRemovalLoad = 1200;

// The lesson's columns for one rule at one load.
struct Metrics {
  uint64_t over = 0;           // subjects given more than their capacity
  uint64_t over_units = 0;     // units above capacity, summed
  uint64_t idle = 0;           // capacity left unused, summed
  uint64_t undistributed = 0;  // units no subject received
  uint64_t no_load = 0;        // subjects that received nothing
};

Metrics Measure(const std::vector<Subject>& subjects, uint64_t load,
                const Distribution& distribution);

struct LoadRow {
  std::string rule;
  uint64_t load = 0;
  Metrics metrics;
};

struct MovedRow {
  std::string rule;
  uint64_t share_of_removed = 0;  // what the removed subject held before
  uint64_t moved = 0;             // jobs whose subject changed
};

struct Report {
  uint32_t subject_count = 0;
  uint64_t total_capacity = 0;
  uint32_t smallest = 0;
  uint32_t largest = 0;
  std::vector<LoadRow> rows;    // rule-major, then load, as the lesson prints
  std::vector<MovedRow> moved;  // empty when there is no subject 20
};

// Runs every rule at every load, and the removal experiment for the rules
// that map keys.
Report Simulate(const std::vector<Subject>& subjects,
                const std::vector<Rule>& rules,
                const std::vector<uint64_t>& loads);

// The lesson's text layout; the rule column widens to the longest rule name.
void PrintText(std::FILE* out, const Report& report);

// Section 1: header + one row per rule x load. A blank line. Section 2:
// header + one row per rule of the removal table (absent with < 20 subjects).
void PrintCsv(std::FILE* out, const Report& report);

}  // namespace poise_sim

#endif  // POISE_TOOLS_SIM_REPORT_H_
