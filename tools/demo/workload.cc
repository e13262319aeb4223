#include "workload.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"

namespace poise_demo {
namespace {

constexpr size_t kSequenceLength = size_t{1} << 18;

}  // namespace

std::vector<uint32_t> MakeSequence(size_t keys) {
  std::vector<double> cdf(keys);
  double total = 0;
  for (size_t r = 0; r < keys; ++r) {
    total += 1.0 / std::pow(static_cast<double>(r + 1), kZipfExponent);
    cdf[r] = total;
  }
  std::mt19937_64 rng(kSeed);
  auto uniform = [&rng] {
    return static_cast<double>(rng() >> 11) * 0x1.0p-53;
  };
  std::vector<uint32_t> sequence(kSequenceLength);
  for (uint32_t& entry : sequence) {
    if (uniform() < kHotShare) {
      entry = static_cast<uint32_t>(keys);
    } else {
      const double u = uniform() * total;
      entry = static_cast<uint32_t>(
          std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
      if (entry >= keys) entry = static_cast<uint32_t>(keys - 1);
    }
  }
  return sequence;
}

std::string KeyName(size_t index, size_t keys) {
  return index == keys ? std::string(kHotKey) : absl::StrCat("user-", index);
}

const char* PhaseName(int p) {
  static const char* const kNames[] = {"warm-up", "main", "stopping",
                                       "after stop"};
  return kNames[p];
}

void RunLog::Init(size_t cells) {
  for (auto& p : phase) p.calls.assign(cells, 0);
}

void RunLog::Merge(const RunLog& other) {
  for (int i = 0; i < kPhases; ++i) {
    PhaseLog& a = phase[i];
    const PhaseLog& b = other.phase[i];
    for (size_t c = 0; c < a.calls.size(); ++c) a.calls[c] += b.calls[c];
    a.sent += b.sent;
    a.ok += b.ok;
    a.failed += b.failed;
    for (const auto& [code, n] : b.failures) a.failures[code] += n;
    for (const auto& [code, m] : b.messages) a.messages.emplace(code, m);
  }
}

}  // namespace poise_demo
