#include "identity_store.h"

#include <utility>

#include "identity_table_access.h"

namespace poise::internal {

// One table's rows in its order: what the table keeps alive (its identity
// views point into the rows). The table and its copies own it; the last one
// gone releases the rows.
struct IdentityStore::Hold {
  std::vector<IdentityRow*> rows;
};

struct IdentityStore::HoldDeleter {
  IdentityStore* store;
  void operator()(const Hold* hold) const { store->Release(hold); }
};

namespace {

// The store whose mutex this thread holds, if any: a Hold released while
// Share() unwinds must not lock it again.
thread_local const IdentityStore* t_locked_store = nullptr;

class StoreLock {
 public:
  StoreLock(std::mutex& mu, const IdentityStore* store)
      : lock_(mu), previous_(t_locked_store) {
    t_locked_store = store;
  }
  ~StoreLock() { t_locked_store = previous_; }
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;

 private:
  std::lock_guard<std::mutex> lock_;
  const IdentityStore* previous_;
};

}  // namespace

// Rows are unique per identity while alive, so the sequence of row
// addresses identifies the identity sequence.
size_t IdentityStore::SequenceHash::operator()(
    const std::vector<IdentityRow*>& rows) const {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const IdentityRow* row : rows) {
    h = Mix64(h ^ static_cast<uint64_t>(reinterpret_cast<uintptr_t>(row)));
  }
  return static_cast<size_t>(h);
}

IdentityStore& IdentityStore::Global() {
  static auto* const store = new IdentityStore();
  return *store;
}

std::shared_ptr<const IdentityTable> IdentityStore::Share(
    const std::vector<std::string_view>& identities) {
  if (identities.empty()) return std::make_shared<const IdentityTable>();
  StoreLock lock(mu_, this);
  std::vector<IdentityRow*> rows;
  rows.reserve(identities.size());
  for (const std::string_view identity : identities) {
    auto it = rows_.find(identity);
    if (it == rows_.end()) {
      auto row = std::make_unique<IdentityRow>();
      row->identity = std::string(identity);
      HashIdentityRow(row->identity, row.get());
      ++totals_.identities_hashed;
      it = rows_.emplace(row->identity, row.get()).first;
      // Owned by rows_ until its last table goes.
      static_cast<void>(row.release());
    }
    rows.push_back(it->second);
  }
  // An expired entry's last holder is going, and its release waits for the
  // mutex; a new table takes its place.
  bool built = false;
  std::shared_ptr<const IdentityTable> table =
      tables_.FindOrMake(rows, [&]() -> std::shared_ptr<const IdentityTable> {
        built = true;
        auto hold = std::make_unique<Hold>(Hold{rows});
        // Counted before anything else can throw, so that a Hold released
        // while this unwinds gives back exactly what it took.
        for (IdentityRow* row : rows) ++row->users;
        ++tables_alive_;
        const std::shared_ptr<const Hold> keep(hold.release(),
                                               HoldDeleter{this});
        const Hold& held = *keep;
        return IdentityTableAccess::FromRows(held.rows.data(), held.rows.size(),
                                             keep);
      });
  if (built) {
    ++totals_.tables_built;
    totals_.table_bytes_written += table->memory_bytes();
  } else {
    ++totals_.tables_shared;
  }
  return table;
}

void IdentityStore::Release(const Hold* hold) {
  if (t_locked_store == this) {
    ReleaseLocked(hold);
    return;
  }
  StoreLock lock(mu_, this);
  ReleaseLocked(hold);
}

void IdentityStore::ReleaseLocked(const Hold* hold) {
  --tables_alive_;
  for (IdentityRow* row : hold->rows) {
    if (--row->users == 0) {
      rows_.erase(row->identity);
      delete row;
    }
  }
  delete hold;
}

IdentityStoreCounts IdentityStore::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  IdentityStoreCounts counts = totals_;
  counts.rows = rows_.size();
  counts.tables = tables_alive_;
  return counts;
}

}  // namespace poise::internal
