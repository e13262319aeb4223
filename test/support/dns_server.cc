#include "test/support/dns_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace poise::test_support {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr char kRunDirPrefix[] = "poise-dnsmasq-";

// Closes a file descriptor on every exit path.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }

 private:
  int fd_;
};

std::string Errno(std::string_view what) {
  return std::string(what) + ": " + std::strerror(errno);
}

// A port free for both UDP and TCP on 127.0.0.1 just now (0 if none found).
uint16_t FreePort() {
  for (int attempt = 0; attempt < 20; ++attempt) {
    Fd udp(socket(AF_INET, SOCK_DGRAM, 0));
    if (udp.get() < 0) return 0;
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    if (bind(udp.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
        0) {
      continue;
    }
    socklen_t length = sizeof(addr);
    if (getsockname(udp.get(), reinterpret_cast<sockaddr*>(&addr), &length) !=
        0) {
      continue;
    }
    Fd tcp(socket(AF_INET, SOCK_STREAM, 0));
    if (tcp.get() < 0) return 0;
    if (bind(tcp.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) ==
        0) {
      return ntohs(addr.sin_port);
    }
  }
  return 0;
}

// One UDP query to 127.0.0.1:port; true if the reply is NOERROR with at
// least one answer. An independent check (no c-ares) that dnsmasq serves.
bool ProbeAnswers(uint16_t port, std::string_view name, milliseconds wait) {
  static std::atomic<uint16_t> next_id{
      static_cast<uint16_t>(std::random_device()())};
  const uint16_t id = next_id++;
  std::vector<uint8_t> packet = {static_cast<uint8_t>(id >> 8),
                                 static_cast<uint8_t>(id & 0xff),
                                 0x01,  // RD
                                 0x00,
                                 0x00,
                                 0x01,
                                 0x00,
                                 0x00,
                                 0x00,
                                 0x00,
                                 0x00,
                                 0x00};
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('.', start);
    if (end == std::string_view::npos) end = name.size();
    const std::string_view label = name.substr(start, end - start);
    if (!label.empty()) {
      packet.push_back(static_cast<uint8_t>(label.size()));
      packet.insert(packet.end(), label.begin(), label.end());
    }
    start = end + 1;
  }
  packet.insert(packet.end(), {0x00, 0x00, 0x01, 0x00, 0x01});  // A, IN
  Fd sock(socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (sock.get() < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (connect(sock.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
          0 ||
      send(sock.get(), packet.data(), packet.size(), 0) !=
          static_cast<ssize_t>(packet.size())) {
    return false;
  }
  const Clock::time_point deadline = Clock::now() + wait;
  while (true) {
    const auto left =
        std::chrono::duration_cast<milliseconds>(deadline - Clock::now())
            .count();
    if (left <= 0) return false;
    pollfd pfd{sock.get(), POLLIN, 0};
    const int ready = poll(&pfd, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    std::array<uint8_t, 1500> reply{};
    const ssize_t got = recv(sock.get(), reply.data(), reply.size(), 0);
    if (got < 0) return false;  // ECONNREFUSED: nothing listens.
    if (got < 12 || reply[0] != packet[0] || reply[1] != packet[1]) continue;
    const bool is_reply = (reply[2] & 0x80) != 0;
    const int rcode = reply[3] & 0x0f;
    const int answers = (reply[6] << 8) | reply[7];
    return is_reply && rcode == 0 && answers > 0;
  }
}

std::string MarkerName(int generation, const std::string& domain) {
  return "gen-" + std::to_string(generation) + ".poise-fixture." + domain;
}

// A file of /proc/<pid>/, whole; empty when it cannot be read (the process
// may exit while it is read: that is no error here).
std::string ReadProcFile(const std::string& pid, const char* file) {
  std::string text;
  const int fd = open(("/proc/" + pid + "/" + file).c_str(), O_RDONLY);
  if (fd < 0) return text;
  std::array<char, 4096> buffer{};
  for (;;) {
    const ssize_t n = read(fd, buffer.data(), buffer.size());
    if (n <= 0) break;
    text.append(buffer.data(), static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

// Process state letter from /proc/<pid>/stat ('T' stopped, 'Z' zombie), or
// 0 if it cannot be read.
char ProcessState(pid_t pid) {
  const std::string text = ReadProcFile(std::to_string(pid), "stat");
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return 0;
  return text[paren + 2];
}

template <typename Predicate>
bool WaitUntil(Clock::time_point deadline, Predicate done) {
  milliseconds step(1);
  while (true) {
    if (done()) return true;
    if (Clock::now() >= deadline) return false;
    // A short, growing poll interval: the deadline bounds the wait.
    std::this_thread::sleep_for(step);
    step = std::min(step * 2, milliseconds(50));
  }
}

std::string Tail(const std::string& text, size_t bytes) {
  return text.size() <= bytes ? text : "..." + text.substr(text.size() - bytes);
}

}  // namespace

DnsZone& DnsZone::Host(std::string name, std::string ip) {
  hosts.push_back(HostRecord{std::move(name), std::move(ip)});
  return *this;
}

DnsZone& DnsZone::Cname(std::string alias, std::string target) {
  cnames.push_back(CnameRecord{std::move(alias), std::move(target)});
  return *this;
}

DnsZone& DnsZone::Srv(std::string name, std::string target, uint16_t port,
                      uint16_t priority, uint16_t weight) {
  srv.push_back(
      SrvRecord{std::move(name), std::move(target), port, priority, weight});
  return *this;
}

bool DnsmasqServer::Installed() { return access(kDnsmasqPath, X_OK) == 0; }

bool DnsmasqRequired() {
  const char* ci = std::getenv("CI");
  if (ci == nullptr) return false;
  const std::string value(ci);
  return !value.empty() && value != "false" && value != "0";
}

DnsmasqServer::DnsmasqServer(std::string domain) : domain_(std::move(domain)) {
  static std::atomic<int> counter{0};
  std::string pattern = (std::filesystem::temp_directory_path() /
                         (kRunDirPrefix + std::to_string(getpid()) + "-" +
                          std::to_string(counter++) + "-XXXXXX"))
                            .string();
  if (mkdtemp(pattern.data()) != nullptr) run_dir_ = pattern;
}

DnsmasqServer::~DnsmasqServer() {
  Kill();
  if (!run_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(run_dir_, ignored);
  }
}

std::string DnsmasqServer::authority() const {
  return "127.0.0.1:" + std::to_string(port_);
}

std::string DnsmasqServer::Log() const {
  std::ifstream log(run_dir_ + "/dnsmasq.log");
  return {std::istreambuf_iterator<char>(log),
          std::istreambuf_iterator<char>()};
}

::testing::AssertionResult DnsmasqServer::Failure(std::string_view what) const {
  return ::testing::AssertionFailure()
         << "dnsmasq (port " << port_ << ", pid " << pid_ << "): " << what
         << "\n--- dnsmasq log (" << run_dir_ << ") ---\n"
         << Tail(Log(), 3000);
}

::testing::AssertionResult DnsmasqServer::WriteFiles(const DnsZone& zone) {
  if (run_dir_.empty()) {
    return ::testing::AssertionFailure() << "no run folder (mkdtemp failed)";
  }
  std::ostringstream conf;
  conf << "# generated by poise's DnsmasqServer\n"
       << "local=/" << domain_ << "/\n";
  for (const DnsZone::SrvRecord& r : zone.srv) {
    conf << "srv-host=" << r.name << "," << r.target << "," << r.port << ","
         << r.priority << "," << r.weight << "\n";
  }
  for (const DnsZone::CnameRecord& r : zone.cnames) {
    conf << "cname=" << r.alias << "," << r.target << "\n";
  }
  std::ostringstream hosts;
  hosts << "127.0.0.1 " << MarkerName(generation_, domain_) << "\n";
  for (const DnsZone::HostRecord& h : zone.hosts) {
    hosts << h.ip << " " << h.name << "\n";
  }
  // Write-then-rename: dnsmasq never reads a half-written file.
  for (const auto& [name, text] :
       {std::pair<std::string, std::string>{"dnsmasq.conf", conf.str()},
        std::pair<std::string, std::string>{"hosts", hosts.str()}}) {
    const std::string path = run_dir_ + "/" + name;
    {
      std::ofstream out(path + ".new", std::ios::trunc);
      out << text;
      out.close();
      if (!out) return ::testing::AssertionFailure() << "cannot write " << path;
    }
    if (std::rename((path + ".new").c_str(), path.c_str()) != 0) {
      return ::testing::AssertionFailure() << Errno("rename " + path);
    }
  }
  zone_ = zone;
  return ::testing::AssertionSuccess();
}

bool DnsmasqServer::Reap(bool block) {
  if (pid_ <= 0) return true;
  int status = 0;
  const pid_t got = waitpid(pid_, &status, block ? 0 : WNOHANG);
  if (got == pid_ || (got < 0 && errno == ECHILD)) {
    pid_ = -1;
    paused_ = false;
    return true;
  }
  return false;
}

void DnsmasqServer::Kill() {
  if (pid_ <= 0) return;
  // Its process group: dnsmasq forks a child per TCP connection.
  kill(-pid_, SIGKILL);
  kill(pid_, SIGKILL);
  Reap(/*block=*/true);
}

::testing::AssertionResult DnsmasqServer::WaitForGeneration(
    Clock::time_point deadline) {
  const std::string marker = MarkerName(generation_, domain_);
  bool exited = false;
  const bool answered = WaitUntil(deadline, [&] {
    if (Reap(/*block=*/false)) {
      exited = true;
      return true;
    }
    return ProbeAnswers(port_, marker, milliseconds(100));
  });
  if (exited) return Failure("exited before answering");
  if (!answered) return Failure("does not answer " + marker + " in time");
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult DnsmasqServer::Launch(milliseconds wait,
                                                 bool fresh_port) {
  const Clock::time_point deadline = Clock::now() + wait;
  const passwd* user = getpwuid(geteuid());
  const group* grp = getgrgid(getegid());
  if (user == nullptr || grp == nullptr) {
    return ::testing::AssertionFailure() << "cannot name the current user";
  }
  // dnsmasq runs as us: it keeps reading the files of the run folder after
  // SIGHUP, and keeps the parent-death signal (a change of user clears it).
  const std::string user_arg = std::string("--user=") + user->pw_name;
  const std::string group_arg = std::string("--group=") + grp->gr_name;
  const std::string log_path = run_dir_ + "/dnsmasq.log";
  while (true) {
    if (fresh_port || port_ == 0) port_ = FreePort();
    if (port_ == 0) return Failure("no free port on 127.0.0.1");
    std::vector<std::string> args = {
        kDnsmasqPath,
        "--keep-in-foreground",
        "--no-resolv",
        "--no-hosts",
        "--listen-address=127.0.0.1",
        "--bind-interfaces",
        "--port=" + std::to_string(port_),
        "--conf-file=" + run_dir_ + "/dnsmasq.conf",
        "--addn-hosts=" + run_dir_ + "/hosts",
        "--pid-file=" + run_dir_ + "/dnsmasq.pid",
        "--log-facility=-",
        "--log-queries",
        user_arg,
        group_arg,
    };
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    const int log_fd =
        open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) return Failure(Errno("open " + log_path));
    const size_t log_start = Log().size();
    const pid_t parent = getpid();
    const pid_t child = fork();
    if (child < 0) {
      close(log_fd);
      return Failure(Errno("fork"));
    }
    if (child == 0) {
      // Async-signal-safe calls only until exec.
      setpgid(0, 0);
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(127);
      const int null_fd = open("/dev/null", O_RDONLY);
      if (null_fd >= 0) dup2(null_fd, STDIN_FILENO);
      dup2(log_fd, STDOUT_FILENO);
      dup2(log_fd, STDERR_FILENO);
      syscall(SYS_close_range, 3U, ~0U, 0U);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(log_fd);
    setpgid(child, child);  // Either side may run first: both set it.
    pid_ = child;
    paused_ = false;
    ++launches_;
    ::testing::AssertionResult ready = WaitForGeneration(deadline);
    if (ready) return ready;
    const std::string log = Log().substr(log_start);
    Kill();
    const bool port_taken =
        log.find("Address already in use") != std::string::npos;
    if (!port_taken || Clock::now() >= deadline) return ready;
    // The port was taken between our probe and dnsmasq's bind (or, for a
    // restart on the same port, is still held): try again.
    std::this_thread::sleep_for(milliseconds(20));
  }
}

::testing::AssertionResult DnsmasqServer::Start(const DnsZone& zone,
                                                milliseconds wait) {
  if (!Installed()) return Failure(std::string(kDnsmasqPath) + " is missing");
  if (pid_ > 0) return Failure("already started");
  ++generation_;
  if (::testing::AssertionResult written = WriteFiles(zone); !written) {
    return written;
  }
  return Launch(wait, /*fresh_port=*/true);
}

::testing::AssertionResult DnsmasqServer::SetRecords(const DnsZone& zone,
                                                     milliseconds wait) {
  if (paused_) return Failure("SetRecords while paused");
  const bool config_changed =
      !(zone.srv == zone_.srv) || !(zone.cnames == zone_.cnames);
  ++generation_;
  if (::testing::AssertionResult written = WriteFiles(zone); !written) {
    return written;
  }
  if (pid_ <= 0) return ::testing::AssertionSuccess();  // Restart() serves.
  if (config_changed) {
    // SIGHUP does not re-read the configuration file with the SRV and CNAME
    // records.
    if (::testing::AssertionResult stopped = Stop(); !stopped) return stopped;
    return Launch(wait, /*fresh_port=*/false);
  }
  if (kill(pid_, SIGHUP) != 0) return Failure(Errno("SIGHUP"));
  return WaitForGeneration(Clock::now() + wait);
}

::testing::AssertionResult DnsmasqServer::Pause() {
  if (pid_ <= 0) return Failure("Pause while not running");
  if (kill(pid_, SIGSTOP) != 0) return Failure(Errno("SIGSTOP"));
  paused_ = true;
  if (!WaitUntil(Clock::now() + std::chrono::seconds(5),
                 [this] { return ProcessState(pid_) == 'T'; })) {
    return Failure("not stopped after SIGSTOP");
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult DnsmasqServer::Resume(milliseconds wait) {
  if (pid_ <= 0) return Failure("Resume while not running");
  if (kill(pid_, SIGCONT) != 0) return Failure(Errno("SIGCONT"));
  paused_ = false;
  return WaitForGeneration(Clock::now() + wait);
}

::testing::AssertionResult DnsmasqServer::Stop() {
  if (pid_ <= 0) return ::testing::AssertionSuccess();
  kill(-pid_, SIGTERM);
  kill(-pid_, SIGCONT);  // A stopped process acts on SIGTERM only when resumed.
  if (!WaitUntil(Clock::now() + std::chrono::seconds(5),
                 [this] { return Reap(/*block=*/false); })) {
    Kill();
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult DnsmasqServer::Restart(milliseconds wait) {
  if (pid_ > 0) {
    if (::testing::AssertionResult stopped = Stop(); !stopped) return stopped;
  }
  if (port_ == 0) return Failure("Restart before Start");
  ++generation_;
  if (::testing::AssertionResult written = WriteFiles(zone_); !written) {
    return written;
  }
  return Launch(wait, /*fresh_port=*/false);
}

std::vector<pid_t> DnsmasqProcessesOf(pid_t owner) {
  const std::string marker =
      std::string("/") + kRunDirPrefix + std::to_string(owner) + "-";
  std::vector<pid_t> found;
  std::error_code error;
  std::filesystem::directory_iterator it("/proc", error);
  for (; !error && it != std::filesystem::directory_iterator();
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (name.empty() ||
        name.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const std::string text = ReadProcFile(name, "cmdline");
    if (text.rfind(kDnsmasqPath, 0) != 0) continue;
    if (text.find(marker) == std::string::npos) continue;
    const auto pid = static_cast<pid_t>(std::stol(name));
    if (ProcessState(pid) == 'Z') continue;
    found.push_back(pid);
  }
  return found;
}

}  // namespace poise::test_support
