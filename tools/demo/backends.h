// The demo's local echo backends (examples/backend.h): starting them,
// matching the library's statistics to them, reading their own counters and
// bringing a stopped one back.
#ifndef POISE_TOOLS_DEMO_BACKENDS_H_
#define POISE_TOOLS_DEMO_BACKENDS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "backend.h"

namespace poise_demo {

using poise::example::BackendSet;

// `count` backends on 127.0.0.1 that record the request key.
absl::Status StartBackends(size_t count, BackendSet* set);

// The backend a statistics entry names: by identity, else by address (the
// entry's may carry a scheme prefix). -1 when it is none of the set.
int FindBackend(const BackendSet& set, const std::string& identity,
                const std::string& address);

// What the backends counted themselves, indexed like the set.
struct ServerCounters {
  std::vector<uint64_t> calls;
  std::vector<uint64_t> peaks;  // peak calls in flight
};
ServerCounters ReadServerCounters(const BackendSet& set);

// Restarts a stopped backend on its port; a failure is reported on stderr
// and the demo goes on without it.
void RestartBackend(size_t index, BackendSet* set);

}  // namespace poise_demo

#endif  // POISE_TOOLS_DEMO_BACKENDS_H_
