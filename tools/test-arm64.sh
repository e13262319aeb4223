#!/usr/bin/env bash
# The core on 64-bit ARM: src/core and src/router (POISE_BUILD_GRPC=OFF)
# cross-built with Debian's aarch64 toolchain (cmake/aarch64-linux-gnu.cmake,
# GoogleTest built from Debian's sources) and their tests run under qemu-user
# twice: on a Cortex-A72 (ARMv8.0: NEON, no SVE) and on qemu's max CPU
# (SVE, SVE2; also qemu-aarch64's default CPU).
# Separate from tools/test.sh because emulation makes it long: about 20
# minutes from scratch on 2 cores (docs/reliability.md). Under emulation only
# correctness counts; the times printed are for information.
#   POISE_ARM64_BUILD_DIR=dir   where the build goes (default: build-arm64)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${POISE_ARM64_BUILD_DIR:-$root/build-arm64}
jobs=$(nproc)

"$root/tools/setup.sh"
cmake -S "$root" -B "$build" \
  -DCMAKE_TOOLCHAIN_FILE="$root/cmake/aarch64-linux-gnu.cmake" \
  -DCMAKE_BUILD_TYPE=Release -DPOISE_GTEST_FROM_SOURCE=ON \
  -DPOISE_BUILD_GRPC=OFF -DPOISE_BUILD_TOOLS=OFF -DPOISE_BUILD_EXAMPLES=OFF \
  -DPOISE_BUILD_BENCHMARKS=OFF -DPOISE_INSTALL=OFF >/dev/null
cmake --build "$build" -j"$jobs"

# The per-target tests (KernelFixture, test/core/test_util.h) are named
# ".../<Highway target>  # GetParam() = <target bit>". From a ctest JUnit
# file: "<count> <target> <run|notrun>" (notrun: skipped, as the CPU lacks
# the target).
per_target() {
  grep -oE 'testcase name="[^"]*/[A-Z0-9_]+  # GetParam\(\) = [0-9]+"[^>]* status="[a-z]+"' "$1" |
    sed -E 's|.*/([A-Z0-9_]+)  # GetParam.* status="([a-z]+)"|\1 \2|' | sort | uniq -c
}

for cpu in cortex-a72 max; do
  echo "== arm64 tests under qemu-aarch64, CPU $cpu"
  start=$SECONDS
  # ctest writes the JUnit file relative to the build directory.
  QEMU_CPU=$cpu ctest --test-dir "$build" -j"$jobs" --output-on-failure \
    --timeout 1200 --output-junit "ctest-$cpu.xml"
  echo "== arm64, CPU $cpu: $((SECONDS - start)) s under emulation" \
    "(information only); per-target tests (count, target, run/notrun):"
  targets=$(per_target "$build/ctest-$cpu.xml")
  echo "$targets"
  # Every CPU runs some target's kernels; qemu's max CPU has every feature
  # an AArch64 target needs, so there none may be skipped.
  if ! grep -q ' run$' <<<"$targets"; then
    echo "arm64: no per-target test ran on CPU $cpu" >&2
    exit 1
  fi
  if [[ $cpu == max ]] && grep -q ' notrun$' <<<"$targets"; then
    echo "arm64: CPU max skipped a compiled target's tests" >&2
    exit 1
  fi
done
