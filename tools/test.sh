#!/usr/bin/env bash
# The README's test command: set up the machine, build everything, run the suite.
#   tools/test.sh                 the full suite
#   POISE_BUILD_DIR=dir           where to build (default: build)
#   POISE_TEST_SANITIZERS=1       then also build and run the suite under
#                                 ASan+UBSan in $POISE_ASAN_BUILD_DIR (default
#                                 build-asan; benchmarks off). CI sets this.
#   POISE_TEST_TSAN=1             then also the core and policy concurrency tests
#                                 under TSan in build-tsan (manual; suppressions
#                                 in test/tsan.supp)
# See docs/reliability.md for what each mode covers and how long it takes.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${POISE_BUILD_DIR:-$root/build}
jobs=$(nproc)

"$root/tools/setup.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release ${POISE_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$jobs"
ctest --test-dir "$build" -j"$jobs" --output-on-failure --timeout 600

if [[ "${POISE_TEST_SANITIZERS:-0}" == 1 ]]; then
  asan=${POISE_ASAN_BUILD_DIR:-$root/build-asan}
  echo "== ASan+UBSan suite in $asan"
  cmake -S "$root" -B "$asan" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DPOISE_SANITIZE=address -DPOISE_BUILD_BENCHMARKS=OFF >/dev/null
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
  cmake --build "$tsan" -j"$jobs" --target poise_core_test poise_grpc_lb_test \
    poise_bad_input_test
  # Tests with real grpc++ servers are left out: grpc++'s inline headers
  # (instrumented, in our binaries) hand objects over through the
  # uninstrumented libgrpc's completion queues, which TSan cannot see
  # (docs/reliability.md).
  export TSAN_OPTIONS=${TSAN_OPTIONS:-suppressions=$root/test/tsan.supp:halt_on_error=1:second_deadlock_stack=1}
  "$tsan/test/poise_core_test"
  "$tsan/test/grpc/poise_grpc_lb_test"
  "$tsan/test/hardening/poise_bad_input_test" --gtest_filter='BadConfig.*:HeaderValueTest.*'
fi
