#include "poise/prepared_candidates.h"

#include <utility>

#include "tournament.h"

namespace poise {

PreparedCandidates::PreparedCandidates(
    std::vector<Candidate> candidates,
    std::shared_ptr<const IdentityTable> table)
    : candidates_(std::move(candidates)),
      table_(table != nullptr ? std::move(table)
                              : std::make_shared<const IdentityTable>()) {
  const size_t n = candidates_.size();
  if (table_->size() != n || n > UINT32_MAX) return;
  uint32_t weights[2] = {0, 0};  // in order of first appearance
  uint64_t total_weight = 0;
  for (size_t i = 0; i < n; ++i) {
    const Candidate& c = candidates_[i];
    if (!c.IsEligible()) continue;
    if (weights[0] == 0) weights[0] = c.weight;
    if (c.weight != weights[0] && weights[1] == 0) weights[1] = c.weight;
    if (c.weight != weights[0] && c.weight != weights[1]) {
      eligible_.clear();  // three or more weights: the general path
      has_second_.clear();
      return;
    }
    eligible_.push_back(static_cast<uint32_t>(i));
    has_second_.push_back(c.weight == weights[1]);
    total_weight += c.weight;
  }
  if (eligible_.empty() || total_weight > UINT32_MAX) {
    eligible_.clear();  // the general path reports these cases
    has_second_.clear();
    return;
  }
  if (weights[1] == 0) {
    weight_ = weights[0];
    total_weight_ = static_cast<uint32_t>(total_weight);
    has_second_.clear();
  } else {
    first_weight_ = weights[0];
    second_weight_ = weights[1];
  }
}

namespace {

// The one-weight leader over `eligible`; stores each z in `z` when given.
detail::Leader Lead(const IdentityTable& table,
                    const std::vector<uint32_t>& eligible, uint64_t key_state,
                    uint64_t* z) {
  detail::Leader lead = detail::Leader::Empty();
  const IdentityTable::KeyRow row = table.ForKey(key_state);
  for (const uint32_t i : eligible) {
    const uint64_t zi = row.Mixed(i);
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
  } else if (second_weight_ != 0) {
    return PickTwoWeights(key);
  }
  return WeightedRendezvous::Pick(key, candidates_, *table_);
}

Result<size_t> PreparedCandidates::PickTwoWeights(std::string_view key) const {
  const KeyHash hash(key);
  const auto no_load = [](size_t) { return uint64_t{0}; };
  detail::PassState pass = TwoWeightPass<false>(hash.state(), no_load, nullptr);
  return internal::FinishPick(hash, candidates_, *table_, pass);
}

bool PreparedCandidates::LeadInto(std::string_view key,
                                  DecisionScratch& scratch,
                                  detail::Leader& lead) const {
  if (!scratch.Fit(candidates_.size())) return false;
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
