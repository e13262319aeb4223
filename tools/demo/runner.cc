#include "runner.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "analysis.h"

namespace poise_demo {
namespace {

// One call of the workload: keyed by `key`, answered after `delay_ms`.
grpc::Status Call(poise::example::Echo::Stub* stub, const std::string& key,
                  const std::string& payload, uint32_t delay_ms,
                  poise::example::EchoReply* reply) {
  grpc::ClientContext context;
  context.AddMetadata(kHashHeader, key);
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  poise::example::EchoRequest request;
  request.set_payload(payload);
  request.set_delay_ms(delay_ms);
  return stub->Echo(&context, request, reply);
}

Clock::duration Seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(s));
}

// Progress() writes one line, rewritten in place: only for a terminal.
bool StderrIsTerminal() {
  static const bool kTerminal = isatty(STDERR_FILENO) != 0;
  return kTerminal;
}

}  // namespace

Runner::Runner(const Options& opt, BackendSet* set,
               const std::vector<uint32_t>* sequence)
    : opt_(opt), set_(set), sequence_(sequence) {
  for (size_t k = 0; k <= opt.keys; ++k) {
    key_names_.push_back(KeyName(k, opt.keys));
  }
}

void Runner::Worker(poise::example::Echo::Stub* stub, RunLog* log) {
  const size_t nb = set_->size();
  while (!done_.load()) {
    const int phase = phase_.load();
    in_flight_[phase].fetch_add(1);
    const uint64_t i = next_.fetch_add(1);
    const uint32_t key = (*sequence_)[i % sequence_->size()];
    poise::example::EchoReply reply;
    const grpc::Status status =
        Call(stub, key_names_[key], key_names_[key], opt_.delay_ms, &reply);
    in_flight_[phase].fetch_sub(1);
    PhaseLog& p = log->phase[phase];
    ++p.sent;
    sent_.fetch_add(1);
    const int backend = status.ok() ? set_->IndexOf(reply.backend_id()) : -1;
    if (backend >= 0) {
      ++p.ok;
      ++p.calls[key * nb + static_cast<size_t>(backend)];
    } else {
      ++p.failed;
      failed_.fetch_add(1);
      const int code = status.ok() ? -1 : static_cast<int>(status.error_code());
      ++p.failures[code];
      p.messages.emplace(code, status.ok() ? "reply from an unknown backend"
                                           : status.error_message());
    }
  }
}

void Runner::Progress(Policy policy, double elapsed, double total) {
  if (!StderrIsTerminal()) return;
  std::fprintf(stderr,
               "\r  %-24s %-10s %5.1f/%.1f s  %8" PRIu64 " calls  %5" PRIu64
               " failed ",
               PolicyName(policy), PhaseName(phase_.load()), elapsed, total,
               sent_.load(), failed_.load());
  std::fflush(stderr);
}

void Runner::Sleep(Policy policy, double seconds, double* elapsed,
                   double total) {
  const auto end = Clock::now() + Seconds(seconds);
  for (;;) {
    const auto now = Clock::now();
    if (now >= end) break;
    const auto step =
        std::min<Clock::duration>(end - now, std::chrono::milliseconds(200));
    std::this_thread::sleep_for(step);
    *elapsed += std::chrono::duration<double>(step).count();
    Progress(policy, *elapsed, total);
  }
}

std::vector<std::thread> Runner::StartWorkers(poise::example::Echo::Stub* stub,
                                              std::vector<RunLog>* logs) {
  phase_.store(kWarmup);
  done_.store(false);
  next_.store(0);
  sent_.store(0);
  failed_.store(0);
  for (auto& log : *logs) log.Init((opt_.keys + 1) * set_->size());
  std::vector<std::thread> workers;
  for (RunLog& log : *logs) {
    workers.emplace_back(&Runner::Worker, this, stub, &log);
  }
  return workers;
}

