// poise-sim --scale-out: keys moved per step when a backend joins, with and
// without slow start (src/router/slow_start.h's exact effective weights).
#ifndef POISE_TOOLS_SIM_SCALE_OUT_H_
#define POISE_TOOLS_SIM_SCALE_OUT_H_

namespace poise_sim {

// argv[0] is "--scale-out"; returns the exit code (2: bad options).
int RunScaleOut(int argc, char** argv);

}  // namespace poise_sim

#endif  // POISE_TOOLS_SIM_SCALE_OUT_H_
