// poise-sim --zones: clients and backends in zones, routed by the policies'
// own pick engine (src/router/picker.h, rule P8).
#ifndef POISE_TOOLS_SIM_ZONES_H_
#define POISE_TOOLS_SIM_ZONES_H_

namespace poise_sim {

// argv[0] is "--zones"; the options follow. The exit code.
int RunZones(int argc, char** argv);

}  // namespace poise_sim

#endif  // POISE_TOOLS_SIM_ZONES_H_
