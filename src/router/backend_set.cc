#include "src/router/backend_set.h"

#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "src/core/identity_store.h"

namespace poise::router {

// Every channel makes a cell per listed backend (100 channels x 1,000
// backends: 100,000 cells), in one allocation with its shared_ptr's block
// (16 bytes): 88 bytes keep it in glibc's 112-byte chunk, a field more takes
// 128 (docs/performance.md, the memory goal). Counts made on first use hold
// what a pick need not touch.
static_assert(sizeof(void*) != 8 || sizeof(BackendCell) <= 88,
              "BackendCell grew past glibc's 112-byte chunk");

namespace {

std::shared_ptr<const BackendList> EmptyList(std::shared_ptr<LoadScope> scope) {
  auto list = std::make_shared<BackendList>();
  list->scope = std::move(scope);
  return list;
}

// The config's endpoints[] entries, as views into `config`: those with an
// address by it, those without by their identity (validated: each unique).
struct EndpointIndex {
  explicit EndpointIndex(const Config& config) {
    for (const EndpointConfig& e : config.endpoints) {
      if (e.address.has_value()) {
        by_address.emplace(*e.address, &e);
      } else if (e.identity.has_value()) {
        by_identity.emplace(*e.identity, &e);
      }
    }
  }
  // B2: the entry naming `entry`'s address, else the identity-only entry
  // naming the identity the resolver gave it (or its address text).
  const EndpointConfig* For(const ResolverEntry& entry) const {
    if (const auto it = by_address.find(entry.address);
        it != by_address.end()) {
      return it->second;
    }
    if (by_identity.empty()) return nullptr;
    std::string_view identity = entry.address;
    if (entry.identity.has_value() && !entry.identity->empty()) {
      identity = *entry.identity;
    }
    const auto it = by_identity.find(identity);
    return it != by_identity.end() ? it->second : nullptr;
  }
  absl::flat_hash_map<std::string_view, const EndpointConfig*> by_address;
  absl::flat_hash_map<std::string_view, const EndpointConfig*> by_identity;
};

// B2: the endpoints[] entry's identity, else the entry's identity attribute
// (when not empty), else the address text.
std::string_view IdentityOf(const ResolverEntry& entry,
                            const EndpointConfig* endpoint) {
  if (endpoint != nullptr && endpoint->identity.has_value()) {
    return *endpoint->identity;
  }
  if (entry.identity.has_value() && !entry.identity->empty()) {
    return *entry.identity;
  }
  return entry.address;
}

// B4: the endpoints[] entry's weight, else the entry's weight attribute (when
// above 0), else defaultWeight.
uint32_t WeightOf(const ResolverEntry& entry, const EndpointConfig* endpoint,
                  uint32_t default_weight) {
  if (endpoint != nullptr && endpoint->weight.has_value()) {
    return *endpoint->weight;
  }
  if (entry.weight.has_value() && *entry.weight > 0) return *entry.weight;
  return default_weight;
}

// B5: the endpoints[] entry's zone, else the entry's zone attribute when
// valid, else the first zoneByIdentitySuffix entry's that ends `identity`,
// else none (empty).
std::string_view ZoneOf(const ResolverEntry& entry,
                        const EndpointConfig* endpoint,
                        std::string_view identity, const Config& config) {
  if (endpoint != nullptr && endpoint->zone.has_value()) return *endpoint->zone;
  if (entry.zone.has_value() && IsValidZone(*entry.zone)) return *entry.zone;
  for (const ZoneSuffixConfig& z : config.zone_by_identity_suffix) {
    if (identity.size() >= z.suffix.size() &&
        identity.substr(identity.size() - z.suffix.size()) == z.suffix) {
      return z.zone;
    }
  }
  return {};
}

// Where the previous list's backends are (by identity, and per address in
// list order), and which of them this update has promised or given away.
class PreviousPositions {
 public:
  explicit PreviousPositions(const BackendList& previous)
      : backends_(previous.backends),
        next_at_address_(backends_.size(), kNone),
        promised_(backends_.size(), false),
        taken_(backends_.size(), false) {
    by_identity_.reserve(backends_.size());
    first_at_address_.reserve(backends_.size());
    // Backwards, so that each address's chain runs in list order.
    for (size_t i = backends_.size(); i-- > 0;) {
      const ListedBackend& b = backends_[i];
      by_identity_.emplace(b.identity, i);
      const auto [at, inserted] = first_at_address_.try_emplace(b.address, i);
      if (!inserted) {
        next_at_address_[i] = at->second;
        at->second = i;
      }
    }
  }

