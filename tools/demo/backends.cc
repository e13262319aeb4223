#include "backends.h"

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "workload.h"

namespace poise_demo {

absl::Status StartBackends(size_t count, BackendSet* set) {
  return set->Start(count, kHashHeader);
}

int FindBackend(const BackendSet& set, const std::string& identity,
                const std::string& address) {
  int index = set.IndexOf(identity);
  for (size_t i = 0; index < 0 && i < set.size(); ++i) {
    const std::string own = set.backend(i).address();
    if (address == own || absl::EndsWith(address, absl::StrCat(":", own))) {
      index = static_cast<int>(i);
    }
  }
  return index;
}

ServerCounters ReadServerCounters(const BackendSet& set) {
  ServerCounters out;
  for (size_t i = 0; i < set.size(); ++i) {
    out.calls.push_back(set.backend(i).calls());
    out.peaks.push_back(static_cast<uint64_t>(set.backend(i).peak_in_flight()));
  }
  return out;
}

void RestartBackend(size_t index, BackendSet* set) {
  if (absl::Status st = set->backend(index).Restart(); !st.ok()) {
    std::fprintf(stderr, "poise-demo: restarting %s: %s\n",
                 set->backend(index).id().c_str(), st.ToString().c_str());
  }
}

}  // namespace poise_demo
