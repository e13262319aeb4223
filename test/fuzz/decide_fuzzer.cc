// libFuzzer: the core's BoundedLoadRendezvous::Decide over arbitrary candidate
// lists, weights, eligibility, loads, factors and keys. Invariants:
// - Decide answers exactly as poise::contract::Decide (src/core/contract.h),
//   errors included: weights near 2^32 sum past 2^32 - 1 (no error: they
//   sum in 64 bits), loads near 2^64 overflow or make capacities past
//   2^64 - 1 (exact, 128 bits);
// - affinity == WeightedRendezvous::Pick (the unconstrained owner), which
//   answers as contract::Pick;
// - the selection is eligible and has room: selected_load < capacity,
//   with the sampled load and Capacity() recomputed independently;
// - spilled == (selection != affinity); Decide is deterministic;
// - the IdentityTable overloads of Pick and Decide (a table built from the
//   same candidates) answer exactly as the plain ones, errors included;
// - PreparedCandidates (one-weight lists are made common: bit 0x20 of the
//   first candidate's shape gives every candidate its weight; bit 0x40 makes
//   two-weight lists, each candidate taking the first or the last one's
//   weight by bit 0x20 of its own shape) answers as
//   well: Pick and Decide exactly, Route with Decide's routing, sampling
//   each load at most once and, for an idle owner, reporting no load sum;
// - PreparedCandidates::RouteWithTotal, for totals around and far from the
//   loads' sum (0, below, equal, above, near 2^64), answers exactly as
//   contract::DecideWithTotal (errors and the stale flag included), reading
//   each load at most once; with the total equal to the sum, as Decide.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "poise/identity_table.h"
#include "poise/rendezvous.h"
#include "src/core/contract.h"
#include "src/core/prepared_candidates.h"
#include "test/fuzz/fuzz_check.h"

