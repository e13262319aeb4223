#!/usr/bin/env bash
# Builds poise_core_bench (Release) and prints a median summary table. The
# repetitions of all benchmarks run in a random interleaved order, so that a
# drift of the machine's speed during the run (seen on the shared VM) spreads
# over every row instead of biasing the rows that ran during it.
# Usage: bench/run.sh [extra Google Benchmark flags]   (BUILD_DIR overrides
# the build directory, default build-bench; POISE_BENCH_TARGET=AVX2, SSE4,
# AVX3, NEON, ... runs the hashing kernels on that Highway target instead of
# the best one the CPU has, e.g. AVX2 on an AVX-512 host). The summary
# starts with the pick engine's goals, each figure beside its goal, and names
# the host's CPU and the target the kernels ran on; then the README's
# results table from this run (README=update writes it into README.md).
# The core benchmarks take about 2.5 minutes, then the key cache's figures beside their goals
# (poise_key_cache_bench, about 2 minutes; KEYCACHE=0 skips it), the
# end-to-end benchmark about 4.5 (poise_e2e_bench, see
# docs/performance.md; E2E_ARGS passes it options, E2E=0 skips it): about 7
# minutes in all on the 2-core development machines, builds included. Then
# poise_memory_bench (100 channels x 1,000 READY backends per policy, about
# 1.5 minutes; MEMORY=0 skips it; MEMORY_BASE=<git ref> also builds that
# commit's libraries with this checkout's memory_bench.cc in a temporary
# directory and prints its table first, e.g. MEMORY_BASE=main: "today").
# Then, where valgrind is installed, instruction counts under callgrind
# (deterministic, unlike the times above; valgrind has no AVX-512, so the
# kernels run on AVX2 there): an address update against a full table build
# (poise_table_update_ir, seconds) and per pick of the picker
# (bench/picker_ir.sh, about 30 s; IR=0 skips both), and instructions per call
# end to end (bench/callgrind.sh, about a minute per n; CALLGRIND_SIZES
# chooses the n, default "3 10 100"; CALLGRIND=0 skips it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build-bench}
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPOISE_BUILD_GRPC=OFF \
  -DPOISE_BUILD_EXAMPLES=OFF -DPOISE_BUILD_BENCHMARKS=ON >/dev/null
cmake --build "$build" -j2 --target poise_core_bench >/dev/null
out="$build/bench/core_bench.json"
"$build/bench/poise_core_bench" --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true --benchmark_min_time=0.2 \
  --benchmark_enable_random_interleaving=true \
  --benchmark_out="$out" --benchmark_out_format=json "$@" >/dev/null
readme_block="$build/bench/readme_results.md"
python3 - "$out" "$readme_block" <<'PY'
import json, sys
data = json.load(open(sys.argv[1]))
med = {b["run_name"]: b for b in data["benchmarks"]
       if b.get("aggregate_name") == "median"}
def t(name, real=False):
    b = med.get(name)
    if b is None: return None
    assert b["time_unit"] == "ns"
    return b["real_time" if real else "cpu_time"]
def c(name, key):
    b = med.get(name)
    return None if b is None else b.get(key)
def f(v, fmt="{:.1f}"):
    return "-" if v is None else fmt.format(v)
target = data.get("context", {}).get("hwy_target", "?")
print(f"hashing kernels on Highway target {target}")
print()
cpu = data.get("context", {}).get("poise_cpu", "?")
print(f"goals of the pick engine, paired in one process (thread CPU time, "
      f"rotating blocks of 64 keys): {cpu}, kernels on {target}")
print("| figure | n | measured | goal | met |")
print("|---|---:|---:|---|---|")
def goal(figure, n, value, fmt, limit, text):
    met = "-" if value is None else ("yes" if value <= limit else "no")
    print(f"| {figure} | {n} | {f(value, fmt)} | {text} | {met} |")
def paired(n, key):
    return c(f"BM_PairedPicks/{n}", key)
def engine(n, key):
    name = "BM_PairedApi" if key.startswith("api_") else "BM_PairedPicker"
    return c(f"{name}/{n}", key)
