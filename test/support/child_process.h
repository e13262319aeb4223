// A child process for multi-process end-to-end tests: fork + exec with its
// standard output on a pipe, lines read with deadlines, signals, a wait with a
// deadline, and SIGKILL + reap on destruction (and PR_SET_PDEATHSIG, so a
// child never outlives a test that crashed). Include as
// "test/support/child_process.h".
#ifndef POISE_TEST_SUPPORT_CHILD_PROCESS_H_
#define POISE_TEST_SUPPORT_CHILD_PROCESS_H_

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace poise::test_support {

class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { Kill(); }

  // Starts `argv[0]` with the arguments `argv`. False if fork or pipe failed
  // (an exec failure shows as exit status 127).
  bool Start(const std::vector<std::string>& argv) {
    std::array<int, 2> fds{};
    if (pipe2(fds.data(), O_CLOEXEC) != 0) return false;
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const std::string& a : argv) {
      args.push_back(const_cast<char*>(a.c_str()));
    }
    args.push_back(nullptr);
    const pid_t pid = fork();
    if (pid < 0) {
      close(fds[0]);
      close(fds[1]);
      return false;
    }
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      dup2(fds[1], STDOUT_FILENO);  // dup2 clears FD_CLOEXEC on the copy
      execv(args[0], args.data());
      _exit(127);
    }
    close(fds[1]);
    pid_ = pid;
    out_ = fds[0];
    return true;
  }

  // The next line of standard output (without '\n'), or nullopt at end of
  // file or when `limit` passes first.
  std::optional<std::string> ReadLine(std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      if (const size_t at = buffer_.find('\n'); at != std::string::npos) {
        std::string line = buffer_.substr(0, at);
        buffer_.erase(0, at + 1);
        return line;
      }
      if (out_ < 0) return std::nullopt;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{out_, POLLIN, 0};
      const int ready = poll(&p, 1, static_cast<int>(left.count()));
      if (ready < 0) return std::nullopt;
      if (ready == 0) continue;
      char chunk[4096];
      const ssize_t n = read(out_, chunk, sizeof chunk);
      if (n <= 0) {
        close(out_);
        out_ = -1;
        continue;
      }
      buffer_.append(chunk, static_cast<size_t>(n));
    }
  }

  void Signal(int signal) const {
    if (pid_ > 0) kill(pid_, signal);
  }

  // Waits up to `limit` for the child to exit and returns its exit status
  // (128 + signal if killed by one); on timeout kills it and returns -1.
  int Wait(std::chrono::milliseconds limit) {
    if (pid_ <= 0) return status_;
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      int status = 0;
      const pid_t r = waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        status_ =
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        return status_;
      }
      if (r < 0 || std::chrono::steady_clock::now() > deadline) {
        Kill();
        status_ = -1;
        return status_;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // SIGKILL and reap (idempotent).
  void Kill() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      int status = 0;
      waitpid(pid_, &status, 0);
      pid_ = -1;
      status_ = 128 + SIGKILL;
    }
    if (out_ >= 0) {
      close(out_);
      out_ = -1;
    }
  }

  bool running() const { return pid_ > 0; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int status_ = -1;
  std::string buffer_;
};

}  // namespace poise::test_support

#endif  // POISE_TEST_SUPPORT_CHILD_PROCESS_H_
