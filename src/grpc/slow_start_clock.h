// The clock and timer count of the policies' slow start, replaceable by
// tests (test/grpc) so a slow start can be driven without waiting for it.
#ifndef POISE_SRC_GRPC_SLOW_START_CLOCK_H_
#define POISE_SRC_GRPC_SLOW_START_CLOCK_H_

#include "src/router/ramp_time.h"

namespace poise::grpc_lb::internal {

// A monotonic clock: readings never go back.
using SlowStartClock = router::RampTime (*)();

// Replaces std::chrono::steady_clock as slow start's clock (nullptr: the
// steady clock again). Ramp positions and step timers follow this clock,
// never the wall clock; the timers run on gRPC's event engine (monotonic
// too), for the delay this clock gives.
void SetSlowStartClockForTesting(SlowStartClock clock);
router::RampTime SlowStartNow();

// Slow-start step timers scheduled on the event engine and neither run nor
// cancelled.
int PendingSlowStartTimersForTesting();

}  // namespace poise::grpc_lb::internal

#endif  // POISE_SRC_GRPC_SLOW_START_CLOCK_H_