for n in (10, 100, 1000):
    goal("picker: bounded, half at their bound / weighted", n,
         engine(n, "half_over_unbounded"), "{:.2f}x", 1.5, "<= 1.5x")
for n in (100, 1000):
    goal("picker: a retry's second choice / a first attempt", n,
         engine(n, "retry_over_first"), "{:.2f}x", 1.3, "<= 1.3x")
for n in (100, 1000):
    goal("API: DecideNth(..., 1, ...) / Pick (IdentityTable)", n,
         engine(n, "api_nth_over_pick"), "{:.2f}x", 1.5, "<= 1.5x")
    goal("API: Decide, half at their bound / Pick", n,
         engine(n, "api_decide_over_pick"), "{:.2f}x", 1.5, "<= 1.5x")
ring_limit = 1.15 if target == "AVX3" else 1.5
goal("one weight / ring", 100, paired(100, "one_over_ring"), "{:.2f}x",
     ring_limit, f"<= {ring_limit}x on {target}")
for n in (3, 10, 100, 1000):
    d, p = t(f"BM_PreparedPick/{n}"), t(f"BM_PreparedPickPortableKernel/{n}")
    goal(f"one weight: {target} / portable target", n,
         d / p if d and p else None, "{:.2f}x", 1.0, "<= 1x")
print()
print("what the half-full ratio is made of: the weighted pick plus a slot's "
      "atomics (its counter's compare-exchange, the scope total's increment, "
      "both undone), over the weighted pick; and the ratio with each pick "
      "fenced (lfence: no pick overlaps the last one's tail, as in a call), "
      "where the weighted pick no longer hides its key's hashing")
print("| n | slot's atomics / weighted | weighted ns | weighted ns, fenced "
      "| half / weighted, fenced | retry / first, fenced |")
print("|---:" * 6 + "|")
for n in (10, 100, 1000):
    fenced = lambda key: c(f"BM_PairedPickerFenced/{n}", key)
    print(f"| {n} | {f(engine(n, 'slot_floor_over_unbounded'), '{:.2f}x')} "
          f"| {f(engine(n, 'weighted_ns'))} | {f(fenced('weighted_ns'))} "
          f"| {f(fenced('half_over_unbounded'), '{:.2f}x')} "
          f"| {f(fenced('retry_over_first'), '{:.2f}x')} |")
print()
print("the picker's picks (paired ns, one weight): weighted, bounded first "
      "attempt and retry idle and with half the backends at their bound, "
      "the ring; the public API over an IdentityTable")
print("| n | weighted | first | retry | half: first | half: retry | ring "
      "| API Pick | API Decide (half) | API DecideNth 1 (half) |")
print("|---:" * 10 + "|")
for n in (3, 10, 100, 1000):
    keys = ("weighted_ns", "first_ns", "retry_ns", "half_first_ns",
            "half_retry_ns", "ring_ns", "api_pick_ns", "api_decide_ns",
            "api_nth_ns")
    print(f"| {n} | " + " | ".join(f(engine(n, k)) for k in keys) + " |")
# The README's results: this run's figures, the host and the target named.
def size(b):
    return "-" if b is None else (f"{b / 2**20:.1f} MiB" if b >= 2**20
                                  else f"{b / 2**10:.0f} KiB")
def ns(v):
    return "-" if v is None else (f"{v / 1000:.2f} µs" if v >= 1000
                                  else f"{v:.0f} ns")
