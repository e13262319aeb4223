#include "poise/identity_table.h"

#include <algorithm>
#include <cstring>

#include "candidate_hash.h"
#include "identity_store.h"
#include "identity_table_access.h"
#include "poise/types.h"

namespace poise {

namespace {

// p^m for m = |identity| + 1 (the terminator's step included).
uint64_t PowerOf(std::string_view identity) {
  uint64_t power = kFnvPrime;
  for (size_t k = 0; k < identity.size(); ++k) power *= kFnvPrime;
  return power;
}

// One identity's offsets, in row order: D(l) = FNV(l) - l * p^m, all 256
// low-byte states walked in lockstep by the vector kernel.
void HashInto(std::string_view identity, uint64_t* power, uint64_t* offset) {
  *power = PowerOf(identity);
  internal::HashIdentityOffsets(identity, *power, offset);
}

}  // namespace

IdentityTable::IdentityTable(const std::vector<std::string_view>& identities)
    : size_(identities.size()),
      power_(identities.size()),
      offset_(new uint64_t[identities.size() * 256]),
      identities_(identities.size()) {
  auto* const offset = const_cast<uint64_t*>(offset_.get());
  uint64_t row[256];
  for (size_t i = 0; i < size_; ++i) {
    HashInto(identities[i], &power_[i], row);
    for (size_t l = 0; l < 256; ++l) offset[l * size_ + i] = row[l];
  }
  // The identities, copied into one buffer the views below point into.
  size_t bytes = 0;
  for (const std::string_view id : identities) bytes += id.size();
  auto buffer = std::shared_ptr<char[]>(new char[bytes]);
  char* at = buffer.get();
  for (size_t i = 0; i < size_; ++i) {
    if (!identities[i].empty()) {
      std::memcpy(at, identities[i].data(), identities[i].size());
    }
    identities_[i] = std::string_view(at, identities[i].size());
    at += identities[i].size();
  }
  keep_ = std::move(buffer);
  SetCommonPower();
}

namespace internal {

std::shared_ptr<const IdentityTable> IdentityTableAccess::FromRows(
    const IdentityRow* const* rows, size_t n,
    std::shared_ptr<const void> keep) {
  auto table = std::make_shared<IdentityTable>();
  table->size_ = n;
  table->power_.resize(n);
  table->identities_.resize(n);
  auto* const offset = new uint64_t[n * 256];
  table->offset_.reset(offset);
  table->keep_ = std::move(keep);
  for (size_t i = 0; i < n; ++i) {
    table->power_[i] = rows[i]->power;
    table->identities_[i] = rows[i]->identity;
  }
  // The transposition, 8 identities at a time: for each l their 8 offsets
  // go to 8 consecutive words (one cache line, written once) from 8 rows
  // read in order, instead of one identity's 256 offsets scattered over 256
  // lines.
  size_t i0 = 0;
  for (; i0 + 8 <= n; i0 += 8) {
    const uint64_t* const r0 = rows[i0]->offset;
    const uint64_t* const r1 = rows[i0 + 1]->offset;
    const uint64_t* const r2 = rows[i0 + 2]->offset;
    const uint64_t* const r3 = rows[i0 + 3]->offset;
    const uint64_t* const r4 = rows[i0 + 4]->offset;
    const uint64_t* const r5 = rows[i0 + 5]->offset;
    const uint64_t* const r6 = rows[i0 + 6]->offset;
    const uint64_t* const r7 = rows[i0 + 7]->offset;
    uint64_t* out = offset + i0;
    for (size_t l = 0; l < 256; ++l, out += n) {
      out[0] = r0[l];
      out[1] = r1[l];
      out[2] = r2[l];
      out[3] = r3[l];
      out[4] = r4[l];
      out[5] = r5[l];
      out[6] = r6[l];
      out[7] = r7[l];
    }
  }
  for (; i0 < n; ++i0) {
    const uint64_t* const r = rows[i0]->offset;
    for (size_t l = 0; l < 256; ++l) offset[l * n + i0] = r[l];
  }
  table->SetCommonPower();
  return table;
}

}  // namespace internal

// Identities of one length (addresses often are) share p^m: a pick may then
// skip reading the powers.
void IdentityTable::SetCommonPower() {
  if (size_ != 0 && std::all_of(power_.begin(), power_.end(),
                                [&](uint64_t p) { return p == power_[0]; })) {
    common_power_ = power_[0];
  }
}

namespace {

std::vector<std::string_view> IdentitiesOf(
    const std::vector<Candidate>& candidates) {
  std::vector<std::string_view> identities;
  identities.reserve(candidates.size());
  for (const Candidate& c : candidates) identities.push_back(c.identity);
  return identities;
}

}  // namespace

IdentityTable::IdentityTable(const std::vector<Candidate>& candidates)
    : IdentityTable(IdentitiesOf(candidates)) {}

namespace internal {

void HashIdentityRow(std::string_view identity, IdentityRow* row) {
  HashInto(identity, &row->power, row->offset);
}

}  // namespace internal

}  // namespace poise
