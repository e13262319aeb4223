// The clock and timer count of the policies' slow start, replaceable by
// tests (test/grpc) so a slow start can be driven without waiting for it.
#ifndef POISE_SRC_GRPC_SLOW_START_CLOCK_H_
#define POISE_SRC_GRPC_SLOW_START_CLOCK_H_

#include "absl/time/time.h"

namespace poise::grpc_lb::internal {

using SlowStartClock = absl::Time (*)();

// Replaces absl::Now() as slow start's clock (nullptr: absl::Now() again).
// Timers still run on gRPC's event engine, for the delay this clock gives.
void SetSlowStartClockForTesting(SlowStartClock clock);
absl::Time SlowStartNow();

// Slow-start step timers scheduled on the event engine and neither run nor
// cancelled.
int PendingSlowStartTimersForTesting();

}  // namespace poise::grpc_lb::internal

#endif  // POISE_SRC_GRPC_SLOW_START_CLOCK_H_
