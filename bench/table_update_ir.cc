// poise_table_update_ir: what an address update costs next to a full table
// build, counted in instructions (run it under callgrind; bench/run.sh does).
//
// n identities "10.1.<i / 250>.<i % 250>:8443" are shared through an
// internal::IdentityStore (a channel holding the list). Then, with
// callgrind's instrumentation on only around each, and a dump after each:
//   1. "full-build": IdentityTable over the n identities, hashed afresh;
//   2. "update": Share() of the same list with identity n / 2 replaced by
//      one the store has not seen (what an update that changes 1 of n
//      addresses does: hash that one, build the table from the rows);
//   3. "same-list": Share() of the live list again (a second channel).
// Each is repeated `reps` times inside its window; the script divides.
// Without valgrind the toggles do nothing and it only prints the store's
// counts. Valgrind does not run AVX-512, so the counts are those of the
// best target below it (AVX2 on the development machines;
// docs/performance.md).
#include <valgrind/callgrind.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "poise/identity_table.h"
#include "src/core/identity_store.h"

namespace {

std::string Identity(size_t i) {
  return "10.1." + std::to_string(i / 250) + "." + std::to_string(i % 250) +
         ":8443";
}

}  // namespace

int main(int argc, char** argv) {
  const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000;
  const size_t reps = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 5;
  std::vector<std::string> ids;
  ids.reserve(n);
  for (size_t i = 0; i < n; ++i) ids.push_back(Identity(i));
  const auto views = [&] {
    return std::vector<std::string_view>(ids.begin(), ids.end());
  };
  poise::internal::IdentityStore store;
  const auto live = store.Share(views());
  const std::vector<std::string_view> list = views();

  size_t sink = 0;
  CALLGRIND_START_INSTRUMENTATION;
  for (size_t r = 0; r < reps; ++r) {
    const poise::IdentityTable table(list);
    sink += table.size();
  }
  CALLGRIND_STOP_INSTRUMENTATION;
  CALLGRIND_DUMP_STATS_AT("full-build");

  std::vector<std::vector<std::string>> moved(reps, ids);
  for (size_t r = 0; r < reps; ++r) {
    moved[r][n / 2] = "moved-" + std::to_string(r);
  }
  std::vector<std::vector<std::string_view>> moved_views;
  moved_views.reserve(reps);
  for (const auto& m : moved) {
    moved_views.emplace_back(m.begin(), m.end());
  }
  CALLGRIND_START_INSTRUMENTATION;
  for (size_t r = 0; r < reps; ++r) sink += store.Share(moved_views[r])->size();
  CALLGRIND_STOP_INSTRUMENTATION;
  CALLGRIND_DUMP_STATS_AT("update");

  CALLGRIND_START_INSTRUMENTATION;
  for (size_t r = 0; r < reps; ++r) sink += store.Share(list)->size();
  CALLGRIND_STOP_INSTRUMENTATION;
  CALLGRIND_DUMP_STATS_AT("same-list");

  const poise::internal::IdentityStoreCounts c = store.counts();
  std::printf(
      "n=%zu reps=%zu identities_hashed=%llu tables_built=%llu "
      "tables_shared=%llu (%zu)\n",
      n, reps, static_cast<unsigned long long>(c.identities_hashed),
      static_cast<unsigned long long>(c.tables_built),
      static_cast<unsigned long long>(c.tables_shared), sink);
  return 0;
}
