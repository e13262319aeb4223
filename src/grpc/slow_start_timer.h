// Slow start's step timer: publishes a picker at each slow-start step on
// gRPC's event engine; cancelled at shutdown. It also traces each backend's
// slow-start steps (GRPC_TRACE=poise_rendezvous). The policy owns one; the
// steps themselves are router::SlowStart's (src/router/slow_start.h).
#ifndef POISE_SRC_GRPC_SLOW_START_TIMER_H_
#define POISE_SRC_GRPC_SLOW_START_TIMER_H_

#include "src/grpc/require_undebug.h"
// clang-format off
#include <grpc/support/port_platform.h>
// clang-format on

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "src/core/lib/event_engine/default_event_engine.h"
#include "src/core/lib/gprpp/ref_counted_ptr.h"
#include "src/core/lib/gprpp/work_serializer.h"
#include "src/core/lib/load_balancing/lb_policy.h"
#include "src/router/backend_set.h"
#include "src/router/ramp_time.h"
#include "src/router/slow_start.h"

namespace poise::grpc_lb {

class SlowStartTimer final {
 public:
  // `on_step` runs in `work_serializer` (the policy's) when a step is due
  // and the timer was neither cancelled nor replaced; it publishes the next
  // step's picker, which sets the next timer. `policy` only names the traces.
  SlowStartTimer(const void* policy,
                 std::shared_ptr<grpc_core::WorkSerializer> work_serializer,
                 std::function<void()> on_step);

  // Traces slow-start steps and sets the timer for `w.next_step` (cancels it
  // when no slow start is in progress). `policy` is held by a pending timer.
  void ObserveLocked(
      const router::SlowStart::Weights& w,
      const std::vector<router::ListedBackend>& backends,
      grpc_core::RefCountedPtr<grpc_core::LoadBalancingPolicy> policy);
  void CancelStepTimerLocked();

 private:
  void TraceStepsLocked(const router::SlowStart::Weights& w,
                        const std::vector<router::ListedBackend>& backends);
  void ScheduleStepTimerLocked(
      router::RampTime at,
      grpc_core::RefCountedPtr<grpc_core::LoadBalancingPolicy> policy);
  void OnStepTimerLocked();

  const void* const policy_;
  const std::shared_ptr<grpc_core::WorkSerializer> work_serializer_;
  const std::function<void()> on_step_;
  std::vector<std::optional<router::SlowStart::Progress>> traced_progress_;
  // gRPC's default event engine, held: the step timers run on it.
  std::shared_ptr<grpc_event_engine::experimental::EventEngine> event_engine_ =
      grpc_event_engine::experimental::GetDefaultEventEngine();
  // The pending step timer on the event engine, and when it is due.
  std::optional<grpc_event_engine::experimental::EventEngine::TaskHandle>
      step_timer_;
  router::RampTime step_timer_at_;
};

}  // namespace poise::grpc_lb

#endif  // POISE_SRC_GRPC_SLOW_START_TIMER_H_
