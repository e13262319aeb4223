#include "src/router/load_scope.h"

#include <utility>

#include "src/core/weak_registry.h"

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
using NamedScopes = internal::WeakRegistryLocked<std::string, LoadScope>;

NamedScopes& TheNamedScopes() {
  static auto* scopes = new NamedScopes();  // never destroyed: see Named()
  return *scopes;
}

}  // namespace

std::shared_ptr<LoadScope> LoadScope::Create() {
  return std::shared_ptr<LoadScope>(new LoadScope(std::string(), false));
}

std::shared_ptr<LoadScope> LoadScope::Named(std::string_view name) {
  // Leaked on purpose: calls may release (and scopes die) during static
  // destruction, after a destroyed registry could no longer be locked.
  return TheNamedScopes().FindOrMake(std::string(name), [name] {
    return std::shared_ptr<LoadScope>(new LoadScope(std::string(name), true));
  });
}

std::shared_ptr<InFlightCounter> LoadScope::SharedCounterFor(
    std::string_view identity) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string key(identity);
  // Taken out: its set carries it from now on.
  if (!named_) return counters_.Take(key);
  return counters_.FindOrMake(key, [this] { return NewCounterLocked(); });
}

void LoadScope::KeepFindableWhileInFlight(
    std::string_view identity,
    const std::shared_ptr<InFlightCounter>& counter) {
  if (named_ || counter == nullptr || counter->Load() == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  counters_.Put(std::string(identity), counter);
}

std::shared_ptr<InFlightCounter> LoadScope::NewCounterLocked() {
  auto holder = std::make_shared<ScopedCounter>(shared_from_this(), &total_);
  return {holder, &holder->counter};
}

size_t LoadScope::findable_counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_.live();
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
