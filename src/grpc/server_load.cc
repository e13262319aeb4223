#include "src/grpc/server_load.h"

#include <optional>
#include <string_view>
#include <utility>

#include "poise/load_reports.h"
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

std::optional<uint64_t> RefusalCount(const absl::Status& status) {
  if (status.code() != absl::StatusCode::kResourceExhausted) {
    return std::nullopt;
  }
  constexpr std::string_view kPrefix = kRefusalPrefix;
  constexpr size_t kMaxDigits = 18;  // below 2^63: no overflow
  std::string_view text(status.message().data(), status.message().size());
  if (text.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  text.remove_prefix(kPrefix.size());
  uint64_t count = 0;
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
    if (digits == kMaxDigits) return std::nullopt;
    count = count * 10 + static_cast<uint64_t>(text[digits] - '0');
    ++digits;
  }
  if (digits == 0 || (digits < text.size() && text[digits] != ' ')) {
    return std::nullopt;
  }
  return router::ReportedCount(static_cast<double>(count));
}

void TakeRefusal(uint64_t count, router::BackendCell& cell,
                 router::PolicyStats& stats) {
  const uint64_t own = cell.in_flight->Load();
  cell.fleet().report.Store(count, own > 0 ? own - 1 : 0, router::FleetNowNs());
  cell.counts.Get().refused.fetch_add(1, std::memory_order_relaxed);
  stats.admission_refusals.fetch_add(1, std::memory_order_relaxed);
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
