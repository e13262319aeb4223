// poise-demo's command line: how many backends, their weights, and how hard
// and how long to drive them.
#ifndef POISE_TOOLS_DEMO_OPTIONS_H_
#define POISE_TOOLS_DEMO_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace poise_demo {

struct Options {
  size_t backends = 5;
  std::vector<uint64_t> weights;  // defaults to 1,1,2,3,5 repeated
  uint64_t factor = 150;
  double duration = 4.0;  // seconds of measured traffic per policy
  size_t keys = 1000;
  size_t concurrency = 16;
  uint32_t delay_ms = 2;
  std::optional<size_t> stop;  // backend to stop; default backends / 2
  bool json = false;
};

// Fills `opt` from the command line, weights and stop included. Returns 0 on
// success, else the exit code (2, after printing the usage on stderr, as
// --help does).
int ParseOptions(int argc, char** argv, Options* opt);

}  // namespace poise_demo

#endif  // POISE_TOOLS_DEMO_OPTIONS_H_