with open(sys.argv[2], "w") as readme:
    print(f"Picks: medians of `bench/run.sh` on {cpu} (Highway's {target} "
          "kernels), one process; the", file=readme)
    print("picker's figures are `router::Picker::Pick` as the gRPC policy "
          "runs it.", file=readme)
    print("", file=readme)
    print("| n backends | pick, one weight | pick, two weights "
          "| ring pick, `ring_hash`-style | bounded, half the backends at "
          "their bound (picker) | a retry's second choice (picker) "
          "| identity table (one per process) |", file=readme)
    print("|---:|---:|---:|---:|---:|---:|---:|", file=readme)
    for n in (3, 10, 100, 1000):
        table = c(f"BM_TableBuild/{n}", "table_bytes")
        print(f"| {n} | {ns(paired(n, 'one_ns'))} | {ns(paired(n, 'two_ns'))} "
              f"| {ns(paired(n, 'ring_ns'))} "
              f"| {ns(engine(n, 'half_first_ns'))} "
              f"| {ns(engine(n, 'retry_ns'))} | {size(table)} |", file=readme)
print()
print("the same picks' ns (paired): one weight, two, three (general), ring")
print("| n | one | two | general | ring |")
print("|---:|---:|---:|---:|---:|")
for n in (3, 10, 100, 1000):
    print(f"| {n} | {f(paired(n, 'one_ns'))} | {f(paired(n, 'two_ns'))} "
          f"| {f(paired(n, 'general_ns'))} | {f(paired(n, 'ring_ns'))} |")
print()
print("RouteWithTotal saturated (paired ns): the route, the same pick reading "
      "every load once the owner is full, the walk reading only what it "
      "visits; ratios over reading every load")
