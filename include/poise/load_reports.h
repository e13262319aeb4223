// poise::server — a gRPC C++ server reports its calls in flight to clients
// through ORCA (Open Request Cost Aggregation), in one line:
//
//   grpc::ServerBuilder builder;
//   builder.AddListeningPort(...);
//   builder.RegisterService(&my_service);
//   poise::EnableLoadReports(builder);         // before BuildAndStart()
//   std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
//
// What is reported: the number of the server's calls in flight, every RPC
// from when it starts until its status is sent, as the ORCA named
// utilization "rif" (OrcaLoadReport.utilization["rif"]). The value is a
// COUNT (0, 1, 2, ...), not a fraction in [0, 1] as ORCA's utilizations
// usually are. It is reported two ways:
//
//  - per call: every response's trailing metadata carries
//    "endpoint-load-metrics-bin", a serialized xds.data.orca.v3.OrcaLoadReport
//    with the count taken when that call ends (the ending call counted). If a
//    handler already set that trailer, the entry is appended to its report
//    (protobuf merging: the map gains the entry). gRPC's C++ client (1.51)
//    hands this trailer to the channel's LB policy, not to
//    ClientContext::GetServerTrailingMetadata().
//  - out of band: the ORCA service
//    /xds.service.orca.v3.OpenRcaService/StreamCoreMetrics sends the current
//    count every interval the client asks for, and never more often than
//    LoadReportOptions::min_report_interval (10 ms by default).
//
// The ORCA stream itself is not counted as a call in flight, nor by default
// gRPC's health-checking Watch stream (LoadReportOptions::uncounted_methods).
//
// Sync and callback servers (tested; async ones run the same server
// interceptors): the counting is a server interceptor.
// ServerBuilder::experimental().SetInterceptorCreators REPLACES the builder's
// interceptors, so:
//  - interceptors of your own go through EnableLoadReports (the overload
//    below that takes them): they run after the load reports' interceptor;
//  - interceptors set before EnableLoadReports are dropped by it;
//  - if SetInterceptorCreators (or a second EnableLoadReports) replaces the
//    load reports' interceptor afterwards, BuildAndStart() logs why and
//    returns nullptr rather than start a server reporting a wrong count.
//
// Admission (LoadReportOptions::admission, off by default): a call whose
// request header kBoundHeader carries the client's bound N for this server
// (serverLoad.admission on the client) is refused when the server already
// serves N or more counted calls. The check and the count's increment are
// one compare-exchange, so two calls never both take the last room. A
// refused call is not counted; it ends at once with RESOURCE_EXHAUSTED and
// the message kRefusalPrefix + the server's count ("poise-refused count=7
// bound=6"), which the client's policy reads as a load report. gRPC 1.51's
// server interceptors cannot skip the handler: it still runs, on a call
// already ended (its reply and status are dropped), so a handler with
// costly work should return at once when CallRefused(*context) says so
// (IsCancelled() may not be true yet on a callback server). Without the header
// a call is admitted as without admission; a value other than 1 to 18 decimal
// digits (or sent twice) is ignored and counted in bounds_unparsed().
//
// Shutting down: grpc::Server::Shutdown() without a deadline waits for every
// call to end, and a client's ORCA stream does not end by itself. Call
// LoadReports::EndStreams() first, or Shutdown(deadline).
// docs/server-load-reports.md says what else Shutdown() can wait for.
#ifndef POISE_LOAD_REPORTS_H_
#define POISE_LOAD_REPORTS_H_

#include <grpcpp/server_builder.h>
#include <grpcpp/support/server_interceptor.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace poise {

struct LoadReportOptions {
  // The key in OrcaLoadReport.utilization: 1 to 64 printable ASCII
  // characters without spaces, the rule of the client's serverLoad.metric
  // (EnableLoadReports refuses any other name).
  std::string metric_name = "rif";
  // The out-of-band stream's shortest interval: a client asking for less
  // gets this one. More than 0 (gRPC's own OrcaService defaults to 30 s).
  std::chrono::nanoseconds min_report_interval = std::chrono::milliseconds(10);
  // Per-call reports in the trailing metadata.
  bool per_call = true;
  // The out-of-band ORCA service. At least one of the two.
  bool out_of_band = true;
  // Full method names ("/package.Service/Method") whose calls are not
  // counted (nor given a per-call report): streams that last as long as a
  // client's channel. The ORCA stream itself is never counted.
  std::vector<std::string> uncounted_methods = {"/grpc.health.v1.Health/Watch"};
  // Refuses a call over the bound its client sent (see above).
  bool admission = false;
};

namespace load_reports_internal {
struct State;
struct Access;
}  // namespace load_reports_internal

// The load reports of one server, made by EnableLoadReports. Shared: it
// stays valid after the server is gone (the count is then 0).
class LoadReports {
 public:
  // The server's calls in flight now (what the next report would say).
  int64_t calls_in_flight() const;

  // Admission: the calls refused over their bound, and the calls whose
  // bound header could not be read (admitted), since the server started.
  int64_t calls_refused() const;
  int64_t bounds_unparsed() const;

  // Ends every open out-of-band stream now with status UNAVAILABLE, and
  // from now on answers new ones the same way. Per-call reports go on. For
  // a server about to shut down without a deadline: no ORCA stream holds
  // Shutdown() then. A stream whose report is being written is cancelled
  // with that status rather than waited for: the write never completes
  // while the client gives no flow-control window or does not read.
  void EndStreams();

  const LoadReportOptions& options() const;

 private:
  friend struct load_reports_internal::Access;
  explicit LoadReports(std::shared_ptr<load_reports_internal::State> state);

  std::shared_ptr<load_reports_internal::State> state_;
};

// Enables the load reports with the default options, which cannot fail.
// Call it before builder.BuildAndStart(); once per builder.
std::shared_ptr<LoadReports> EnableLoadReports(grpc::ServerBuilder& builder);

// The same with options, and with the server's own interceptors (see above:
// they run after the load reports' interceptor). INVALID_ARGUMENT for
// invalid options, and the builder is then left as it was.
absl::StatusOr<std::shared_ptr<LoadReports>> EnableLoadReports(
    grpc::ServerBuilder& builder, LoadReportOptions options,
    std::vector<
        std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
        own_interceptors = {});

// Admission: whether the call of `context` was refused (its handler runs
// anyway and should return at once). With admission on, a client cannot
// fake it.
bool CallRefused(const grpc::ServerContextBase& context);

// The ORCA trailer's key and the out-of-band method, for tests and tools.
inline constexpr char kLoadReportTrailer[] = "endpoint-load-metrics-bin";
// Admission: the request header with the client's bound, and how a refused
// call's status message begins (the server's count follows).
inline constexpr char kBoundHeader[] = "poise-bound";
inline constexpr char kRefusalPrefix[] = "poise-refused count=";
inline constexpr char kOrcaStreamMethod[] =
    "/xds.service.orca.v3.OpenRcaService/StreamCoreMetrics";

}  // namespace poise

#endif  // POISE_LOAD_REPORTS_H_
