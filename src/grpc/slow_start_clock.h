// The clock and timer count of the policies' slow start, replaceable by
// tests (test/grpc) so a ramp can be driven without waiting for it.
#ifndef POISE_SRC_GRPC_SLOW_START_CLOCK_H_
#define POISE_SRC_GRPC_SLOW_START_CLOCK_H_

#include "absl/time/time.h"

namespace poise::grpc_lb::internal {

using RampClock = absl::Time (*)();

// Replaces absl::Now() as the ramps' clock (nullptr: absl::Now() again).
// Timers still run on gRPC's event engine, for the delay this clock gives.
void SetRampClockForTesting(RampClock clock);
absl::Time RampNow();

// Ramp timers scheduled on the event engine and neither run nor cancelled.
int PendingRampTimersForTesting();

}  // namespace poise::grpc_lb::internal

#endif  // POISE_SRC_GRPC_SLOW_START_CLOCK_H_
