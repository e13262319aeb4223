// The calls in flight that bounds and limits count: per backend identity and
// in all, over one channel (loadScope CHANNEL) or over every channel of the
// process that names the same scope (loadScope PROCESS).
#ifndef POISE_SRC_ROUTER_LOAD_SCOPE_H_
#define POISE_SRC_ROUTER_LOAD_SCOPE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "poise/in_flight.h"
#include "src/core/weak_registry.h"
#include "src/router/config.h"

namespace poise::router {

// One counter per backend identity, each counting into the scope's total.
//
// A counter lives while anyone holds it (a backend list, a picker, a call in
// flight) and is found again by its identity until then: an identity that
// leaves the list and returns while its calls are still in flight gets the
// same counter back, and a call that outlives its backend's removal still
// releases into the right counter. Each counter keeps its scope (and so the
// total it counts into) alive.
//
// A named scope indexes every live counter (channels find each other's). A
// scope of its own serves one backend set, which carries its listed
// identities' counters from list to list itself; it indexes only the
// counters KeepFindableWhileInFlight() hands it, so a process with many
// channels does not keep a second map of every backend per channel.
//
// Thread-safe: channels look counters up from their own work serializers; a
// pick only reads the counters and the total it was handed.
class LoadScope final : public std::enable_shared_from_this<LoadScope> {
 public:
  // A scope of its own, for one channel.
  static std::shared_ptr<LoadScope> Create();
  // The process's scope called `name`: every caller gets the same object
  // while anyone holds it (a channel, a counter, a call in flight), a new
  // one after.
  static std::shared_ptr<LoadScope> Named(std::string_view name);

  LoadScope(const LoadScope&) = delete;
  LoadScope& operator=(const LoadScope&) = delete;

  // A named scope: the live counter of `identity`, else a new one. A scope
  // of its own: the counter kept for `identity` while its calls were in
  // flight, else null (its backend set then counts in a counter of its own,
  // into mutable_total()). Unlimited: limits are the callers'
  // (InFlightCounter::TryAcquireWithin).
  std::shared_ptr<InFlightCounter> SharedCounterFor(std::string_view identity);

  // `identity` left its backend list while `counter` may still count calls:
  // a scope of its own keeps it findable by SharedCounterFor() until they end
  // (a named scope always can).
  void KeepFindableWhileInFlight(
      std::string_view identity,
      const std::shared_ptr<InFlightCounter>& counter);

  // Every call in flight under this scope, over all identities: at most the
  // sum of the counters, below it for a moment while a slot is being taken
  // or given back (InFlightCounter).
  const InFlightCounter& total() const { return total_; }
  // For counters that count into it (they must not outlive the scope).
  InFlightCounter* mutable_total() { return &total_; }

  // Whether this is a process-wide scope made by Named().
  bool named() const { return named_; }
  const std::string& name() const { return name_; }
  // The counters SharedCounterFor() can find now (for tests): every live one of
  // a named scope, the kept live ones of a scope of its own.
  size_t findable_counters() const;

 private:
  LoadScope(std::string name, bool named)
      : name_(std::move(name)), named_(named) {}

  std::shared_ptr<InFlightCounter> NewCounterLocked();

  const std::string name_;
  const bool named_;
  InFlightCounter total_;
  mutable std::mutex mu_;
  internal::WeakRegistry<std::string, InFlightCounter> counters_;
};

// The scope a channel whose scope name is `name` (its stats label, else its
// target) counts in under `kind`: the process's scope of that name, or one of
// its own - `current` when that already is the right one.
std::shared_ptr<LoadScope> LoadScopeForChannel(
    LoadScopeKind kind, std::string_view name,
    std::shared_ptr<LoadScope> current);

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_LOAD_SCOPE_H_