  // The previous backend of `identity`, wherever it was.
  std::optional<size_t> OfIdentity(std::string_view identity) const {
    const auto it = by_identity_.find(identity);
    if (it == by_identity_.end()) return std::nullopt;
    return it->second;
  }

  // An entry of `address` and `identity` will list: the previous backend of
  // both is kept for it, not given to another identity of the address.
  void Promise(std::string_view address, std::string_view identity) {
    if (const std::optional<size_t> i = Exact(address, identity)) {
      promised_[*i] = true;
    }
  }

  // Admission::previous for a backend of `address` and `identity`.
  std::optional<size_t> Successor(std::string_view address,
                                  std::string_view identity) const {
    if (const std::optional<size_t> i = Exact(address, identity);
        i.has_value() && !taken_[*i]) {
      return i;
    }
    const auto first = first_at_address_.find(address);
    if (first == first_at_address_.end()) return std::nullopt;
    for (size_t i = first->second; i != kNone; i = next_at_address_[i]) {
      if (!promised_[i] && !taken_[i]) return i;
    }
    return std::nullopt;
  }

  // A backend of this update took over backend `i`'s subchannel.
  void Take(size_t i) { taken_[i] = true; }

 private:
  static constexpr size_t kNone = SIZE_MAX;

  std::optional<size_t> Exact(std::string_view address,
                              std::string_view identity) const {
    const std::optional<size_t> i = OfIdentity(identity);
    if (!i.has_value() || backends_[*i].address != address) return std::nullopt;
    return i;
  }

