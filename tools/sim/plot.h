// Per-subject load against capacity, one panel per rule, drawn by gnuplot.
#ifndef POISE_TOOLS_SIM_PLOT_H_
#define POISE_TOOLS_SIM_PLOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "rules.h"
#include "subjects.h"

namespace poise_sim {

enum class PlotFormat { kPng, kSvg };

// The format named by the file's extension (.png or .svg, any case), or false.
bool PlotFormatOf(const std::string& path, PlotFormat* format);

// Runs every rule at `load` and renders the result into `path` by running
// gnuplot (found on PATH) on a generated script. On failure returns false and
// says why in `error`.
bool WritePlot(const std::string& path, PlotFormat format,
               const std::vector<Subject>& subjects,
               const std::vector<Rule>& rules, uint64_t load,
               std::string* error);

}  // namespace poise_sim

#endif  // POISE_TOOLS_SIM_PLOT_H_
