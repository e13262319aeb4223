#!/usr/bin/env bash
# The README's test command: set up the machine, build everything, run the suite.
#   tools/test.sh            the full suite (what CI runs)
#   POISE_BUILD_DIR=dir      where to build (default: build)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${POISE_BUILD_DIR:-$root/build}
jobs=$(nproc)

"$root/tools/setup.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release ${POISE_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$jobs"
ctest --test-dir "$build" -j"$jobs" --output-on-failure --timeout 600
