#include "backend.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "echo.grpc.pb.h"
#include "poise/load_reports.h"

namespace poise::example {

namespace {
constexpr auto kShutdownGrace = std::chrono::milliseconds(200);
constexpr auto kSleepSlice = std::chrono::milliseconds(1);
}  // namespace

class Backend::Service final : public Echo::Service {
 public:
  explicit Service(Backend* backend) : backend_(backend) {}

  grpc::Status Echo(grpc::ServerContext* context, const EchoRequest* request,
                    EchoReply* reply) override {
    const std::string* key = nullptr;
    std::string key_value;
    if (!backend_->key_header_.empty()) {
      const auto& metadata = context->client_metadata();
      auto it = metadata.find(backend_->key_header_);
      if (it != metadata.end()) {
        key_value.assign(it->second.data(), it->second.size());
        key = &key_value;
      }
    }
    backend_->CallStarted(key);
    grpc::Status status = Serve(context, *request, reply);
    backend_->CallFinished();
    return status;
  }

 private:
  grpc::Status Serve(grpc::ServerContext* context, const EchoRequest& request,
                     EchoReply* reply) {
    const auto sleep_for = std::chrono::milliseconds(
        uint64_t{request.delay_ms()} + backend_->stall_ms_.load());
    if (sleep_for.count() > 0) {
      // Sleep in slices so cancellation and Stop() end the call promptly.
      const auto until = std::chrono::steady_clock::now() + sleep_for;
      for (;;) {
        if (context->IsCancelled()) {
          return {grpc::StatusCode::CANCELLED, "cancelled"};
        }
        const auto now = std::chrono::steady_clock::now();
        // A graceful stop lets running calls finish within the grace; past
        // it they end (gRPC cancels them too).
        if (backend_->stopping_.load() &&
            now.time_since_epoch().count() >= backend_->grace_end_.load()) {
          return {grpc::StatusCode::UNAVAILABLE, "backend stopping"};
        }
        if (now >= until) break;
        std::this_thread::sleep_for(
            std::min<std::chrono::steady_clock::duration>(kSleepSlice,
                                                          until - now));
      }
    }
    if (request.fail() || backend_->fail_.load()) {
      return {grpc::StatusCode::UNAVAILABLE,
              absl::StrCat("backend ", backend_->id_, " fails on purpose")};
    }
    reply->set_backend_id(backend_->id_);
    reply->set_payload(request.payload());
    return grpc::Status::OK;
  }

  Backend* const backend_;
};

Backend::Backend(std::string id, std::string key_header)
    : id_(std::move(id)), key_header_(std::move(key_header)) {}

Backend::~Backend() { Stop(); }

absl::Status Backend::Start(int port) { return StartOn("127.0.0.1", port); }

absl::Status Backend::StartOn(const std::string& ip, int port) {
  std::lock_guard<std::mutex> lock(life_mu_);
  if (server_ != nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("backend ", id_, " is already running"));
  }
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad port ", port));
  }
  auto service = std::make_unique<Service>(this);
  int bound_port = 0;
  // grpc.health.v1.Health, for clients with healthCheckConfig (set_serving).
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat(ip, ":", port),
                           credentials_ != nullptr
                               ? credentials_
                               : grpc::InsecureServerCredentials(),
                           &bound_port);
  builder.RegisterService(service.get());
  // The server reports its calls in flight through ORCA (utilization "rif",
  // per call and out of band): one line, before BuildAndStart().
  std::shared_ptr<LoadReports> load_reports = EnableLoadReports(builder);
  stopping_.store(false);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound_port == 0) {
    if (server != nullptr) server->Shutdown();
    return absl::UnavailableError(
        absl::StrCat("backend ", id_, " could not listen on ", ip, ":", port));
  }
  service_ = std::move(service);
  server_ = std::move(server);
  load_reports_ = std::move(load_reports);
  port_.store(bound_port);
  {
    std::lock_guard<std::mutex> ip_lock(ip_mu_);
    ip_ = ip;
  }
  running_.store(true);
  return absl::OkStatus();
}

