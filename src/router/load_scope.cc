#include "src/router/load_scope.h"

#include <algorithm>
#include <utility>

namespace poise::router {
namespace {

// A counter and the scope it counts into, in one allocation; handed out as
// a shared_ptr to the counter that owns both.
struct ScopedCounter {
  explicit ScopedCounter(std::shared_ptr<LoadScope> owner,
                         InFlightCounter* total)
      : counter(InFlightCounter::kNoLimit, total), scope(std::move(owner)) {}
  InFlightCounter counter;
  std::shared_ptr<LoadScope> scope;
};

// The named scopes, weakly: a scope goes when its last holder does.
struct Registry {
  std::mutex mu;
  absl::flat_hash_map<std::string, std::weak_ptr<LoadScope>> scopes;
};

Registry& TheRegistry() {
  static auto* registry = new Registry();  // never destroyed: see Named()
  return *registry;
}

}  // namespace

std::shared_ptr<LoadScope> LoadScope::Create() {
  return std::shared_ptr<LoadScope>(new LoadScope(std::string(), false));
}

std::shared_ptr<LoadScope> LoadScope::Named(std::string_view name) {
  // Leaked on purpose: calls may release (and scopes die) during static
  // destruction, after a destroyed registry could no longer be locked.
  Registry& registry = TheRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  std::weak_ptr<LoadScope>& slot = registry.scopes[std::string(name)];
  std::shared_ptr<LoadScope> scope = slot.lock();
  if (scope == nullptr) {
    scope = std::shared_ptr<LoadScope>(new LoadScope(std::string(name), true));
    slot = scope;
    // Forget the scopes that died since (their names are rarely reused).
    for (auto it = registry.scopes.begin(); it != registry.scopes.end();) {
      if (it->second.expired()) {
        registry.scopes.erase(it++);
      } else {
        ++it;
      }
    }
  }
  return scope;
}

std::shared_ptr<InFlightCounter> LoadScope::SharedCounterFor(
    std::string_view identity) {
  std::lock_guard<std::mutex> lock(mu_);
  PruneLocked();
  const std::string key(identity);
  if (!named_) {
    const auto kept = counters_.find(key);
    if (kept == counters_.end()) return nullptr;
    std::shared_ptr<InFlightCounter> counter = kept->second.lock();
    counters_.erase(kept);  // listed again: its set carries it now
    return counter;
  }
  std::weak_ptr<InFlightCounter>& slot = counters_[key];
  std::shared_ptr<InFlightCounter> counter = slot.lock();
  if (counter == nullptr) {
    counter = NewCounterLocked();
    slot = counter;
  }
  return counter;
}

void LoadScope::KeepFindableWhileInFlight(
    std::string_view identity,
    const std::shared_ptr<InFlightCounter>& counter) {
  if (named_ || counter == nullptr || counter->Load() == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  PruneLocked();
  counters_[std::string(identity)] = counter;
}

std::shared_ptr<InFlightCounter> LoadScope::NewCounterLocked() {
  auto holder = std::make_shared<ScopedCounter>(shared_from_this(), &total_);
  return {holder, &holder->counter};
}

void LoadScope::PruneLocked() {
  if (counters_.size() < prune_at_) return;
  // Amortised: the map at least doubles between two sweeps.
  for (auto it = counters_.begin(); it != counters_.end();) {
    if (it->second.expired()) {
      counters_.erase(it++);
    } else {
      ++it;
    }
  }
  prune_at_ = std::max<size_t>(16, 2 * counters_.size());
}

size_t LoadScope::findable_counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t live = 0;
  for (const auto& [identity, counter] : counters_) {
    live += counter.expired() ? 0 : 1;
  }
  return live;
}

std::shared_ptr<LoadScope> LoadScopeForChannel(
    LoadScopeKind kind, std::string_view name,
    std::shared_ptr<LoadScope> current) {
  if (kind == LoadScopeKind::kProcess) {
    if (current != nullptr && current->named() && current->name() == name) {
      return current;
    }
    return LoadScope::Named(name);
  }
  if (current != nullptr && !current->named()) return current;
  return LoadScope::Create();
}

}  // namespace poise::router
