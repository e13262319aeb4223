// A start time handed to the processes of a fleet once they are all ready:
// a file that holds milliseconds since the epoch (system clock), written by
// whoever starts the fleet (test/e2e/fleet_e2e_test.cc) after every process
// said it was ready. Its writer renames it into place, so a reader never
// sees half of it.
#ifndef POISE_TOOLS_FLEET_START_FILE_H_
#define POISE_TOOLS_FLEET_START_FILE_H_

#include <cstdint>
#include <fstream>
#include <optional>
#include <string>

namespace poise::fleet {

// The time in `path`, or nullopt while the file does not exist (or holds no
// number yet).
inline std::optional<int64_t> ReadStartFile(const std::string& path) {
  std::ifstream in(path);
  int64_t ms = -1;
  if (!(in >> ms) || ms < 0) return std::nullopt;
  return ms;
}

}  // namespace poise::fleet

#endif  // POISE_TOOLS_FLEET_START_FILE_H_