print("| weights | full | n | route | reading every load | walk | route ratio "
      "| walk ratio |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
for weights in (1, 2):
    for pct in (50, 90):
        for n in (3, 10, 100, 1000):
            name = f"BM_PairedSaturated/{n}/{pct}/{weights}"
            print(f"| {weights} | {pct}% | {n} | {f(c(name, 'route_ns'))} "
                  f"| {f(c(name, 'read_all_ns'))} | {f(c(name, 'walk_ns'))} "
                  f"| {f(c(name, 'ratio'), '{:.2f}')} "
                  f"| {f(c(name, 'walk_ratio'), '{:.2f}')} |")
print()
print("median of 5 repetitions; ns per pick (cpu time); ns/cand = ns per pick / n")
# b_name: the bounded decision (for the prepared lists RouteWithTotal,
# given the sum of the loads and the in-flight counters: what the router
# runs).
for title, u_name, b_name in (
        ("one weight, through PreparedCandidates (what the gRPC picker runs "
         "when all backends have one weight; bounded = RouteWithTotal)",
         "BM_PreparedPick", "BM_PreparedRouteWithTotal"),
        ("two weights, through PreparedCandidates (what the gRPC picker runs "
         "when the backends have exactly two weights; bounded = "
         "RouteWithTotal)",
         "BM_PreparedPickTwoWeights", "BM_PreparedRouteWithTotalTwoWeights"),
        ("the general path with an IdentityTable, on the same two weights "
         "(what the gRPC picker runs for three or more weights)",
         "BM_UnboundedTable", "BM_BoundedTable"),
        ("hashing the identities on every pick (candidate list only)",
         "BM_Unbounded", "BM_Bounded")):
    print()
    print(title)
    print("| n | unbounded | ns/cand | bounded 0% | bounded 50% | bounded 90% "
          "| 50%/unbounded | spill 50% | spill 90% | ring 1024+ "
          "| argmax floor | floor ns/cand |")
    print("|---:" * 12 + "|")
    for n in (3, 10, 100, 1000):
        u = t(f"{u_name}/{n}")
        b = [t(f"{b_name}/{n}/{p}") for p in (0, 50, 90)]
        a = t(f"BM_ArgmaxFloor/{n}")
        ratio = b[1] / u if u and b[1] else None
        print(f"| {n} | {f(u)} | {f(u / n if u else None, '{:.2f}')} | {f(b[0])} "
              f"| {f(b[1])} | {f(b[2])} | {f(ratio, '{:.2f}')} "
              f"| {f(c(f'{b_name}/{n}/50', 'spill_rate'), '{:.2f}')} "
              f"| {f(c(f'{b_name}/{n}/90', 'spill_rate'), '{:.2f}')} "
              f"| {f(t(f'BM_Ring/{n}'))} | {f(a)} "
              f"| {f(a / n if a else None, '{:.2f}')} |")
print()
print(f"one weight, the pick by kernel target (same process): {target} and "
      "the portable target (what a CPU without any SIMD target runs)")
print(f"| n | {target} | portable | portable / {target} |")
print("|---:|---:|---:|---:|")
for n in (3, 10, 100, 1000):
    d, s = t(f"BM_PreparedPick/{n}"), t(f"BM_PreparedPickPortableKernel/{n}")
    print(f"| {n} | {f(d)} | {f(s)} | {f(s / d if d and s else None, '{:.2f}')} |")
print()
print("bounded (50% saturated) over unbounded, paired: Pick, "
      "RouteWithTotal (given the sum of the loads and the counters) and the "
      "general decision (Decide through the table) on one prepared list, "
      "rotating timed blocks of the same 64 keys (the separate medians above "
      "move with each benchmark's memory layout)")
print("| n | one weight, RouteWithTotal | one weight, general "
      "| two weights, RouteWithTotal | two weights, general |")
print("|---:|---:|---:|---:|---:|")
for n in (3, 10, 100, 1000):
    one, two = f"BM_PairedRatio/{n}/50", f"BM_PairedRatioTwoWeights/{n}/50"
    print(f"| {n} | {f(c(one, 'ratio'), '{:.2f}')} "
          f"| {f(c(one, 'general_ratio'), '{:.2f}')} "
          f"| {f(c(two, 'ratio'), '{:.2f}')} "
          f"| {f(c(two, 'general_ratio'), '{:.2f}')} |")
print()
print("| n | snapshot build (candidates, counters, PreparedCandidates) ns "
      "| IdentityTable build (every identity hashed) ns | ring build ns |")
print("|---:|---:|---:|---:|")
for n in (10, 100, 1000):
    print(f"| {n} | {f(t(f'BM_SnapshotBuild/{n}'), '{:.0f}')} "
          f"| {f(t(f'BM_TableBuild/{n}'), '{:.0f}')} "
          f"| {f(t(f'BM_RingBuild/{n}'), '{:.0f}')} |")
print()
print("address update changing 1 of n identities through the identity store "
      "(the others' rows alive): ns, identities hashed and table bytes "
      "written per update, and its share of a full IdentityTable build")
print("| n | kernel | update ns | hashed | bytes written | full build ns "
      "| update / full build |")
print("|---:|---|---:|---:|---:|---:|---:|")
for n, kernel, suffix in ((10, target, ""), (100, target, ""),
                          (1000, target, ""),
                          (1000, "portable", "PortableKernel")):
    u = t(f"BM_TableUpdate{suffix}/{n}")
    full = t(f"BM_TableBuild{suffix}/{n}")
    print(f"| {n} | {kernel} | {f(u, '{:.0f}')} "
          f"| {f(c(f'BM_TableUpdate{suffix}/{n}', 'identities_hashed'), '{:.0f}')} "
          f"| {f(c(f'BM_TableUpdate{suffix}/{n}', 'table_bytes_written'), '{:.0f}')} "
          f"| {f(full, '{:.0f}')} | {f(u / full if u and full else None, '{:.3f}')} |")
print()
print("| in-flight acquire+release (wall ns per op per thread) | 1 thread | 2 threads |")
print("|---|---:|---:|")
for kind, label in (("Same", "one shared counter"), ("Separate", "counter per thread")):
    r = [t(f"BM_InFlight{kind}/real_time/threads:{k}", real=True) for k in (1, 2)]
    print(f"| {label} | {f(r[0])} | {f(r[1])} |")
PY
echo
echo "the README's results, from this run ($(date -u '+%Y-%m-%d %H:%M UTC')):"
cat "$readme_block"
# README=update writes them into the README, between its results markers.
if [[ ${README:-} == update ]]; then
  python3 - "$root/README.md" "$readme_block" <<'PY'
import sys
readme, block = open(sys.argv[1]).read(), open(sys.argv[2]).read()
begin, end = "<!-- results: bench/run.sh -->\n", "<!-- /results -->"
a, b = readme.index(begin) + len(begin), readme.index(end)
open(sys.argv[1], "w").write(readme[:a] + block + readme[b:])
PY
  echo "README.md: results updated"
fi

# The key cache (keyCache): each figure of its goals beside the goal, from
# poise_key_cache_bench (gRPC-free; about 2 minutes; KEYCACHE=0 skips it).
if [[ ${KEYCACHE:-1} != 0 ]]; then
  cmake --build "$build" -j2 --target poise_key_cache_bench >/dev/null
  kc="$build/bench/key_cache_bench.json"
  "$build/bench/poise_key_cache_bench" --benchmark_repetitions=3 \
    --benchmark_min_time=0.3 --benchmark_out="$kc" \
    --benchmark_out_format=json >/dev/null
  python3 - "$kc" <<'PY'
import json, statistics, sys
runs = {}
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("run_type") == "iteration":
        runs.setdefault(b["run_name"], []).append(b)
def counter(name, key):
    values = [r[key] for r in runs.get(name, []) if key in r]
    if not values: return None
    return statistics.median(values), min(values), max(values)
def show(v, fmt):
    if v is None: return "-"
    return f"{fmt.format(v[0])} ({fmt.format(v[1])}-{fmt.format(v[2])})"
def verdict(v, ok):
    return "-" if v is None else ("met" if ok(v[0]) else "not met")
print()
print("key cache (keyCache): median of 3 runs (range); thread CPU time, "
      "paired blocks of 1,024 picks; Zipf s = 1.1 over 100,000 distinct "
      "36-byte keys, \"keyCache\": true (16,384 entries)")
print("| figure | n | policy, weights | measured | goal | |")
print("|---|---:|---|---:|---:|---|")
for n in (100, 256, 1000):
    for bounded in (0, 1):
        for w in (1, 2):
            name = f"BM_ZipfPaired/{n}/{bounded}/{w}/0"
            policy = ("bounded" if bounded else "weighted") + \
                f", {'one weight' if w == 1 else 'two weights'}"
            hit = counter(name, "hit_rate")
            print(f"| hit rate | {n} | {policy} | {show(hit, '{:.3f}')} "
                  f"| printed | |")
            speed = counter(name, "ratio")
            goal = "≥ 5×" if n == 1000 else "-"
            ok = verdict(speed, lambda x: x >= 5) if n == 1000 else ""
            print(f"| mean pick: today's / cached | {n} | {policy} "
                  f"| {show(speed, '{:.2f}')} | {goal} | {ok} |")
for entries in (32768, 65536):
    name = f"BM_ZipfPaired/1000/0/1/{entries}"
    hit, speed = counter(name, "hit_rate"), counter(name, "ratio")
    print(f"| hit rate, keyCache {entries} | 1000 | weighted, one weight "
          f"| {show(hit, '{:.3f}')} | printed | |")
    print(f"| mean pick: today's / cached, keyCache {entries} | 1000 "
          f"| weighted, one weight | {show(speed, '{:.2f}')} | - | |")
for n in (100, 1000):
    name = f"BM_HitVsRing/{n}"
    r = counter(name, "hit_over_ring")
    hit, ring = counter(name, "hit_ns"), counter(name, "ring_ns")
    print(f"| a hit / a ring pick (ns: {show(hit, '{:.1f}')} / "
          f"{show(ring, '{:.1f}')}) | {n} | weighted, one weight "
          f"| {show(r, '{:.2f}')} | ≤ 1 | {verdict(r, lambda x: x <= 1)} |")
for n in (64, 100, 256, 1000):
    for bounded in (0, 1):
        name = f"BM_DistinctPaired/{n}/{bounded}"
        r = counter(name, "on_over_off")
        policy = "bounded" if bounded else "weighted"
        print(f"| distinct keys: cache on / off | {n} | {policy}, one weight "
              f"| {show(r, '{:.3f}')} | ≤ 1 (never loses) "
              f"| {verdict(r, lambda x: x <= 1)} |")
PY
fi

# End-to-end: real local channels, the policies vs round_robin. Needs the
# policies and the example backends, so the same build directory is
# reconfigured with them on.
if [[ ${E2E:-1} != 0 ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPOISE_BUILD_GRPC=ON \
    -DPOISE_BUILD_EXAMPLES=ON -DPOISE_BUILD_BENCHMARKS=ON >/dev/null
  cmake --build "$build" -j2 --target poise_e2e_bench >/dev/null
  echo
  # shellcheck disable=SC2086
  "$build/bench/poise_e2e_bench" ${E2E_ARGS:-}
fi

# Memory: many channels to the same READY backends, each policy in a fresh
# process (bench/memory_bench.cc).
if [[ ${MEMORY:-1} != 0 ]]; then
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPOISE_BUILD_GRPC=ON \
    -DPOISE_BUILD_EXAMPLES=ON -DPOISE_BUILD_BENCHMARKS=ON >/dev/null
  cmake --build "$build" -j2 --target poise_memory_bench >/dev/null
  if [[ -n ${MEMORY_BASE:-} ]]; then
    base=$(mktemp -d)
    trap 'rm -rf "$base"' EXIT
    git -C "$root" archive "$MEMORY_BASE" | tar -x -C "$base"
    mkdir -p "$base/third_party"
    ln -sfn "$(readlink -f "$root/third_party/grpc-src")" "$base/third_party/grpc-src"
    cp "$root/bench/memory_bench.cc" "$root/bench/CMakeLists.txt" "$base/bench/"
    cmake -S "$base" -B "$base/build" -DCMAKE_BUILD_TYPE=Release \
      -DPOISE_BUILD_GRPC=ON -DPOISE_BUILD_EXAMPLES=ON \
      -DPOISE_BUILD_BENCHMARKS=ON >/dev/null
    cmake --build "$base/build" -j2 --target poise_memory_bench >/dev/null
    echo
    echo "$MEMORY_BASE:"
    "$base/build/bench/poise_memory_bench"
  fi
  echo
  echo "this checkout:"
  "$build/bench/poise_memory_bench"
fi

# Instruction counts (callgrind): an address update vs a full table build,
# then the end-to-end instructions per call.
if command -v valgrind >/dev/null; then
  if [[ ${IR:-1} != 0 ]]; then
    cmake --build "$build" -j2 --target poise_table_update_ir >/dev/null
    ir=$(mktemp -d)
    reps=5
    (cd "$ir" && valgrind --tool=callgrind --instr-atstart=no \
      "$build/bench/poise_table_update_ir" 1000 "$reps" >/dev/null 2>&1)
    echo
    echo "identity table, n = 1000, instructions (callgrind: kernels on AVX2 at most), per operation"
    echo "| operation | Ir | of a full build |"
    echo "|---|---:|---:|"
    full=
    for f in "$ir"/callgrind.out.*.*; do
      name=$(sed -n 's/^desc: Trigger: Client Request: //p' "$f")
      total=$(sed -n 's/^totals: //p' "$f")
      per=$((total / reps))
      [[ -z $full ]] && full=$per
      echo "| $name | $per | $(awk -v a="$per" -v b="$full" 'BEGIN{printf "%.1f %%", 100*a/b}') |"
    done
    rm -rf "$ir"
  fi
  if [[ ${IR:-1} != 0 ]]; then
    echo
    echo "the picker's picks, instructions (callgrind: kernels on AVX2 at most)"
    BUILD_DIR=$build "$root/bench/picker_ir.sh" 10 100
  fi
  if [[ ${CALLGRIND:-1} != 0 ]]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DPOISE_BUILD_GRPC=ON \
      -DPOISE_BUILD_EXAMPLES=ON -DPOISE_BUILD_BENCHMARKS=ON >/dev/null
    cmake --build "$build" -j2 --target poise_e2e_bench >/dev/null
    echo
    # shellcheck disable=SC2086
    BUILD=$build "$root/bench/callgrind.sh" 2000 ${CALLGRIND_SIZES:-3 10 100}
  fi
fi
