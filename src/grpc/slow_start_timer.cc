// The slow-start step timer (slow_start_timer.h) and slow start's replaceable
// clock (slow_start_clock.h).
#include "src/grpc/slow_start_timer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <utility>

#include "absl/time/time.h"
#include "src/core/lib/gprpp/debug_location.h"
#include "src/core/lib/iomgr/exec_ctx.h"
#include "src/grpc/rendezvous_trace.h"
#include "src/grpc/slow_start_clock.h"

namespace poise::grpc_lb {

namespace internal {
namespace {
std::atomic<SlowStartClock> g_slow_start_clock{nullptr};
std::atomic<int> g_pending_slow_start_timers{0};
}  // namespace

void SetSlowStartClockForTesting(SlowStartClock clock) {
  g_slow_start_clock.store(clock);
}
router::RampTime SlowStartNow() {
  const SlowStartClock clock = g_slow_start_clock.load();
  return clock != nullptr
             ? clock()
             : router::RampTime::Of(std::chrono::steady_clock::now());
}
int PendingSlowStartTimersForTesting() {
  return g_pending_slow_start_timers.load();
}
}  // namespace internal

SlowStartTimer::SlowStartTimer(
    const void* policy,
    std::shared_ptr<grpc_core::WorkSerializer> work_serializer,
    std::function<void()> on_step)
    : policy_(policy),
      work_serializer_(std::move(work_serializer)),
      on_step_(std::move(on_step)) {}

void SlowStartTimer::ObserveLocked(
    const router::SlowStart::Weights& w,
    const std::vector<router::ListedBackend>& backends,
    grpc_core::RefCountedPtr<grpc_core::LoadBalancingPolicy> policy) {
  if (GRPC_TRACE_FLAG_ENABLED(poise_rendezvous_trace)) {
    TraceStepsLocked(w, backends);
  }
  if (w.next_step.has_value()) {
    ScheduleStepTimerLocked(*w.next_step, std::move(policy));
  } else {
    CancelStepTimerLocked();
  }
}

void SlowStartTimer::TraceStepsLocked(
    const router::SlowStart::Weights& w,
    const std::vector<router::ListedBackend>& backends) {
  // One line per slow-start step, start and end, by identity.
  traced_progress_.resize(w.progress.size());
  for (size_t i = 0; i < w.progress.size(); ++i) {
    const auto& now = w.progress[i];
    const auto& before = traced_progress_[i];
    const bool changed = now.has_value() != before.has_value() ||
                         (now.has_value() && now->step != before->step);
    if (!changed) continue;
    const router::ListedBackend& b = backends[i];
    if (now.has_value()) {
      POISE_TRACE(
          "[poise %p] slow start: %.*s step %u/%u, weight %u of %llu", policy_,
          static_cast<int>(b.identity.size()), b.identity.data(), now->step,
          now->steps, w.effective[i],
          static_cast<unsigned long long>(uint64_t{b.weight} * w.scale));
    } else {
      POISE_TRACE("[poise %p] slow start: %.*s at full weight", policy_,
                  static_cast<int>(b.identity.size()), b.identity.data());
    }
  }
  traced_progress_ = w.progress;
}

void SlowStartTimer::ScheduleStepTimerLocked(
    router::RampTime at,
    grpc_core::RefCountedPtr<grpc_core::LoadBalancingPolicy> policy) {
  if (step_timer_.has_value() && step_timer_at_ == at) return;
  CancelStepTimerLocked();
  const absl::Duration delay =
      std::max(at - internal::SlowStartNow(), absl::ZeroDuration());
  step_timer_at_ = at;
  internal::g_pending_slow_start_timers.fetch_add(1);
  // The callback holds the policy, and so this timer, until it has run.
  step_timer_ = event_engine_->RunAfter(
      std::chrono::nanoseconds(absl::ToInt64Nanoseconds(delay)),
      [this, policy = std::move(policy)]() mutable {
        internal::g_pending_slow_start_timers.fetch_sub(1);
        grpc_core::ApplicationCallbackExecCtx app_exec_ctx;
        grpc_core::ExecCtx exec_ctx;
        work_serializer_->Run(
            [this, policy = std::move(policy)]() { OnStepTimerLocked(); },
            DEBUG_LOCATION);
      });
}

void SlowStartTimer::CancelStepTimerLocked() {
  if (!step_timer_.has_value()) return;
  // False: the callback is running or about to; OnStepTimerLocked then
  // finds no timer and does nothing.
  if (event_engine_->Cancel(*step_timer_)) {
    internal::g_pending_slow_start_timers.fetch_sub(1);
  }
  step_timer_.reset();
}

void SlowStartTimer::OnStepTimerLocked() {
  if (!step_timer_.has_value()) return;
  step_timer_.reset();
  on_step_();  // the next step's picker (and the next timer)
}

}  // namespace poise::grpc_lb
