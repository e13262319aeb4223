#include "poise/prepared_candidates.h"

#include <utility>

namespace poise {

PreparedCandidates::PreparedCandidates(
    std::vector<Candidate> candidates,
    std::shared_ptr<const IdentityTable> table)
    : candidates_(std::move(candidates)),
      table_(table != nullptr ? std::move(table)
                              : std::make_shared<const IdentityTable>()) {
  const size_t n = candidates_.size();
  if (table_->size() != n || n > UINT32_MAX) return;
  uint32_t weight = 0;
  for (size_t i = 0; i < n; ++i) {
    const Candidate& c = candidates_[i];
    if (!c.IsEligible()) continue;
    if (weight != 0 && c.weight != weight) {
      eligible_.clear();
      return;
    }
    weight = c.weight;
    eligible_.push_back(static_cast<uint32_t>(i));
  }
  const uint64_t total_weight = uint64_t{weight} * eligible_.size();
  if (eligible_.empty() || total_weight > UINT32_MAX) {
    eligible_.clear();  // the general path reports these cases
    return;
  }
  weight_ = weight;
  total_weight_ = static_cast<uint32_t>(total_weight);
}

namespace {

// The one-weight leader over `eligible`; stores each z in `z` when given.
detail::Leader Lead(const IdentityTable& table,
                    const std::vector<uint32_t>& eligible, uint64_t key_state,
                    uint64_t* z) {
  detail::Leader lead = detail::Leader::Empty();
  for (const uint32_t i : eligible) {
    const uint64_t zi = table.Mixed(key_state, i);
    if (z != nullptr) z[i] = zi;
    lead.Offer(zi, i);
  }
  return lead;
}

}  // namespace

Result<size_t> PreparedCandidates::Pick(std::string_view key) const {
  if (weight_ != 0) {
    const detail::Leader lead =
        Lead(*table_, eligible_, KeyHash(key).state(), nullptr);
    if (detail::Decisive(lead)) return lead.index;
  }
  return WeightedRendezvous::Pick(key, candidates_, *table_);
}

bool PreparedCandidates::LeadInto(std::string_view key,
                                  DecisionScratch& scratch,
                                  detail::Leader& lead) const {
  if (!scratch.Reserve(candidates_.size())) return false;
  scratch.Resize(candidates_.size());  // within capacity: never allocates
  lead = Lead(*table_, eligible_, KeyHash(key).state(), scratch.hashes_.data());
  return true;
}

Result<Decision> PreparedCandidates::HandOver(
    const BoundedLoadRendezvous& bounded, std::string_view key,
    DecisionScratch& scratch) const {
  // Decide rewrites each load slot with the value it reads from it.
  const uint64_t* const loads = scratch.loads_.data();
  return bounded.Decide(
      key, candidates_, *table_, [loads](size_t i) { return loads[i]; },
      scratch);
}

}  // namespace poise
