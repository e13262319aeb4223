// A wall clock that a test can step, for tests that must survive an NTP
// correction or a VM resume. Loaded with LD_PRELOAD, this library adds an
// offset to every CLOCK_REALTIME reading of the process (clock_gettime for
// CLOCK_REALTIME and CLOCK_REALTIME_COARSE, gettimeofday, time) and leaves
// the monotonic clocks alone. Absolute CLOCK_REALTIME deadlines handed to the
// kernel through syscall(SYS_futex, ...) (absl's waiter, which gRPC's
// gpr_cv_wait uses) are shifted back, so a wait lasts what its caller meant
// whatever the offset, as after a real step. The test sets the offset at run
// time through poise_wall_clock_shift_set_ns(), which it finds with dlsym
// (test/support/wall_clock_shift.h). Calls glibc makes inside itself do not
// come through here; those of every other library (absl, libstdc++, gRPC)
// do. Built without sanitizers: it is loaded before their runtimes.
#include <dlfcn.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <ctime>

namespace {

using ClockGettime = int (*)(clockid_t, timespec*);
using Gettimeofday = int (*)(timeval*, void*);
using Syscall = long (*)(long, ...);  // NOLINT(google-runtime-int): syscall(2)

constexpr int64_t kNanosPerSecond = 1'000'000'000;

std::atomic<int64_t> g_shift_ns{0};

// libc's function `name`, looked up once. Not a function-local static: its
// guard, when two threads meet at it, waits through syscall(SYS_futex, ...),
// which is ShiftedSyscall, whose own guard would wait the same way, without
// end. A race here only looks the same symbol up twice.
template <typename F>
F Next(std::atomic<F>& cached, const char* name) {
  F f = cached.load(std::memory_order_acquire);
  if (f == nullptr) {
    f = reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
    cached.store(f, std::memory_order_release);
  }
  return f;
}

std::atomic<ClockGettime> g_clock_gettime{nullptr};
std::atomic<Gettimeofday> g_gettimeofday{nullptr};
std::atomic<Syscall> g_syscall{nullptr};

ClockGettime RealClockGettime() {
  return Next(g_clock_gettime, "clock_gettime");
}

// Adds `shift_ns` to `ts`.
void Shift(timespec* ts, int64_t shift_ns) {
  const int64_t ns = static_cast<int64_t>(ts->tv_sec) * kNanosPerSecond +
                     ts->tv_nsec + shift_ns;
  int64_t sec = ns / kNanosPerSecond;
  int64_t nsec = ns % kNanosPerSecond;
  if (nsec < 0) {
    nsec += kNanosPerSecond;
    sec -= 1;
  }
  ts->tv_sec = static_cast<time_t>(sec);
  ts->tv_nsec = static_cast<decltype(ts->tv_nsec)>(nsec);
}

}  // namespace

// The interposed functions carry names of their own and take the libc
// symbols' names through asm labels, so they do not redeclare libc's
// prototypes.
extern "C" {
int ShiftedClockGettime(clockid_t clock, timespec* ts) __asm__("clock_gettime");
int ShiftedGettimeofday(timeval* tv, void* tz) __asm__("gettimeofday");
time_t ShiftedTime(time_t* out) __asm__("time");
// NOLINTNEXTLINE(google-runtime-int): syscall(2)'s own types
long ShiftedSyscall(long number, ...) __asm__("syscall");

__attribute__((visibility("default"))) void poise_wall_clock_shift_set_ns(
    int64_t shift_ns) {
  g_shift_ns.store(shift_ns);
}

__attribute__((visibility("default"))) int ShiftedClockGettime(clockid_t clock,
                                                               timespec* ts) {
  const int status = RealClockGettime()(clock, ts);
  if (status == 0 &&
      (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
    Shift(ts, g_shift_ns.load());
  }
  return status;
}

__attribute__((visibility("default"))) int ShiftedGettimeofday(timeval* tv,
                                                               void* tz) {
  if (tz != nullptr) Next(g_gettimeofday, "gettimeofday")(nullptr, tz);
  timespec ts{};
  const int status = RealClockGettime()(CLOCK_REALTIME, &ts);
  if (status != 0) return status;
  Shift(&ts, g_shift_ns.load());
  tv->tv_sec = ts.tv_sec;
  tv->tv_usec = static_cast<suseconds_t>(ts.tv_nsec / 1000);
  return 0;
}

__attribute__((visibility("default"))) time_t ShiftedTime(time_t* out) {
  timespec ts{};
  if (ShiftedClockGettime(CLOCK_REALTIME, &ts) != 0) {
    return static_cast<time_t>(-1);
  }
  if (out != nullptr) *out = ts.tv_sec;
  return ts.tv_sec;
}

// Reads the six argument registers whatever the call passed, as glibc's own
// syscall() does; `long` throughout, syscall(2)'s own types.
// NOLINTBEGIN(google-runtime-int,performance-no-int-to-ptr)
__attribute__((visibility("default"))) long ShiftedSyscall(long number, ...) {
  const Syscall real = Next(g_syscall, "syscall");
  va_list ap;
  va_start(ap, number);
  long a[6];
  for (long& arg : a) arg = va_arg(ap, long);
  va_end(ap);
  const int op = static_cast<int>(a[1]);
  if (number == SYS_futex && a[3] != 0 && (op & FUTEX_CLOCK_REALTIME) != 0 &&
      (op & FUTEX_CMD_MASK) == FUTEX_WAIT_BITSET) {
    timespec deadline = *reinterpret_cast<const timespec*>(a[3]);
    Shift(&deadline, -g_shift_ns.load());
    return real(number, a[0], a[1], a[2], reinterpret_cast<long>(&deadline),
                a[4], a[5]);
  }
  return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}
// NOLINTEND(google-runtime-int,performance-no-int-to-ptr)

}  // extern "C"
