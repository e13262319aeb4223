// The keyed workload every policy receives, its phases, and the counters of
// its calls.
#ifndef POISE_TOOLS_DEMO_WORKLOAD_H_
#define POISE_TOOLS_DEMO_WORKLOAD_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace poise_demo {

// The request header carrying the key: the poise channels hash it and the
// backends record its values.
inline constexpr char kHashHeader[] = "x-session-id";
inline constexpr char kHotKey[] = "hot-user";
inline constexpr double kHotShare = 0.25;     // of all calls
inline constexpr double kZipfExponent = 1.0;  // popularity of the other keys
inline constexpr uint64_t kSeed = 20240601;
inline constexpr double kWarmupSeconds = 0.5;
inline constexpr double kSettleSeconds = 0.5;

// A fixed pseudo-random sequence of key indices, the same for every policy.
// Index `keys` is the hot key.
std::vector<uint32_t> MakeSequence(size_t keys);
std::string KeyName(size_t index, size_t keys);

// One policy's run: warm-up, the measured main phase, then (poise policies)
// the settling time after a backend stopped and the time after it.
enum Phase : int { kWarmup = 0, kMain = 1, kSwitch = 2, kAfter = 3 };
inline constexpr int kPhases = 4;
const char* PhaseName(int p);

struct PhaseLog {
  std::vector<uint32_t> calls;  // [key * backends + backend]
  uint64_t sent = 0, ok = 0, failed = 0;
  std::map<int, uint64_t> failures;     // by status code
  std::map<int, std::string> messages;  // the first message per status code
};

// One worker's calls by phase; the workers' logs are merged after the run.
struct RunLog {
  PhaseLog phase[kPhases];
  void Init(size_t cells);
  void Merge(const RunLog& other);
};

}  // namespace poise_demo

#endif  // POISE_TOOLS_DEMO_WORKLOAD_H_