void Backend::set_credentials(
    std::shared_ptr<grpc::ServerCredentials> credentials) {
  std::lock_guard<std::mutex> lock(life_mu_);
  credentials_ = std::move(credentials);
}

void Backend::set_serving(bool serving) {
  std::lock_guard<std::mutex> lock(life_mu_);
  if (server_ == nullptr) return;
  server_->GetHealthCheckService()->SetServingStatus(serving);
}

void Backend::Stop() {
  std::lock_guard<std::mutex> lock(life_mu_);
  if (server_ == nullptr) return;
  running_.store(false);
  grace_end_.store((std::chrono::steady_clock::now() + kShutdownGrace)
                       .time_since_epoch()
                       .count());
  stopping_.store(true);
  // Clients' ORCA streams end now rather than at the end of the grace.
  if (load_reports_ != nullptr) load_reports_->EndStreams();
  server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
  server_->Wait();
  server_.reset();
  service_.reset();
  load_reports_.reset();
}

absl::Status Backend::Restart() {
  const int port = port_.load();
  if (port == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("backend ", id_, " was never started"));
  }
  return StartOn(ip(), port);
}

bool Backend::running() const { return running_.load(); }

int Backend::port() const { return port_.load(); }

std::string Backend::ip() const {
  std::lock_guard<std::mutex> lock(ip_mu_);
  return ip_;
}

std::string Backend::address() const {
  return absl::StrCat(ip(), ":", port_.load());
}

std::set<std::string> Backend::keys_seen() const {
  std::lock_guard<std::mutex> lock(keys_mu_);
  return keys_;
}

size_t Backend::distinct_keys() const {
  std::lock_guard<std::mutex> lock(keys_mu_);
  return keys_.size();
}

void Backend::ResetCounters() {
  {
    std::lock_guard<std::mutex> lock(keys_mu_);
    keys_.clear();
  }
  calls_.store(0);
  peak_in_flight_.store(in_flight_.load());
}

void Backend::CallStarted(const std::string* key) {
  calls_.fetch_add(1);
  const int64_t now = in_flight_.fetch_add(1) + 1;
  int64_t peak = peak_in_flight_.load();
  while (now > peak && !peak_in_flight_.compare_exchange_weak(peak, now)) {
  }
  if (key != nullptr) {
    std::lock_guard<std::mutex> lock(keys_mu_);
    keys_.insert(*key);
  }
}

void Backend::CallFinished() { in_flight_.fetch_sub(1); }

BackendSet::~BackendSet() { StopAll(); }

absl::Status BackendSet::Start(size_t n, const std::string& key_header) {
  std::vector<std::string> ids;
  ids.reserve(n);
  for (size_t i = 0; i < n; ++i) ids.push_back(absl::StrCat("b", i));
  return Start(ids, key_header);
}

absl::Status BackendSet::Start(const std::vector<std::string>& ids,
                               const std::string& key_header) {
  if (!backends_.empty()) {
    return absl::FailedPreconditionError("backend set already started");
  }
  for (const std::string& id : ids) {
    backends_.push_back(std::make_unique<Backend>(id, key_header));
    absl::Status status = backends_.back()->Start();
    if (!status.ok()) {
      StopAll();
      backends_.clear();
      return status;
    }
  }
  return absl::OkStatus();
}

void BackendSet::StopAll() {
  for (auto& backend : backends_) backend->Stop();
}

int BackendSet::IndexOf(const std::string& id) const {
  for (size_t i = 0; i < backends_.size(); ++i) {
    if (backends_[i]->id() == id) return static_cast<int>(i);
  }
  return -1;
}

std::string BackendSet::target() const {
  std::string target = "ipv4:";
  for (size_t i = 0; i < backends_.size(); ++i) {
    if (i > 0) target += ",";
    target += backends_[i]->address();
  }
  return target;
}

void BackendSet::ResetCounters() {
  for (auto& backend : backends_) backend->ResetCounters();
}

}  // namespace poise::example
