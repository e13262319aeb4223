#include "src/router/backend_set.h"

#include <cstring>
#include <string_view>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "poise/internal/identity_store.h"

namespace poise::router {

namespace {

std::shared_ptr<const BackendList> EmptyList(std::shared_ptr<LoadScope> scope) {
  auto list = std::make_shared<BackendList>();
  list->scope = std::move(scope);
  return list;
}

}  // namespace

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
  // Every lookup below is by string_view into `entries`, `config` or the
  // previous list, all alive until the end.
  absl::flat_hash_map<std::string_view, const EndpointConfig*> endpoints;
  endpoints.reserve(config.endpoints.size());
  for (const EndpointConfig& e : config.endpoints) {
    endpoints.emplace(e.address, &e);  // validated: unique
  }
  std::shared_ptr<const BackendList> previous = list_;
  absl::flat_hash_map<std::string_view, size_t> previous_index;
  // Cells carry over by identity, within one scope.
  absl::flat_hash_map<std::string_view, size_t> previous_cells;
  const bool same_scope = previous->scope == scope_;
  previous_index.reserve(previous->backends.size());
  if (same_scope) previous_cells.reserve(previous->backends.size());
  for (size_t i = 0; i < previous->backends.size(); ++i) {
    const ListedBackend& b = previous->backends[i];
    previous_index.emplace(b.address, i);
    if (same_scope) previous_cells.emplace(b.identity, i);
  }

  auto next = std::make_shared<BackendList>();
  next->scope = scope_;
  next->backends.reserve(entries.size());
  absl::flat_hash_set<std::string_view> addresses;
  absl::flat_hash_set<std::string_view> identities;
  addresses.reserve(entries.size());
  identities.reserve(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const ResolverEntry& entry = entries[i];
    // B1. The first occurrence of an address wins.
    if (addresses.contains(entry.address)) {
      ++report.duplicate_addresses;
      continue;
    }
    const auto endpoint_it = endpoints.find(entry.address);
    const EndpointConfig* endpoint =
        endpoint_it != endpoints.end() ? endpoint_it->second : nullptr;
    // B2. Identity.
    std::string_view identity = entry.address;
    if (endpoint != nullptr && endpoint->identity.has_value()) {
      identity = *endpoint->identity;
    } else if (entry.identity.has_value() && !entry.identity->empty()) {
      identity = *entry.identity;
    }
    // B3. One backend per identity.
    if (identities.contains(identity)) {
      ++report.duplicate_identities;
      continue;
    }
    // B4. Weight.
    uint32_t weight = config.default_weight;
    if (endpoint != nullptr && endpoint->weight.has_value()) {
      weight = *endpoint->weight;
    } else if (entry.weight.has_value() && *entry.weight > 0) {
      weight = *entry.weight;
    }
    Admission admission{i, std::nullopt};
    const auto was = previous_index.find(entry.address);
    if (was != previous_index.end()) admission.previous = was->second;
    if (!admit(admission)) {
      ++report.refused;
      continue;
    }
    addresses.insert(entry.address);
    identities.insert(identity);
    const auto kept = previous_cells.find(identity);
    std::shared_ptr<BackendCell> cell =
        kept != previous_cells.end() ? previous->backends[kept->second].cell
                                     : NewCell(identity);
    // Borrowed from `entries` and `config` until BorrowFromList() below.
    next->backends.push_back(
        ListedBackend{entry.address, identity, weight, std::move(cell)});
  }

  // The table: kept when the identities are the previous ones, in order.
  bool same = previous->table != nullptr &&
              previous->backends.size() == next->backends.size();
  for (size_t i = 0; same && i < next->backends.size(); ++i) {
    same = previous->backends[i].identity == next->backends[i].identity;
  }
  if (same) {
    next->table = previous->table;
  } else if (!next->backends.empty()) {
    std::vector<std::string_view> ids;
    ids.reserve(next->backends.size());
    for (const ListedBackend& b : next->backends) ids.emplace_back(b.identity);
    next->table = internal::IdentityStore::Global().Share(ids);
    report.table_rebuilt = true;
  }
  // Identities that leave with calls in flight stay findable by their scope.
  if (same_scope) {
    for (const ListedBackend& b : previous->backends) {
      if (!identities.contains(b.identity)) {
        scope_->KeepFindableWhileInFlight(b.identity, SharedCounter(b.cell));
      }
    }
  }
  BorrowFromList(*next);
  list_ = std::move(next);
  return report;
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
