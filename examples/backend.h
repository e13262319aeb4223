// An in-process echo backend for the examples, the demo and end-to-end tests.
//
//   poise::example::BackendSet set;
//   set.Start(3, "x-session-id");          // three backends on 127.0.0.1:0
//   std::string target = set.target();     //
//   "ipv4:127.0.0.1:p1,127.0.0.1:p2,..." set.backend(1).Stop();
//   set.backend(1).Restart();              // same port; clients reconnect
//
// A backend replies with its id, counts its calls, records the distinct values
// of one request header (the request key), and tracks its peak number of
// concurrent calls. It reports its calls in flight to clients through ORCA
// (poise::EnableLoadReports, include/poise/load_reports.h). Every method is
// thread-safe.
#ifndef POISE_EXAMPLES_BACKEND_H_
#define POISE_EXAMPLES_BACKEND_H_

#include <grpcpp/security/server_credentials.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace poise {
class LoadReports;
}  // namespace poise

namespace poise::example {

class Backend {
 public:
  // `key_header` names the request header whose distinct values are recorded
  // (lower case, as gRPC metadata keys are); empty records nothing.
  explicit Backend(std::string id, std::string key_header = "");
  ~Backend();  // Stops.
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // Listens on 127.0.0.1:`port`; port 0 lets the kernel choose. The chosen
  // port is kept for Restart(). Fails when already running or on bind errors.
  absl::Status Start(int port = 0);
  // Listens on ip:port instead, ip a loopback address such as "127.0.0.3"
  // (a pod that comes back with a new IP). Restart() reuses both.
  absl::Status StartOn(const std::string& ip, int port = 0);
  // Shuts the server down gracefully: calls still running may finish within
  // a 200 ms grace and are cancelled after it. Idempotent.
  void Stop();
  // Starts again on the port of the last successful Start().
  absl::Status Restart();

  const std::string& id() const { return id_; }
  bool running() const;
  int port() const;             // 0 before the first Start()
  std::string address() const;  // "ip:port" (ip "127.0.0.1" by default)
  std::string ip() const;

  // Fault injection for tests: every call fails with UNAVAILABLE, and/or
  // every call sleeps at least `stall_ms` (plus the request's delay_ms).
  void set_fail(bool fail) { fail_.store(fail); }
  void set_stall_ms(uint32_t stall_ms) { stall_ms_.store(stall_ms); }
  // The credentials of the next Start (default: insecure), e.g.
  // grpc::SslServerCredentials for a TLS backend.
  void set_credentials(std::shared_ptr<grpc::ServerCredentials> credentials);
  // Its health (grpc.health.v1, every service name) while running: a client
  // with healthCheckConfig stops sending it calls while NOT_SERVING.
  void set_serving(bool serving);

  uint64_t calls() const { return calls_.load(); }  // calls received
  int64_t in_flight() const { return in_flight_.load(); }
  int64_t peak_in_flight() const { return peak_in_flight_.load(); }
  std::set<std::string> keys_seen() const;
  size_t distinct_keys() const;
  // Zeroes calls, the peak (to the current in-flight count) and the key set.
  void ResetCounters();

 private:
  class Service;
  friend class Service;

  // Called by the service around each call.
  void CallStarted(const std::string* key);
  void CallFinished();

  const std::string id_;
  const std::string key_header_;

  std::mutex life_mu_;  // serialises Start/Stop; guards service_, server_,
                        // load_reports_
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;  // null: insecure
  std::shared_ptr<LoadReports> load_reports_;
  std::atomic<int> port_{0};
  mutable std::mutex ip_mu_;  // guards ip_
  std::string ip_ = "127.0.0.1";
  std::atomic<bool> running_{false};
  // Stop() was called: running calls may finish until grace_end_ (a
  // steady_clock count), then end with UNAVAILABLE "backend stopping".
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> grace_end_{0};

  mutable std::mutex keys_mu_;
  std::set<std::string> keys_;

  std::atomic<bool> fail_{false};
  std::atomic<uint32_t> stall_ms_{0};
  std::atomic<uint64_t> calls_{0};
  std::atomic<int64_t> in_flight_{0};
  std::atomic<int64_t> peak_in_flight_{0};
};

// N backends with ids "b0".."b{N-1}" (or the given ids).
class BackendSet {
 public:
  BackendSet() = default;
  ~BackendSet();
  BackendSet(const BackendSet&) = delete;
  BackendSet& operator=(const BackendSet&) = delete;

  absl::Status Start(size_t n, const std::string& key_header = "");
  absl::Status Start(const std::vector<std::string>& ids,
                     const std::string& key_header = "");
  void StopAll();

  size_t size() const { return backends_.size(); }
  Backend& backend(size_t i) { return *backends_[i]; }
  const Backend& backend(size_t i) const { return *backends_[i]; }
  // Index of the backend with this id, or -1.
  int IndexOf(const std::string& id) const;
  // "ipv4:127.0.0.1:p1,127.0.0.1:p2,..." in backend order.
  std::string target() const;
  void ResetCounters();

 private:
  std::vector<std::unique_ptr<Backend>> backends_;
};

}  // namespace poise::example

#endif  // POISE_EXAMPLES_BACKEND_H_
