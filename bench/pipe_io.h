// Whole-buffer pipe I/O for the benchmarks that run their servers in a child
// process (e2e_bench.cc, memory_bench.cc): retried on EINTR.
#ifndef POISE_BENCH_PIPE_IO_H_
#define POISE_BENCH_PIPE_IO_H_

#include <unistd.h>

#include <cerrno>
#include <string>

namespace poise::bench {

// Writes all of `data`; false on an error or a closed pipe.
inline bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t w = write(fd, data.data() + done, data.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

// Everything until end of file (or an error).
inline std::string ReadAll(int fd) {
  std::string text;
  char buffer[4096];
  for (;;) {
    const ssize_t r = read(fd, buffer, sizeof(buffer));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    text.append(buffer, static_cast<size_t>(r));
  }
  return text;
}

}  // namespace poise::bench

#endif  // POISE_BENCH_PIPE_IO_H_
