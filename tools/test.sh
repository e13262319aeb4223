#!/usr/bin/env bash
# The README's test command (and CI's): set up the machine, build, run.
#   tools/test.sh           the full suite: a Release build (gcc) and its
#                           tests, a short soak under valgrind (no leak, no
#                           error), then an ASan+UBSan build (clang) of the
#                           same tests plus 10-second runs of the libFuzzer
#                           targets; about 10 minutes from scratch on 2 cores
#   tools/test.sh --quick   the Release build and its tests only
#   POISE_BUILD_DIR=dir     where the Release build goes (default: build)
#   POISE_TEST_TSAN=1       then also the core and policy concurrency tests
#                           under TSan in build-tsan (manual; suppressions in
#                           test/tsan.supp)
# See docs/reliability.md for what each mode covers and how long it takes.
# The core on ARM64 under qemu is a separate script, tools/test-arm64.sh
# (about 20 minutes from scratch on 2 cores: too long for this one).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${POISE_BUILD_DIR:-$root/build}
jobs=$(nproc)

quick=0
case "${1:-}" in
  "") ;;
  --quick) quick=1 ;;
  *) echo "usage: tools/test.sh [--quick]" >&2; exit 2 ;;
esac

"$root/tools/setup.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release ${POISE_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$jobs"
log=$build/ctest-release.log
ctest --test-dir "$build" -j"$jobs" --output-on-failure --timeout 600 | tee "$log"
# Which kernel targets this host ran: each per-target case names its target
# last (".../AVX2"); a target the CPU cannot run skips its cases.
echo "== kernel targets on this host ($(grep -m1 '^model name' /proc/cpuinfo | sed 's/.*: //'), $(grep -m1 '^cpu family' /proc/cpuinfo | tr -d '\t'), $(grep -qw avx512f /proc/cpuinfo && echo avx512f || echo 'no avx512f'))"
awk '/ Test +#[0-9]+: .*\/(AVX3|AVX2|SSE4|EMU128|SCALAR|NEON)[ ]/ {
       match($0, /\/(AVX3|AVX2|SSE4|EMU128|SCALAR|NEON)[ ]/)
       t = substr($0, RSTART + 1, RLENGTH - 2)
       if ($0 ~ /Skipped/) skipped[t]++; else ran[t]++
       seen[t] = 1
     }
     END {
       for (t in seen) printf "  %-7s %3d per-target cases ran, %3d skipped%s\n", t, ran[t], skipped[t], (ran[t] ? "" : " (the CPU lacks it)")
     }' "$log" | sort

if ((quick == 0)); then
  echo "== valgrind: 5000 calls through one channel (test/hardening/soak_test.cc)"
  # "possibly lost" blocks are absl's process-lifetime random pool (gRPC's
  # backoff seeds it once); definite leaks and memory errors fail the run.
  POISE_SOAK_CALLS=5000 valgrind -q --leak-check=full \
    --show-leak-kinds=definite --errors-for-leak-kinds=definite \
    --error-exitcode=1 \
    "$build/test/hardening/poise_soak_test"

  # clang, so the same build also holds the libFuzzer targets (label fuzz).
  # Its kernels test bits for their lane masks on every target, as the
  # AVX-512 kernels do: the Release build above tests the other way.
  asan=${POISE_SANITIZE_BUILD_DIR:-$root/build-sanitize}
  echo "== ASan+UBSan suite and short fuzz runs in $asan"
  CC=clang CXX=clang++ cmake -S "$root" -B "$asan" \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPOISE_SANITIZE=address \
    -DPOISE_BUILD_FUZZERS=ON -DPOISE_BUILD_BENCHMARKS=OFF \
    -DPOISE_KERNELS_TEST_BITS=ON >/dev/null
  cmake --build "$asan" -j"$jobs"
  # Leak checking stays on; gRPC's process-lifetime singletons are not leaks
  # LeakSanitizer reports (they stay reachable).
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1} \
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
    ctest --test-dir "$asan" -j"$jobs" --output-on-failure --timeout 900 -LE packaging
  # -LE packaging: the install/consumer checks link an ASan-instrumented
  # static poise into an uninstrumented consumer project by design; they
  # run in the normal suite above.
fi

if [[ "${POISE_TEST_TSAN:-0}" == 1 ]]; then
  tsan=${POISE_TSAN_BUILD_DIR:-$root/build-tsan}
  echo "== TSan: core and policy concurrency tests in $tsan"
  cmake -S "$root" -B "$tsan" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPOISE_SANITIZE=thread -DPOISE_BUILD_BENCHMARKS=OFF \
    -DPOISE_BUILD_TOOLS=OFF >/dev/null
  cmake --build "$tsan" -j"$jobs" --target poise_core_test poise_router_test \
    poise_grpc_lb_test poise_bad_input_test
  # Tests with real grpc++ servers are left out: grpc++'s inline headers
  # (instrumented, in our binaries) hand objects over through the
  # uninstrumented libgrpc's completion queues, which TSan cannot see
  # (docs/reliability.md).
  export TSAN_OPTIONS=${TSAN_OPTIONS:-suppressions=$root/test/tsan.supp:halt_on_error=1:second_deadlock_stack=1}
  "$tsan/test/poise_core_test"
  "$tsan/test/router/poise_router_test"
  "$tsan/test/grpc/poise_grpc_lb_test"
  "$tsan/test/hardening/poise_bad_input_test" --gtest_filter='BadConfig.*:HeaderValueTest.*'
fi
