#include "src/grpc/server_load.h"

#include <optional>
#include <utility>

#include "src/core/ext/filters/client_channel/lb_policy/oob_backend_metric.h"
#include "src/grpc/rendezvous_trace.h"
#include "src/router/fleet_load.h"

namespace poise::grpc_lb {

void TakeLoadReport(const grpc_core::BackendMetricData& data,
                    const std::string& metric, router::BackendCell& cell,
                    router::PolicyStats& stats, const void* policy) {
  const auto it = data.utilization.find(metric);
  if (it == data.utilization.end()) {
    POISE_TRACE(
        "[poise %p] a load report without utilization \"%s\": the backend "
        "counts only this client's calls once its last report ages out",
        policy, metric.c_str());
    return;
  }
  const std::optional<uint64_t> count = router::ReportedCount(it->second);
  if (!count.has_value()) {
    stats.refused_load_reports.fetch_add(1, std::memory_order_relaxed);
    POISE_TRACE(
        "[poise %p] refused a load report: %s = %g is not a count of calls "
        "(the backend counts only this client's calls once its last good "
        "report ages out)",
        policy, metric.c_str(), it->second);
    return;
  }
  cell.fleet().report.Store(*count, cell.in_flight->Load(),
                            router::FleetNowNs());
  stats.load_reports.fetch_add(1, std::memory_order_relaxed);
}

void OobReportSink::Take(const grpc_core::BackendMetricData& data) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cell_ != nullptr) TakeLoadReport(data, metric_, *cell_, *stats_, policy_);
}

namespace {

class OobWatcher final : public grpc_core::OobBackendMetricWatcher {
 public:
  explicit OobWatcher(std::shared_ptr<OobReportSink> sink)
      : sink_(std::move(sink)) {}
  void OnBackendMetricReport(
      const grpc_core::BackendMetricData& data) override {
    sink_->Take(data);
  }

 private:
  const std::shared_ptr<OobReportSink> sink_;
};

}  // namespace

std::unique_ptr<grpc_core::SubchannelInterface::DataWatcherInterface>
MakeOobLoadReportWatcher(grpc_core::Duration interval,
                         std::shared_ptr<OobReportSink> sink) {
  return grpc_core::MakeOobBackendMetricWatcher(
      interval, std::make_unique<OobWatcher>(std::move(sink)));
}

}  // namespace poise::grpc_lb
