// State that most instances of its holder never need, made when first
// needed: a process may hold 100 channels to 1,000 backends, and per backend
// and channel every pointer-sized field counts.
#ifndef POISE_SRC_ROUTER_MADE_ON_FIRST_USE_H_
#define POISE_SRC_ROUTER_MADE_ON_FIRST_USE_H_

#include <atomic>
#include <memory>

#include "absl/base/attributes.h"

namespace poise::router {

// A T made by the first Get(), on any thread (others racing it get the
// same one), and kept until this is destroyed. Costs a pointer until then.
template <typename T>
class MadeOnFirstUse final {
 public:
  MadeOnFirstUse() = default;
  MadeOnFirstUse(const MadeOnFirstUse&) = delete;
  MadeOnFirstUse& operator=(const MadeOnFirstUse&) = delete;
  ~MadeOnFirstUse() { delete made_.load(std::memory_order_acquire); }

  T& Get() {
    T* made = made_.load(std::memory_order_acquire);
    return made != nullptr ? *made : Make();
  }
  // Null until the first Get().
  const T* IfMade() const { return made_.load(std::memory_order_acquire); }

 private:
  // Out of line: Get() is on the paths of picks and ended calls, which run
  // with cold caches, and this runs once.
  ABSL_ATTRIBUTE_NOINLINE T& Make() {
    auto made = std::make_unique<T>();
    T* expected = nullptr;
    if (made_.compare_exchange_strong(expected, made.get(),
                                      std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      return *made.release();
    }
    return *expected;  // another thread made it first
  }

  std::atomic<T*> made_{nullptr};
};

}  // namespace poise::router

#endif  // POISE_SRC_ROUTER_MADE_ON_FIRST_USE_H_
