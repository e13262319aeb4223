#!/usr/bin/env bash
# Instructions per router::Picker::Pick under callgrind: deterministic, unlike
# bench/run.sh's times (valgrind has no AVX-512, so the kernels run on AVX2).
# One weight over n backends, each of BM_PairedPicker's picks alone
# (POISE_PAIRED_ONLY): weighted_rendezvous's pick; bounded_load_rendezvous's
# first attempt and a retry's second choice, idle and with half the backends
# at their bound.
# Usage: bench/picker_ir.sh [N...]   (default: 10 100; BUILD_DIR overrides
# the build directory, default build-bench, as bench/run.sh). About 20 s per n.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(10 100)
command -v valgrind >/dev/null || { echo "picker_ir.sh: needs valgrind" >&2; exit 2; }
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPOISE_BUILD_GRPC=OFF \
  -DPOISE_BUILD_EXAMPLES=OFF -DPOISE_BUILD_BENCHMARKS=ON >/dev/null
cmake --build "$build" -j2 --target poise_core_bench >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
names=("weighted" "bounded, first" "bounded, retry" "half full: first" "half full: retry")
echo "| n | pick | Ir per router::Picker::Pick |"
echo "|---:|---|---:|"
for n in "${sizes[@]}"; do
  for r in 0 1 2 3 4; do
    POISE_PAIRED_ONLY=$r valgrind --tool=callgrind --callgrind-out-file="$out/cg" \
      "$build/bench/poise_core_bench" --benchmark_filter="BM_PairedPicker/$n\$" \
      --benchmark_min_time=0.05 >/dev/null 2>&1
    # Picker::Pick's inclusive count over its calls (the callers' lines
    # above it in the caller tree carry them).
    ir=$(callgrind_annotate --threshold=100 --inclusive=yes --tree=caller \
        "$out/cg" | python3 -c '
import re, sys
lines = sys.stdin.read().split("\n")
for k, line in enumerate(lines):
    if re.search(r"\*  \S*:poise::router::Picker::Pick\(poise::router::PickRequest const&\)", line):
        total = int(line.split()[0].replace(",", ""))
        calls, j = 0, k - 1
        while j >= 0 and "<" in lines[j]:
            m = re.search(r"\(([0-9,]+)x\)", lines[j])
            calls += int(m.group(1).replace(",", "")) if m else 0
            j -= 1
        print(f"{total / calls:,.0f}" if calls else "-")
        break
else:
    print("-")')
    echo "| $n | ${names[$r]} | $ir |"
  done
done
