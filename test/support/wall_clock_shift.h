// The test side of test/support/wall_clock_shift_preload.cc: steps this
// process's wall clock. A test binary that uses it loads the shim by
// re-executing itself with LD_PRELOAD before main() (LoadOrReexec), so every
// process of the binary has it, however CTest or a developer starts it.
// Include as "test/support/wall_clock_shift.h".
#ifndef POISE_TEST_SUPPORT_WALL_CLOCK_SHIFT_H_
#define POISE_TEST_SUPPORT_WALL_CLOCK_SHIFT_H_

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace poise::test_support {

class WallClockShift {
 public:
  // Whether the shim is loaded (else Set() does nothing).
  static bool Loaded() { return Setter() != nullptr; }

  // From now on CLOCK_REALTIME reads `shift` away from the kernel's.
  static void Set(std::chrono::nanoseconds shift) {
    if (auto* set = Setter()) set(static_cast<int64_t>(shift.count()));
  }

  // True if the shim is loaded; otherwise re-executes this process (same
  // arguments) with `shim_path` in LD_PRELOAD, and returns false only if
  // that is not possible or was tried already.
  static bool LoadOrReexec(const char* shim_path) {
    if (Loaded()) return true;
    const char* preload = std::getenv("LD_PRELOAD");
    const std::string current = preload != nullptr ? preload : "";
    if (current.find(shim_path) != std::string::npos) return false;
    std::ifstream cmdline("/proc/self/cmdline", std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(cmdline)),
                           std::istreambuf_iterator<char>());
    std::vector<std::string> args;
    for (size_t start = 0; start < text.size();) {
      const size_t end = text.find('\0', start);
      args.push_back(text.substr(start, end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const std::string value =
        current.empty() ? shim_path : current + ":" + shim_path;
    setenv("LD_PRELOAD", value.c_str(), 1);
    execv("/proc/self/exe", argv.data());
    return false;
  }

  // Resets the shift on every exit path of a test.
  WallClockShift() = default;
  WallClockShift(const WallClockShift&) = delete;
  WallClockShift& operator=(const WallClockShift&) = delete;
  ~WallClockShift() { Set(std::chrono::nanoseconds(0)); }

 private:
  using SetFn = void (*)(int64_t);
  static SetFn Setter() {
    return reinterpret_cast<SetFn>(
        dlsym(RTLD_DEFAULT, "poise_wall_clock_shift_set_ns"));
  }
};

}  // namespace poise::test_support

#endif  // POISE_TEST_SUPPORT_WALL_CLOCK_SHIFT_H_
