#include "src/router/slow_start.h"

#include <algorithm>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "poise/rendezvous.h"

namespace poise::router {

uint32_t SlowStart::StepsFor(uint32_t min_percent) {
  const uint32_t m = std::clamp<uint32_t>(min_percent, 1, 100);
  const uint32_t n = (500 + m - 1) / m;
  return std::clamp(n, kMinSteps, kMaxSteps);
}

uint32_t SlowStart::ScaleFor(uint64_t max_weight) {
  uint32_t shift = kMaxScaleShift;
  while (shift > 0 &&
         (max_weight << shift) > std::numeric_limits<uint32_t>::max()) {
    --shift;
  }
  return uint32_t{1} << shift;
}

uint32_t SlowStart::EffectiveWeight(uint32_t weight, uint32_t scale,
                                    uint32_t min_percent, uint32_t step,
                                    uint32_t steps) {
  const uint64_t full = uint64_t{weight} * scale;  // < 2^32 by ScaleFor
  if (step >= steps) return static_cast<uint32_t>(full);
  const uint32_t m = std::clamp<uint32_t>(min_percent, 1, 100);
  // w S (m n + (100 - m) j) < 2^32 * 100 * 500 * 2: fits 128 bits easily.
  const UInt128 numerator =
      UInt128{full} * (uint64_t{m} * steps + uint64_t{100 - m} * step);
  const UInt128 e = numerator / (UInt128{100} * steps);
  return std::max<uint32_t>(1, static_cast<uint32_t>(e));
}

absl::Duration SlowStart::StepOffset(absl::Duration window, uint32_t step,
                                     uint32_t steps) {
  // ceil(step * window / steps) in nanoseconds; window <= 1 h, so
  // 3.6e12 * 500 fits 64 bits.
  const int64_t w = absl::ToInt64Nanoseconds(window);
  const int64_t n = steps;
  return absl::Nanoseconds((w * step + n - 1) / n);
}

uint32_t SlowStart::StepAt(absl::Duration window, absl::Duration elapsed,
                           uint32_t steps) {
  if (elapsed >= window) return steps;
  if (elapsed <= absl::ZeroDuration()) return 0;
  const int64_t w = absl::ToInt64Nanoseconds(window);
  const int64_t e = absl::ToInt64Nanoseconds(elapsed);
  return static_cast<uint32_t>(e * int64_t{steps} / w);
}

SlowStart::SlowStart(const SlowStartConfig& config) : config_(config) {}

SlowStart::Weights SlowStart::Observe(const BackendList& list,
                                      const std::vector<BackendState>& states,
                                      RampTime now) {
  const absl::flat_hash_set<std::string_view> listed =
      RecordListed(list, states, now);
  RecordUnlisted(listed, now);
  Weights out = ProgressAt(list, now);
  SetEffectiveWeights(list, out);
  return out;
}

absl::flat_hash_set<std::string_view> SlowStart::RecordListed(
    const BackendList& list, const std::vector<BackendState>& states,
    RampTime now) {
  absl::flat_hash_set<std::string_view> listed;
  listed.reserve(list.backends.size());
  bool any_ready = false;
  for (size_t i = 0; i < list.backends.size(); ++i) {
    const ListedBackend& b = list.backends[i];
    listed.insert(b.identity);
    const bool ready =
        i < states.size() && states[i].routing == RoutingState::kReady;
    any_ready |= ready;
    SetReady(RecordOf(b.identity), ready, now);
  }
  ever_ready_ |= any_ready;
  return listed;
}

SlowStart::Record& SlowStart::RecordOf(std::string_view identity) {
  // The key's own copy: a record outlives the list that borrowed it.
  auto it = records_.find(AbslView(identity));
  if (it == records_.end()) {
    it = records_.emplace(std::string(identity), Record{}).first;
    it->second.cold = ever_ready_;  // new after the channel's start
  }
  return it->second;
}

void SlowStart::SetReady(Record& r, bool ready, RampTime now) const {
  if (ready && !r.ready) {
    const bool long_outage =
        r.down_since.has_value() && now - *r.down_since >= config_.window;
    if (r.cold || long_outage) r.started_at = now;
    r.cold = false;
    r.down_since.reset();
  } else if (!ready && r.ready) {
    r.down_since = now;
  }
  r.ready = ready;
}

void SlowStart::RecordUnlisted(
    const absl::flat_hash_set<std::string_view>& listed, RampTime now) {
  for (auto it = records_.begin(); it != records_.end();) {
    Record& r = it->second;
    if (listed.contains(it->first)) {
      ++it;
      continue;
    }
    if (r.ready) {
      r.ready = false;
      r.down_since = now;
    }
    if (!r.down_since.has_value() || now - *r.down_since >= config_.window) {
      records_.erase(it++);
    } else {
      ++it;
    }
  }
}

SlowStart::Weights SlowStart::ProgressAt(const BackendList& list,
                                         RampTime now) {
  const absl::Duration window = config_.window;
  const uint32_t steps = StepsFor(config_.min_weight_percent);
  Weights out;
  out.progress.resize(list.backends.size());
  for (size_t i = 0; i < list.backends.size(); ++i) {
    Record& r = records_.find(AbslView(list.backends[i].identity))->second;
    if (!r.started_at.has_value()) continue;
    const uint32_t step = StepAt(window, now - *r.started_at, steps);
    if (step >= steps) {
      r.started_at.reset();
      continue;
    }
    out.progress[i] = Progress{step, steps};
    const RampTime next = *r.started_at + StepOffset(window, step + 1, steps);
    if (!out.next_step.has_value() || next < *out.next_step) {
      out.next_step = next;
    }
  }
  return out;
}

void SlowStart::SetEffectiveWeights(const BackendList& list,
                                    Weights& out) const {
  uint64_t max_weight = 0;
  for (const ListedBackend& b : list.backends) {
    max_weight = std::max<uint64_t>(max_weight, b.weight);
  }
  out.scale = out.in_progress() ? ScaleFor(max_weight) : 1;
  out.effective.resize(list.backends.size());
  for (size_t i = 0; i < list.backends.size(); ++i) {
    const uint32_t w = list.backends[i].weight;
    const std::optional<Progress>& p = out.progress[i];
    out.effective[i] =
        p.has_value()
            ? EffectiveWeight(w, out.scale, config_.min_weight_percent, p->step,
                              p->steps)
            : w * out.scale;
  }
}

}  // namespace poise::router
