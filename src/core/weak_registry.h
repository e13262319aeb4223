// Objects found by a key while anyone holds them: a map of weak pointers,
// swept of its expired entries.
//
// The process shares several kinds of object this way (the identity store's
// tables, the router's named load scopes and their counters, the stats
// labels, the key-order caches): the first caller of a key makes the object,
// every caller after it gets the same one while it lives, and the registry
// never keeps one alive. An entry whose object died stays until a sweep,
// which runs when an insert brings the map to twice its live entries after
// the last sweep (at least kFirstSweepAt): between calls the map holds fewer
// than max(kFirstSweepAt, 2 x the live entries of the last sweep) entries,
// and each insert pays O(1) sweep work on average.
//
// Internal to poise (src/core and src/router); no gRPC, no Abseil.
#ifndef POISE_SRC_CORE_WEAK_REGISTRY_H_
#define POISE_SRC_CORE_WEAK_REGISTRY_H_

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace poise::internal {

// Not synchronised: the caller serialises every call (WeakRegistryLocked
// does it with a mutex of its own; a holder with a mutex of its own calls
// this under it).
template <typename Key, typename T, typename Hash = std::hash<Key>>
class WeakRegistry final {
 public:
  static constexpr size_t kFirstSweepAt = 16;

  // The live object of `key`, else null.
  std::shared_ptr<T> Find(const Key& key) const {
    const auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : it->second.lock();
  }

  // The live object of `key`, else make() (a std::shared_ptr<T>), listed
  // under `key`. make() runs only when no live object is listed.
  template <typename Make>
  std::shared_ptr<T> FindOrMake(const Key& key, Make&& make) {
    const auto [it, inserted] = entries_.try_emplace(key);
    std::shared_ptr<T> object = it->second.lock();
    if (object != nullptr) return object;
    try {
      object = std::forward<Make>(make)();
    } catch (...) {
      if (inserted) entries_.erase(it);
      throw;
    }
    it->second = object;
    if (inserted) SweepIfGrown();
    return object;
  }

  // Lists `object` under `key`, in place of what was.
  void Put(const Key& key, const std::shared_ptr<T>& object) {
    const bool inserted = entries_.insert_or_assign(key, object).second;
    if (inserted) SweepIfGrown();
  }

  // The live object of `key`, else null; either way `key` is no longer
  // listed.
  std::shared_ptr<T> Take(const Key& key) {
    const auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    std::shared_ptr<T> object = it->second.lock();
    entries_.erase(it);
    return object;
  }

  // The entries whose object lives now.
  size_t live() const {
    return static_cast<size_t>(std::count_if(
        entries_.begin(), entries_.end(),
        [](const auto& entry) { return !entry.second.expired(); }));
  }
  // Every entry, the expired ones not yet swept included.
  size_t size() const { return entries_.size(); }

 private:
  void SweepIfGrown() {
    if (entries_.size() < sweep_at_) return;
    for (auto it = entries_.begin(); it != entries_.end();) {
      it = it->second.expired() ? entries_.erase(it) : std::next(it);
    }
    sweep_at_ = std::max(kFirstSweepAt, 2 * entries_.size());
  }

  std::unordered_map<Key, std::weak_ptr<T>, Hash> entries_;
  size_t sweep_at_ = kFirstSweepAt;
};

// A WeakRegistry behind a mutex of its own, for registries every thread
// reaches on its own (process-wide ones).
template <typename Key, typename T, typename Hash = std::hash<Key>>
class WeakRegistryLocked final {
 public:
  static constexpr size_t kFirstSweepAt =
      WeakRegistry<Key, T, Hash>::kFirstSweepAt;

  // WeakRegistry::FindOrMake; make() runs under the mutex, so concurrent
  // callers of one key make one object.
  template <typename Make>
  std::shared_ptr<T> FindOrMake(const Key& key, Make&& make) {
    std::lock_guard<std::mutex> lock(mu_);
    return registry_.FindOrMake(key, std::forward<Make>(make));
  }
  size_t live() const {
    std::lock_guard<std::mutex> lock(mu_);
    return registry_.live();
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return registry_.size();
  }

 private:
  mutable std::mutex mu_;
  WeakRegistry<Key, T, Hash> registry_;
};

}  // namespace poise::internal

#endif  // POISE_SRC_CORE_WEAK_REGISTRY_H_