  const std::vector<ListedBackend>& backends_;
  absl::flat_hash_map<std::string_view, size_t> by_identity_;
  absl::flat_hash_map<std::string_view, size_t> first_at_address_;
  // The next previous backend of the same address; kNone after the last.
  std::vector<size_t> next_at_address_;
  std::vector<bool> promised_;
  std::vector<bool> taken_;
};

// Whether `a` and `b` list the same identities in the same order.
bool SameIdentities(const BackendList& a, const BackendList& b) {
  if (a.backends.size() != b.backends.size()) return false;
  for (size_t i = 0; i < a.backends.size(); ++i) {
    if (a.backends[i].identity != b.backends[i].identity) return false;
  }
  return true;
}

// `next`'s identity table: `previous`'s when it lists the same identities in
// the same order, else the process-wide store's (none for an empty list).
// Returns whether it came from the store.
bool ShareIdentityTable(const BackendList& previous, BackendList& next) {
  if (previous.table != nullptr && SameIdentities(previous, next)) {
    next.table = previous.table;
    return false;
  }
  if (next.backends.empty()) return false;
  std::vector<std::string_view> ids;
  ids.reserve(next.backends.size());
  for (const ListedBackend& b : next.backends) ids.emplace_back(b.identity);
  next.table = internal::IdentityStore::Global().Share(ids);
  return true;
}

}  // namespace

uint32_t BackendList::ZoneIndex(std::string_view zone) const {
  // A list has a few zones: a linear search beats a map.
  for (size_t z = 0; z < zones.size(); ++z) {
    if (zones[z] == zone) return static_cast<uint32_t>(z);
  }
  return kNoZone;
}

BackendSet::BackendSet()
    : list_(EmptyList(LoadScope::Create())), scope_(list_->scope) {}

void BackendSet::SetLoadScope(std::shared_ptr<LoadScope> scope) {
  scope_ = std::move(scope);
}

void BackendSet::Clear() {
  for (const ListedBackend& b : list_->backends) {
    list_->scope->KeepFindableWhileInFlight(b.identity, SharedCounter(b.cell));
  }
  list_ = EmptyList(scope_);
}

BackendSet::UpdateReport BackendSet::Update(
    const std::vector<ResolverEntry>& entries, const Config& config) {
  return Update(entries, config, [](const Admission&) { return true; });
}

BackendSet::UpdateReport BackendSet::Update(
    const std::vector<ResolverEntry>& entries, const Config& config,
    Admit admit) {
  UpdateReport report;
  const std::shared_ptr<const BackendList> previous = list_;
  // Cells carry over by identity, within one scope.
  const bool same_scope = previous->scope == scope_;
  auto next = std::make_shared<BackendList>();
  next->scope = scope_;
  const absl::flat_hash_set<std::string_view> listed =
      ListEntries(entries, config, admit, *previous, same_scope, *next, report);
  report.table_rebuilt = ShareIdentityTable(*previous, *next);
  if (same_scope) KeepLeavingCountersFindable(*previous, listed);
  BorrowFromList(*next);
  list_ = std::move(next);
  return report;
}

absl::flat_hash_set<std::string_view> BackendSet::ListEntries(
    const std::vector<ResolverEntry>& entries, const Config& config,
    Admit admit, const BackendList& previous, bool same_scope,
    BackendList& next, UpdateReport& report) {
  // Every lookup below is by string_view into `entries`, `config` or the
  // previous list, all alive until the update ends.
  const EndpointIndex endpoints(config);
  PreviousPositions positions(previous);
  // B2 first, for every entry: a backend keeps its own subchannel even when
  // an entry before it renames another backend of its address.
  std::vector<const EndpointConfig*> endpoint_of(entries.size());
  std::vector<std::string_view> identity_of(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    endpoint_of[i] = endpoints.For(entries[i]);
    identity_of[i] = IdentityOf(entries[i], endpoint_of[i]);
    positions.Promise(entries[i].address, identity_of[i]);
  }
  next.backends.reserve(entries.size());
  absl::flat_hash_set<std::string_view> addresses;
  absl::flat_hash_set<std::string_view> identities;
  addresses.reserve(entries.size());
  identities.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const ResolverEntry& entry = entries[i];
    const std::string_view identity = identity_of[i];
    // B3. One backend per identity.
    if (identities.contains(identity)) {
      ++report.duplicate_identities;
      continue;
    }
    const uint32_t weight =
        WeightOf(entry, endpoint_of[i], config.default_weight);  // B4
    const std::optional<size_t> successor =
        positions.Successor(entry.address, identity);
    if (!admit(Admission{i, successor})) {
      ++report.refused;
      continue;
    }
    if (successor.has_value()) positions.Take(*successor);
    // B1. Another identity of a listed address is a backend too.
    if (!addresses.insert(entry.address).second) ++report.shared_addresses;
    identities.insert(identity);
    const std::optional<size_t> kept =
        same_scope ? positions.OfIdentity(identity) : std::nullopt;
    std::shared_ptr<BackendCell> cell =
        kept.has_value() ? previous.backends[*kept].cell : NewCell(identity);
    // B5: the zone, by its index in the list's zones.
    uint32_t zone = kNoZone;
    if (const std::string_view name =
            ZoneOf(entry, endpoint_of[i], identity, config);
        !name.empty()) {
      zone = next.ZoneIndex(name);
      if (zone == kNoZone) {
        zone = static_cast<uint32_t>(next.zones.size());
        next.zones.emplace_back(name);
      }
    }
    // Borrowed from `entries` and `config` until BorrowFromList().
    next.backends.push_back(
        ListedBackend{entry.address, identity, weight, std::move(cell), zone});
  }
  return identities;
}

void BackendSet::KeepLeavingCountersFindable(
    const BackendList& previous,
    const absl::flat_hash_set<std::string_view>& listed) {
  for (const ListedBackend& b : previous.backends) {
    if (!listed.contains(b.identity)) {
      scope_->KeepFindableWhileInFlight(b.identity, SharedCounter(b.cell));
    }
  }
}

std::shared_ptr<BackendCell> BackendSet::NewCell(std::string_view identity) {
  std::shared_ptr<InFlightCounter> shared = scope_->SharedCounterFor(identity);
  if (shared != nullptr) {
    return std::make_shared<BackendCell>(std::move(shared));
  }
  return std::make_shared<BackendCell>(scope_);
}

void BackendSet::BorrowFromList(BackendList& list) {
  size_t bytes = 0;
  for (const ListedBackend& b : list.backends) {
    if (b.address != b.identity) bytes += b.address.size();
  }
  if (bytes != 0) list.address_bytes = std::make_unique<char[]>(bytes);
  char* at = list.address_bytes.get();
  for (size_t i = 0; i < list.backends.size(); ++i) {
    ListedBackend& b = list.backends[i];
    const std::string_view identity = list.table->identity(i);
    if (b.address == b.identity) {
      b.address = identity;
    } else {
      std::memcpy(at, b.address.data(), b.address.size());
      b.address = std::string_view(at, b.address.size());
      at += b.address.size();
    }
    b.identity = identity;
  }
}

}  // namespace poise::router
