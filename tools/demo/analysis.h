// From the calls a run logged, the library's statistics and the backends'
// own counters to the figures of the report.
#ifndef POISE_TOOLS_DEMO_ANALYSIS_H_
#define POISE_TOOLS_DEMO_ANALYSIS_H_

#include <cstddef>

#include "backends.h"
#include "options.h"
#include "policies.h"
#include "report.h"
#include "workload.h"

namespace poise_demo {

// The main phase's figures. `before` and `after` are the channel's
// statistics around the main phase, `server` the backends' counters at its
// end; `seconds` is its length.
PolicyReport Analyse(const Options& opt, const BackendSet& set, Policy policy,
                     const RunLog& log, double seconds,
                     const PoiseStats& before, const PoiseStats& after,
                     const ServerCounters& server);

// What stopping backend `stopped` did: the calls around the stop, and which
// keys moved, a key's home in a phase being the backend that served most of
// its calls. The retry figures are left to the caller.
StopReport AnalyseStop(const Options& opt, const BackendSet& set,
                       const RunLog& log, size_t stopped, double after_seconds);

}  // namespace poise_demo

#endif  // POISE_TOOLS_DEMO_ANALYSIS_H_
