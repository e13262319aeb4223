#!/usr/bin/env bash
# The README's first command. Until the multi-backend demo lands, it shows the
# routing core on the published example with poise-explain.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${POISE_BUILD_DIR:-$root/build}
"$root/tools/setup.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target poise-explain >/dev/null
echo "# idle: customer-42's owner among a:1 b:3 c:6"
"$build/tools/poise-explain" --key customer-42 --backend a=1 --backend b=3 --backend c=6
echo "# b is at its bound (factor 100): the request spills to the key's next choice"
"$build/tools/poise-explain" --key customer-42 --backend a=1:0 --backend b=3:5 --backend c=6:0 --factor 100