Runner::MainPhase Runner::Measure(Policy policy, const std::string& label,
                                  bool with_stop, double* elapsed,
                                  double total) {
  MainPhase m;
  // The measured phase starts once every connection had time to come up.
  m.before = Snapshot(label, *set_);
  set_->ResetCounters();
  phase_.store(kMain);
  const auto main_start = Clock::now();
  Sleep(policy, opt_.duration, elapsed, total);
  // The main phase ends: new calls count as the next phase (or are not
  // started), and the main phase's last calls finish before the snapshot.
  m.seconds = std::chrono::duration<double>(Clock::now() - main_start).count();
  if (with_stop) {
    phase_.store(kSwitch);
  } else {
    done_.store(true);
  }
  const auto drain_deadline = Clock::now() + std::chrono::seconds(6);
  while (in_flight_[kMain].load() > 0 && Clock::now() < drain_deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  m.after = Snapshot(label, *set_);
  m.server = ReadServerCounters(*set_);
  return m;
}

PolicyReport Runner::Run(Policy policy, const std::string& service_config) {
  const std::string label = absl::StrCat("demo-", PolicyName(policy));
  auto stub = NewStub(*set_, service_config, label);
  const bool with_stop = IsPoise(policy) && set_->size() > 1;
  const double after_seconds = opt_.duration / 2;
  const double total = kWarmupSeconds + opt_.duration +
                       (with_stop ? kSettleSeconds + after_seconds : 0);
  std::vector<RunLog> logs(opt_.concurrency);
  std::vector<std::thread> workers = StartWorkers(stub.get(), &logs);

  double elapsed = 0;
  Sleep(policy, kWarmupSeconds, &elapsed, total);
  const MainPhase main = Measure(policy, label, with_stop, &elapsed, total);
  const size_t stopped = *opt_.stop;
  if (with_stop) {
    // Stop one backend while the traffic keeps flowing.
    set_->backend(stopped).Stop();
    Sleep(policy, kSettleSeconds, &elapsed, total);
    phase_.store(kAfter);
    Sleep(policy, after_seconds, &elapsed, total);
  }
  done_.store(true);
  for (auto& t : workers) t.join();
  if (StderrIsTerminal()) {
    std::fprintf(stderr, "\r%*s\r", 90, "");
    std::fflush(stderr);
  }

  RunLog log;
  log.Init((opt_.keys + 1) * set_->size());
  for (const auto& l : logs) log.Merge(l);
  PolicyReport report = Analyse(opt_, *set_, policy, log, main.seconds,
                                main.before, main.after, main.server);
  report.label = label;
  if (with_stop) {
    StopReport s = AnalyseStop(opt_, *set_, log, stopped, after_seconds);
    RestartBackend(stopped, set_);
    std::tie(s.retry_sent, s.retry_failed) =
        StopWithRetry(WithRetryPolicy(service_config), stopped);
    report.stop = s;
  }
  return report;
}

std::pair<uint64_t, uint64_t> Runner::StopWithRetry(
    const std::string& service_config, size_t stopped) {
  auto stub = NewStub(*set_, service_config, "demo-retry");
  std::atomic<bool> counting{false}, done{false};
  std::atomic<uint64_t> next{0}, sent{0}, failed{0};
  std::vector<std::thread> workers;
  for (size_t w = 0; w < opt_.concurrency; ++w) {
    workers.emplace_back([&] {
      while (!done.load()) {
        const uint32_t key =
            (*sequence_)[next.fetch_add(1) % sequence_->size()];
        poise::example::EchoReply reply;
        const bool counted = counting.load();
        const grpc::Status status =
            Call(stub.get(), key_names_[key], "", opt_.delay_ms, &reply);
        if (!counted) continue;
        sent.fetch_add(1);
        if (!status.ok() || set_->IndexOf(reply.backend_id()) < 0) {
          failed.fetch_add(1);
        }
      }
    });
  }
  std::this_thread::sleep_for(Seconds(kWarmupSeconds));
  counting.store(true);  // calls started from here on are counted
  set_->backend(stopped).Stop();
  std::this_thread::sleep_for(Seconds(kSettleSeconds));
  done.store(true);
  for (auto& t : workers) t.join();
  RestartBackend(stopped, set_);
  return {sent.load(), failed.load()};
}

}  // namespace poise_demo
