// Per-backend in-flight request counters.
//
// A counter is shared (std::shared_ptr) by every picker generation that knows
// its backend and by every call still holding a guard on it, so a call that
// finishes after its backend left the address list still releases into the
// right counter and no one else's. A counter may also count into a total (the
// calls in flight of every backend of a group), kept in step with it.
#ifndef POISE_IN_FLIGHT_H_
#define POISE_IN_FLIGHT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>

namespace poise {

// Not padded to a cache line: a process may hold one per backend per channel
// (100 channels to 1,000 backends: 100,000 of them), and two neighbours share
// a line only when calls to both finish at the same instant.
class InFlightCounter final {
 public:
  static constexpr uint64_t kNoLimit = 0;

  // `limit` is the hard maximum of concurrent requests; kNoLimit for none.
  // With `total`, every slot taken or given back here is also counted there
  // (unlimited); `total` must outlive this counter. The two are updated one
  // after the other, so a reader may see the total below the sum of its
  // counters for a moment (never above: it is raised after and lowered
  // before them).
  explicit InFlightCounter(uint64_t limit = kNoLimit,
                           InFlightCounter* total = nullptr)
      : limit_(limit), total_(total) {}
  InFlightCounter(const InFlightCounter&) = delete;
  InFlightCounter& operator=(const InFlightCounter&) = delete;

  uint64_t limit() const { return limit_; }
  uint64_t Load() const { return count_.load(std::memory_order_relaxed); }
  bool AtLimit() const { return limit_ != kNoLimit && Load() >= limit_; }
  // The highest count ever reached (for statistics).
  uint64_t Peak() const { return peak_.load(std::memory_order_relaxed); }

  // Takes one slot; false (and no change) when the limit is reached.
  bool TryAcquire() { return TryAcquireWithin(limit_); }

  // Takes one slot unless `limit` (kNoLimit for none) is reached; for callers
  // whose limit is configured apart from the counter.
  bool TryAcquireWithin(uint64_t limit) {
    if (limit == kNoLimit) {
      Counted(count_.fetch_add(1, std::memory_order_relaxed) + 1);
      return true;
    }
    return TryAcquireIf([limit](uint64_t count) { return count < limit; });
  }

  // Takes one slot if `has_room(count)` holds for the count it would raise,
  // atomically: a slot taken at once by someone else is seen (a bound
  // checked when a choice was made holds at the slot).
  template <typename HasRoom>
  bool TryAcquireIf(HasRoom&& has_room) {
    uint64_t current = count_.load(std::memory_order_relaxed);
    do {
      if (!has_room(current)) return false;
    } while (!count_.compare_exchange_weak(current, current + 1,
                                           std::memory_order_relaxed));
    Counted(current + 1);
    return true;
  }

  // Gives back a slot taken by TryAcquire. Prefer InFlightGuard.
  void Release() {
    if (total_ != nullptr) total_->Release();
    count_.fetch_sub(1, std::memory_order_relaxed);
  }

 private:
  // A slot was taken, raising the count to `now`.
  void Counted(uint64_t now) {
    if (total_ != nullptr) total_->TryAcquireWithin(kNoLimit);
    uint64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak &&
           !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }

  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> peak_{0};
  const uint64_t limit_;
  InFlightCounter* const total_;
};

// Holds one acquired slot and gives it back exactly once: on Release(), on
// destruction, or never twice after a move.
class InFlightGuard final {
 public:
  InFlightGuard() = default;

  // Acquires a slot on `counter`; an empty guard when the limit is reached.
  static InFlightGuard TryAcquire(std::shared_ptr<InFlightCounter> counter) {
    const uint64_t limit = counter != nullptr ? counter->limit() : 0;
    return TryAcquireWithin(std::move(counter), limit);
  }

  // The same with a limit given by the caller (kNoLimit for none).
  static InFlightGuard TryAcquireWithin(
      std::shared_ptr<InFlightCounter> counter, uint64_t limit) {
    InFlightGuard guard;
    if (counter != nullptr && counter->TryAcquireWithin(limit)) {
      guard.counter_ = std::move(counter);
    }
    return guard;
  }

  // The same while `has_room(count)` holds (InFlightCounter::TryAcquireIf).
  template <typename HasRoom>
  static InFlightGuard TryAcquireIf(std::shared_ptr<InFlightCounter> counter,
                                    HasRoom&& has_room) {
    InFlightGuard guard;
    if (counter != nullptr && counter->TryAcquireIf(has_room)) {
      guard.counter_ = std::move(counter);
    }
    return guard;
  }

  InFlightGuard(InFlightGuard&& other) noexcept
      : counter_(std::move(other.counter_)) {}
  InFlightGuard& operator=(InFlightGuard&& other) noexcept {
    if (this != &other) {
      Release();
      counter_ = std::move(other.counter_);
    }
    return *this;
  }
  InFlightGuard(const InFlightGuard&) = delete;
  InFlightGuard& operator=(const InFlightGuard&) = delete;
  ~InFlightGuard() { Release(); }

  bool held() const { return counter_ != nullptr; }

  void Release() {
    if (counter_ != nullptr) {
      counter_->Release();
      counter_.reset();
    }
  }

 private:
  std::shared_ptr<InFlightCounter> counter_;
};

}  // namespace poise

#endif  // POISE_IN_FLIGHT_H_
