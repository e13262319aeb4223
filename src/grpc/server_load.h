// serverLoad's gRPC side: the backends' ORCA reports (a call's trailer, an
// out-of-band stream) taken into the router's ReportSlot
// (src/router/fleet_load.h).
#ifndef POISE_SRC_GRPC_SERVER_LOAD_H_
#define POISE_SRC_GRPC_SERVER_LOAD_H_

// clang-format off
#include "src/grpc/require_undebug.h"
#include <grpc/support/port_platform.h>
// clang-format on

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "src/core/ext/filters/client_channel/lb_policy/backend_metric_data.h"
#include "src/core/lib/gprpp/time.h"
#include "src/core/lib/load_balancing/subchannel_interface.h"
#include "src/router/backend_set.h"
#include "src/router/stats_registry.h"

namespace poise::grpc_lb {

// Takes `data`'s utilization[metric] as the backend's calls in flight into
// `cell`'s report, with this client's own count on it now. A report without
// the metric changes nothing; a value no backend can report is refused
// (counted and traced; the backend keeps its previous report until that
// ages out).
void TakeLoadReport(const grpc_core::BackendMetricData& data,
                    const std::string& metric, router::BackendCell& cell,
                    router::PolicyStats& stats, const void* policy);

// serverLoad.admission: the backend's count in the status of a call it
// refused at the bound the call carried (poise::server's RESOURCE_EXHAUSTED
// "poise-refused count=N ..."); nullopt for any other status.
std::optional<uint64_t> RefusalCount(const absl::Status& status);

// Takes a refusal's count as the backend's report (the refused call, still
// counted by this client, was not counted by the backend) and counts the
// refusal for the backend and the channel.
void TakeRefusal(uint64_t count, router::BackendCell& cell,
                 router::PolicyStats& stats);

// Where one subchannel's out-of-band reports go: the cell of the backend it
// serves now, which the policy sets (and clears when serverLoad is off) from
// its work serializer while reports arrive on other threads.
class OobReportSink final {
 public:
  OobReportSink(std::shared_ptr<router::PolicyStats> stats, const void* policy)
      : stats_(std::move(stats)), policy_(policy) {}

  void Set(std::shared_ptr<router::BackendCell> cell, std::string metric) {
    std::lock_guard<std::mutex> lock(mu_);
    cell_ = std::move(cell);
    metric_ = std::move(metric);
  }
  void Take(const grpc_core::BackendMetricData& data);

 private:
  const std::shared_ptr<router::PolicyStats> stats_;
  const void* const policy_;
  std::mutex mu_;
  std::shared_ptr<router::BackendCell> cell_;  // null: ignore reports
  std::string metric_;
};

// A data watcher for SubchannelInterface::AddDataWatcher that asks the
// backend for a report every `interval` (StreamCoreMetrics) and hands each
// to `sink`. gRPC 1.51 cannot remove it: it lives as long as the subchannel.
std::unique_ptr<grpc_core::SubchannelInterface::DataWatcherInterface>
MakeOobLoadReportWatcher(grpc_core::Duration interval,
                         std::shared_ptr<OobReportSink> sink);

}  // namespace poise::grpc_lb

#endif  // POISE_SRC_GRPC_SERVER_LOAD_H_