namespace {

class Reader {
 public:
  Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint64_t Bytes(int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; ++i) v = (v << 8) | Byte();
    return v;
  }
  std::string_view Rest() {
    const auto* p = reinterpret_cast<const char*>(data_ + pos_);
    const size_t n = size_ - pos_;
    pos_ = size_;
    return {p, n};
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

bool SameResult(const poise::Result<size_t>& a,
                const poise::Result<size_t>& b) {
  if (a.ok() != b.ok()) return false;
  return a.ok() ? a.value() == b.value() : a.error() == b.error();
}

bool SameResult(const poise::Result<poise::Decision>& a,
                const poise::Result<poise::Decision>& b) {
  if (a.ok() != b.ok()) return false;
  if (!a.ok()) return a.error() == b.error();
  const poise::Decision& x = a.value();
  const poise::Decision& y = b.value();
  return x.affinity == y.affinity && x.selection == y.selection &&
         x.spilled == y.spilled && x.selected_load == y.selected_load &&
         x.selected_capacity == y.selected_capacity;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(data, size);
  const auto factor = static_cast<uint32_t>(in.Bytes(4));
  const size_t n = in.Byte() % 17;
  std::vector<std::string> ids(n);
  std::vector<poise::Candidate> candidates(n);
  std::vector<uint64_t> loads(n);
  bool one_weight = false, two_weights = false;
  std::vector<bool> second(n);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t shape = in.Byte();
    if (i == 0) one_weight = (shape & 0x20) != 0;
    if (i == 0) two_weights = (shape & 0x40) != 0;
    second[i] = i != 0 && (shape & 0x20) != 0;
    // Short identities, often colliding (duplicates are allowed).
    ids[i] = std::string(1, static_cast<char>('a' + (shape & 7)));
    if (shape & 8) ids[i] += std::to_string(in.Byte());
    // Weights: small, or near the 32-bit edge.
    const uint8_t w = in.Byte();
    candidates[i].weight = (w & 0x80)
                               ? static_cast<uint32_t>(UINT32_MAX - (w & 0x7f))
                               : static_cast<uint32_t>(w & 0x0f);
    candidates[i].eligible = (shape & 0x10) == 0;
    // Loads: small, or near the 64-bit edge.
    const uint8_t l = in.Byte();
    loads[i] = (l & 0x80) ? UINT64_MAX - (l & 0x7f) : (l & 0x7f);
  }
  for (size_t i = 0; i < n; ++i) candidates[i].identity = ids[i];
  if (one_weight) {
    for (auto& c : candidates) c.weight = candidates[0].weight;
  } else if (two_weights && n > 1) {
    const uint32_t a = candidates[0].weight, b = candidates[n - 1].weight;
    for (size_t i = 0; i < n; ++i) candidates[i].weight = second[i] ? b : a;
  }
  const std::string_view key = in.Rest();

  auto policy = poise::BoundedLoadRendezvous::Create(factor);
  if (factor < poise::BoundedLoadRendezvous::kMinFactorPercent) {
    FUZZ_CHECK(!policy.has_value());
    return 0;
  }
  FUZZ_CHECK(policy.has_value());

  uint64_t total_weight = 0;
  uint64_t total_load = 0;
  bool load_overflow = false;
  size_t eligible = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!candidates[i].IsEligible()) continue;
    ++eligible;
    total_weight += candidates[i].weight;
    load_overflow |= __builtin_add_overflow(total_load, loads[i], &total_load);
  }
  // The new request is counted too: L + 1 must be representable.
  const bool load_past = load_overflow || total_load == UINT64_MAX;

  poise::DecisionScratch scratch;
  std::vector<int> sampled(n, 0);
  const auto result = policy->Decide(
      key, candidates,
      [&](size_t i) {
        ++sampled[i];
        return loads[i];
      },
      scratch);
  // Loads are sampled exactly once for every eligible candidate, never for
  // ineligible ones.
  for (size_t i = 0; i < n; ++i) {
    FUZZ_CHECK(sampled[i] == (candidates[i].IsEligible() ? 1 : 0));
  }
  const auto owner = poise::WeightedRendezvous::Pick(key, candidates);

  // The table overloads: the same answers, bit for bit, on every input.
  const poise::IdentityTable table(candidates);
  FUZZ_CHECK(SameResult(poise::WeightedRendezvous::Pick(key, candidates, table),
                        owner));
  FUZZ_CHECK(SameResult(
      policy->Decide(
          key, candidates, table, [&](size_t i) { return loads[i]; }, scratch),
      result));

  const poise::PreparedCandidates prepared(
      candidates, std::make_shared<const poise::IdentityTable>(candidates));
  FUZZ_CHECK(SameResult(prepared.Pick(key), owner));
  auto counted = [&](size_t i) {
    ++sampled[i];
    return loads[i];
  };
  // The contract, errors included.
  std::vector<poise::contract::LoadedCandidate> backends(n);
  for (size_t i = 0; i < n; ++i) {
    backends[i] = {ids[i], candidates[i].weight, loads[i],
                   candidates[i].eligible};
  }
  // RouteWithTotal for totals around the loads' sum (wrapped, if it did)
  // and at the edges.
  const uint64_t totals[] = {0,
                             total_load / 2,
                             total_load - 1,
                             total_load,
                             total_load + 1,
                             total_load * 3 + 7,
                             UINT64_MAX - 1,
                             UINT64_MAX};
  for (const uint64_t total : totals) {
    std::fill(sampled.begin(), sampled.end(), 0);
    const auto with_total =
        prepared.RouteWithTotal(*policy, key, total, counted, scratch);
    for (size_t i = 0; i < n; ++i) {
      FUZZ_CHECK(sampled[i] <= (candidates[i].IsEligible() ? 1 : 0));
    }
    const auto want_with_total =
        poise::contract::DecideWithTotal(key, backends, factor, total);
    FUZZ_CHECK(with_total.ok() == want_with_total.ok());
    if (!with_total.ok()) {
      FUZZ_CHECK(with_total.error() == want_with_total.error());
      continue;
    }
    const poise::contract::Decision& w = want_with_total.value().decision;
    FUZZ_CHECK(with_total.value().affinity == w.affinity);
    FUZZ_CHECK(with_total.value().selection == w.selection);
    FUZZ_CHECK(with_total.value().spilled == (w.selection != w.affinity));
    FUZZ_CHECK(with_total.value().stale_total ==
               want_with_total.value().stale_total);
    if (total == total_load && !load_past) {
      FUZZ_CHECK(result.ok() && !with_total.value().stale_total);
      FUZZ_CHECK(with_total.value().selection == result.value().selection);
      FUZZ_CHECK(with_total.value().affinity == result.value().affinity);
    }
  }
  const auto expected = poise::contract::Decide(key, backends, factor);
  FUZZ_CHECK(expected.ok() == result.ok());
  const auto expected_owner = poise::contract::Pick(key, backends);
  FUZZ_CHECK(expected_owner.ok() == owner.ok());
  if (owner.ok()) FUZZ_CHECK(owner.value() == expected_owner.value());
  if (!result.ok()) {
    FUZZ_CHECK(result.error() == expected.error());
    if (n == 0) FUZZ_CHECK(result.error() == poise::PickError::kEmpty);
    if (n != 0 && eligible == 0) {
      FUZZ_CHECK(result.error() == poise::PickError::kNoEligibleCandidates);
    }
    // Below 2^32 candidates, weights never overflow 64 bits.
    if (eligible != 0) FUZZ_CHECK(load_past);
    return 0;
  }
  FUZZ_CHECK(!load_past);
  const poise::contract::Decision& want = expected.value();
  FUZZ_CHECK(result.value().affinity == want.affinity);
  FUZZ_CHECK(result.value().selection == want.selection);
  FUZZ_CHECK(result.value().selected_load == want.selected_load);
  FUZZ_CHECK(result.value().selected_capacity == want.selected_capacity);
  FUZZ_CHECK(result.ok());
  FUZZ_CHECK(owner.ok());
  const poise::Decision& d = result.value();
  FUZZ_CHECK(d.affinity == owner.value());
  FUZZ_CHECK(d.selection < n && candidates[d.selection].IsEligible());
  FUZZ_CHECK(d.spilled == (d.selection != d.affinity));
  FUZZ_CHECK(d.selected_load == loads[d.selection]);
  const poise::UInt128 capacity = poise::BoundedLoadRendezvous::Capacity(
      factor, total_load, candidates[d.selection].weight, total_weight);
  FUZZ_CHECK(d.selected_capacity == capacity);
  FUZZ_CHECK(d.selected_load < d.selected_capacity);
  // Every candidate ranked before the selection was full.
  const auto ranking = poise::WeightedRendezvous::Ranking(key, candidates);
  FUZZ_CHECK(ranking.ok());
  FUZZ_CHECK(ranking.value().front().index == d.affinity);
  for (const poise::Rank& r : ranking.value()) {
    if (r.index == d.selection) break;
    FUZZ_CHECK(loads[r.index] >=
               poise::BoundedLoadRendezvous::Capacity(factor, total_load,
                                                      r.weight, total_weight));
  }
  // Deterministic.
  const auto again = policy->Decide(
      key, candidates, [&](size_t i) { return loads[i]; }, scratch);
  FUZZ_CHECK(again.ok() && again.value().selection == d.selection);
  return 0;
}
