// poise-sim --fleet: bounds over a fleet of client processes, with and
// without the backends' load reports (serverLoad, src/router/fleet_load.h).
#ifndef POISE_TOOLS_SIM_FLEET_H_
#define POISE_TOOLS_SIM_FLEET_H_

namespace poise_sim {

// argv[0] is "--fleet"; the options follow. The exit code.
int RunFleet(int argc, char** argv);

}  // namespace poise_sim

#endif  // POISE_TOOLS_SIM_FLEET_H_
