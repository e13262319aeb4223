// Slow start's time: a reading of a monotonic clock, as the time since that
// clock's origin. The policies read std::chrono::steady_clock (RampTime::Of),
// so a wall clock stepped by NTP or a VM resume moves no ramp; tests inject
// any monotonic sequence. A distinct type, so that no wall-clock time
// (absl::Time) can be passed where a ramp position is meant.
#ifndef POISE_SRC_ROUTER_RAMP_TIME_H_
#define POISE_SRC_ROUTER_RAMP_TIME_H_

#include <chrono>

#include "absl/time/time.h"

namespace poise::router {

class RampTime {
 public:
  constexpr RampTime() = default;

  // A steady_clock reading.
  static RampTime Of(std::chrono::steady_clock::time_point t) {
    return RampTime(
        absl::FromChrono(std::chrono::duration_cast<std::chrono::nanoseconds>(
            t.time_since_epoch())));
  }
  // `d` after the clock's origin (tests).
  static constexpr RampTime AfterOrigin(absl::Duration d) {
    return RampTime(d);
  }

  RampTime& operator+=(absl::Duration d) {
    since_origin_ += d;
    return *this;
  }
  friend RampTime operator+(RampTime t, absl::Duration d) { return t += d; }
  friend absl::Duration operator-(RampTime a, RampTime b) {
    return a.since_origin_ - b.since_origin_;
  }
  friend bool operator==(RampTime a, RampTime b) {
    return a.since_origin_ == b.since_origin_;
  }
  friend bool operator!=(RampTime a, RampTime b) { return !(a == b); }
  friend bool operator<(RampTime a, RampTime b) {
    return a.since_origin_ < b.since_origin_;
  }
  friend bool operator>(RampTime a, RampTime b) { return b < a; }
  friend bool operator<=(RampTime a, RampTime b) { return !(b < a); }
  friend bool operator>=(RampTime a, RampTime b) { return !(a < b); }

 private:
  explicit constexpr RampTime(absl::Duration since_origin)
      : since_origin_(since_origin) {}

  absl::Duration since_origin_;
};

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_RAMP_TIME_H_
