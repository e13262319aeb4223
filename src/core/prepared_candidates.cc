#include "prepared_candidates.h"

#include <utility>

#include "key_order.h"
#include "largest_z.h"
#include "one_weight_path.h"
#include "two_weight_path.h"

namespace poise {
namespace {

using internal::kNone;
using internal::ListPath;
using Routed = PreparedCandidates::Routed;

// The router's loads: the backends' in-flight counters.
struct CounterView {
  const InFlightCounter* const* counters;
  uint64_t Load(size_t i) const { return counters[i]->Load(); }
  static bool Admits(size_t /*i*/) { return true; }
};

template <typename View>
Result<Routed> WalkFor(const internal::PreparedList& list,
                       const BoundedLoadRendezvous& bounded,
                       std::string_view key, uint64_t total_load, View& view,
                       size_t n, DecisionScratch& scratch) {
  // The order's errors come first out of the walk.
  internal::KeyOrder order =
      internal::KeyOrder::Of(list, key,
                             n == 0 ? internal::KeyOrder::Stop::kAtOwner
                                    : internal::KeyOrder::Stop::kPastOwner);
  const Result<internal::Walked> walked = internal::WalkToNthWithRoom(
      order, bounded.factor_percent(), total_load,
      internal::EligibleWeightOf(list), view, n, scratch);
  if (!walked.ok()) return walked.error();
  const internal::Walked& w = walked.value();
  return Routed{w.owner, w.selection, w.selection != w.owner, w.stale_total,
                w.capacity()};
}

}  // namespace

PreparedCandidates::PreparedCandidates(
    std::vector<Candidate> candidates,
    std::shared_ptr<const IdentityTable> table)
    : list_(internal::PrepareList(std::move(candidates), std::move(table))) {}

Result<size_t> PreparedCandidates::Pick(std::string_view key) const {
  if (list_.path == ListPath::kOneWeight) {
    const internal::LargestZ largest =
        internal::OneWeightLargestZ(list_, KeyHash(key).state(), nullptr);
    if (internal::ClearOfRunnerUp(largest)) return largest.index;
  } else if (list_.group_count != 0) {  // two weights, or 3..kMaxGroups
    return internal::PickByWeight(list_, key);
  }
  return WeightedRendezvous::Pick(key, list_.candidates, *list_.table);
}

size_t PreparedCandidates::OrderPrefix(std::string_view key, size_t count,
                                       uint32_t* out,
                                       DecisionScratch& scratch) const {
  if (count == 0 || list_.path == ListPath::kGeneral) return 0;
  // The walk's first level lists about twice the prefix, so that one level
  // serves as a rule.
  Result<internal::KeyOrder> order =
      internal::KeyOrder::Hashed(list_, key, scratch, 2 * count);
  if (!order.ok()) return 0;
  size_t written = 0;
  while (written < count) {
    const size_t i = order.value().Next(scratch);
    // The end, or a near-tie of z the walk cannot order (no exact score is
    // taken for a prefix).
    if (i == kNone || !order.value().certified_by_z()) break;
    out[written++] = static_cast<uint32_t>(i);
  }
  return written;
}

Result<Routed> PreparedCandidates::RouteWithTotal(
    const BoundedLoadRendezvous& bounded, std::string_view key,
    uint64_t total_load, const InFlightCounter* const* counters,
    DecisionScratch& scratch) const {
  CounterView view{counters};
  return WalkFor(list_, bounded, key, total_load, view, 0, scratch);
}

Result<Routed> PreparedCandidates::RouteWithTotal(
    const BoundedLoadRendezvous& bounded, std::string_view key,
    uint64_t total_load, LoadReader load, DecisionScratch& scratch) const {
  return WalkFor(list_, bounded, key, total_load, load, 0, scratch);
}

Result<Routed> PreparedCandidates::NthWithRoomForTotal(
    const BoundedLoadRendezvous& bounded, std::string_view key,
    uint64_t total_load, LoadReader load, size_t n,
    DecisionScratch& scratch) const {
  return WalkFor(list_, bounded, key, total_load, load, n, scratch);
}

}  // namespace poise
