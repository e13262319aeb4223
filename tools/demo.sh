#!/usr/bin/env bash
# The README's first command: builds and runs poise-demo, which starts five
# echo backends on localhost (weights 1,1,2,3,5) and sends the same keyed
# workload through bounded_load_rendezvous, weighted_rendezvous and gRPC's
# round_robin, then stops one backend and shows which keys moved.
#   tools/demo.sh                 the default run (about 20 s)
#   tools/demo.sh --json          the same figures as JSON
#   tools/demo.sh --help          every option
#   POISE_BUILD_DIR=dir           where to build (default: build)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${POISE_BUILD_DIR:-$root/build}
"$root/tools/setup.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
echo "demo.sh: building poise-demo (the first build takes a few minutes)" >&2
cmake --build "$build" -j"$(nproc)" --target poise-demo >/dev/null
exec "$build/tools/poise-demo" "$@"
