// Slow start: a backend that joins a channel already serving traffic takes
// its keys gradually, and every key moves at most once.
//
// Why it moves each key at most once: a key's score on a backend is
// -ln U / w, so raising one backend's weight lowers only that backend's
// scores. While its weight only grows, a key can only move onto it, never off
// it, and never between two other backends.
//
// The effective weights, exactly (integers, so every decision in a step is
// the contract's decision for those weights and poise-explain/poise-sim can
// replay it; the rules with their tests: docs/rules.md):
//   SS1. While some backend is in slow start, every weight is multiplied by
//        one scale S = 2^k: k = 10 (S = 1024) unless the largest listed
//        weight w_max needs less to fit 32 bits (S = the largest power of
//        two with w_max S <= 2^32 - 1; S = 1 past 2^22). A power of two
//        changes no score's rounding (-ln U / (w 2^k) is -ln U / w times
//        2^-k exactly), so it changes no owner at all, and no capacity
//        (ratios only). With no slow start in progress S = 1: the weights
//        are the list's.
//   SS2. A backend at step j of n (0 <= j < n) of its slow start has
//          e_j = max(1, floor(w S (m n + (100 - m) j) / (100 n)))
//        with m = minWeightPercent; from step n on it is w S. e_j never
//        decreases in j.
//   SS3. n = StepsFor(m) = clamp(ceil(500 / m), 20, 500); step j starts at
//        ceil(j window / n) after the backend's slow start starts
//        (nanoseconds). Why: the share of keys of a backend of effective
//        weight e among others of total weight W is e / (W + e), concave in
//        e, so the early steps move the most; the largest step moves at
//        most 1 / (4 m n) of its final keys (m < 1/2, worst over W;
//        (1 - m) / n for m >= 1/2), so n >= 5 / m keeps every step within
//        1/20.
//
// Which backends go through slow start (by identity):
//   - identities listed before any backend was ever READY (the channel's
//     start) are warm: never in slow start for being new;
//   - an identity listed later (added by the resolver, or back after being
//     forgotten) starts its slow start the moment it is first READY;
//   - an identity that stops being READY (fails, goes IDLE, or leaves the
//     list) and is READY again within `window` keeps its slow-start step:
//     slow start runs on the clock from its start, outages included (a warm
//     one stays warm);
//   - one that was down for `window` or longer (a failure, or away from the
//     list) starts slow start again from minWeightPercent when READY: its
//     cache is presumed cold. An identity away from the list for `window` is
//     forgotten.
//
// Not thread-safe: the policy calls it from its work serializer. Time is
// passed in as a RampTime, a monotonic clock's reading (the policies' is
// std::chrono::steady_clock; never the wall clock, which NTP or a VM resume
// can step back or forward), so tests drive it with any clock.
#ifndef POISE_SRC_ROUTER_SLOW_START_H_
#define POISE_SRC_ROUTER_SLOW_START_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/time.h"
#include "src/router/backend_set.h"
#include "src/router/config.h"
#include "src/router/connectivity.h"
#include "src/router/ramp_time.h"

namespace poise::router {

class SlowStart final {
 public:
  static constexpr uint32_t kMaxScaleShift = 10;  // S = 1024 at most
  static constexpr uint32_t kMinSteps = 20;
  static constexpr uint32_t kMaxSteps = 500;

  // Slow start's step count for minWeightPercent `min_percent` (SS3).
  static uint32_t StepsFor(uint32_t min_percent);
  // The common scale for a list whose largest weight is `max_weight` (SS1).
  static uint32_t ScaleFor(uint64_t max_weight);
  // e_j of SS2 (`step` >= `steps` gives weight * scale).
  static uint32_t EffectiveWeight(uint32_t weight, uint32_t scale,
                                  uint32_t min_percent, uint32_t step,
                                  uint32_t steps);
  // When step `step` of a slow start starts, after its start (SS3).
  static absl::Duration StepOffset(absl::Duration window, uint32_t step,
                                   uint32_t steps);
  // The step a slow start is at `elapsed` after its start (steps: done).
  static uint32_t StepAt(absl::Duration window, absl::Duration elapsed,
                         uint32_t steps);

  // Where one backend is in its slow start, for stats and the trace.
  struct Progress {
    uint32_t step;  // 0 .. steps - 1
    uint32_t steps;
  };

  // What the picker is built with.
  struct Weights {
    std::vector<uint32_t> effective;  // by backend index
    uint32_t scale = 1;
    // By backend index; nullopt: at full weight.
    std::vector<std::optional<Progress>> progress;
    // When the next step of some backend's slow start starts; nullopt: no
    // slow start in progress.
    std::optional<RampTime> next_step;
    bool in_progress() const { return next_step.has_value(); }
  };

  explicit SlowStart(const SlowStartConfig& config);
  void set_config(const SlowStartConfig& config) { config_ = config; }
  const SlowStartConfig& config() const { return config_; }

  // Records `list` with its `states` (states[i] of list.backends[i]) at
  // `now`, which never goes back between calls, and returns the effective
  // weights to route with until the next call.
  Weights Observe(const BackendList& list,
                  const std::vector<BackendState>& states, RampTime now);

 private:
  struct Record {
    bool cold = false;  // starts slow start at its next READY
    bool ready = false;
    std::optional<RampTime> started_at;  // nullopt: not in slow start
    std::optional<RampTime> down_since;  // set while it is not READY
  };

  // The steps of Observe():
  // every listed identity's record brought up to `now` (returns them);
  absl::flat_hash_set<std::string_view> RecordListed(
      const BackendList& list, const std::vector<BackendState>& states,
      RampTime now);
  // identities away from the list: down from `now`, forgotten after a
  // window;
  void RecordUnlisted(const absl::flat_hash_set<std::string_view>& listed,
                      RampTime now);
  // where each listed backend is in its slow start and when the next step
  // starts, ended ones dropped (those of identities away from the list run
  // on too: their end matters only when they return, and Observe() is
  // called then);
  Weights ProgressAt(const BackendList& list, RampTime now);
  // the scale (SS1) and the effective weights (SS2).
  void SetEffectiveWeights(const BackendList& list, Weights& out) const;

  // `identity`'s record; a new one is cold after the channel's start.
  Record& RecordOf(std::string_view identity);
  // `r` seen READY or not at `now`: a cold one, or one back after a window
  // or more down, starts its slow start.
  void SetReady(Record& r, bool ready, RampTime now) const;

  SlowStartConfig config_;
  bool ever_ready_ = false;  // some backend has been READY
  absl::flat_hash_map<std::string, Record> records_;  // by identity
};

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_SLOW_START_H_
