#!/usr/bin/env bash
# The fleet comparison of serverLoad on real processes: B backend processes
# (poise-fleet-backend) and C client processes (poise-fleet-client), each
# client its own channel with K calls in flight, the hot key "hot" with
# probability H in every client and Zipf(1.0) keys over 100,000 otherwise.
# Four runs: LOCAL (no serverLoad), FLEET per-call (outOfBandInterval "0s"),
# FLEET out-of-band and ADMISSION (out-of-band with serverLoad.admission: the
# backends refuse a call over the bound its client sent, and the retry goes
# to the key's next choice with room). Each backend measures its own calls in flight over
# the window (peak and time-weighted average); the table compares the
# maximum over backends with the global bound ceil(f C K w / (100 W)).
#
#   bench/fleet.sh [--build DIR] [--seconds 10] [--clients 16] [--backends 6]
#                  [--in-flight 1] [--hot-share 0.7] [--call-ms 20]
#                  [--oob-interval 0.01s] [--max-report-age 1s]
#                  [--modes "local fleet-per-call fleet-oob fleet-admission"]
#
# The goals: FLEET out-of-band's time-averaged maximum <= bound + 1, and
# LOCAL's >= 2 x bound; ADMISSION: every backend's peak <= bound + 1, refused
# calls <= 3 % of calls, 0 failed after the last attempt. Traffic stays on 127.0.0.0/8 (backend i listens on
# 127.0.0.(i+1)). Needs python3 for the table. Exit status 0 when the goal is
# met.
set -euo pipefail

here="$(cd "$(dirname "$0")/.." && pwd)"
build="$here/build"
seconds=10
clients=16
backends=6
in_flight=1
hot_share=0.7
call_ms=20
oob_interval=0.01s
max_report_age=1s
modes="local fleet-per-call fleet-oob fleet-admission"
factor=150
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --clients) clients="$2"; shift 2 ;;
    --backends) backends="$2"; shift 2 ;;
    --in-flight) in_flight="$2"; shift 2 ;;
    --hot-share) hot_share="$2"; shift 2 ;;
    --call-ms) call_ms="$2"; shift 2 ;;
    --oob-interval) oob_interval="$2"; shift 2 ;;
    --max-report-age) max_report_age="$2"; shift 2 ;;
    --modes) modes="$2"; shift 2 ;;
    *) echo "usage: $0 [--build DIR] [--seconds S] [--clients C] [--backends B] [--in-flight K] [--hot-share H] [--call-ms MS] [--oob-interval D] [--max-report-age D] [--modes \"local fleet-per-call fleet-oob fleet-admission\"]" >&2
       exit 2 ;;
  esac
done
backend_bin="$build/tools/poise-fleet-backend"
client_bin="$build/tools/poise-fleet-client"
for b in "$backend_bin" "$client_bin"; do
  [[ -x "$b" ]] || { echo "missing $b: cmake --build $build --target poise-fleet-backend poise-fleet-client" >&2; exit 2; }
done

work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

run_mode() {
  local mode="$1" dir="$work/$1"
  mkdir -p "$dir"
  pids=()
  local warm_ms=$((2000 + 150 * clients))
  local window_ms
  window_ms=$(python3 -c "print(int($seconds * 1000))")
  local start_ms=$(($(date +%s%3N) + warm_ms))
  # The backends measure from half a second after the clients start (the
  # clients' first calls settle) to the clients' end.
  local settle_ms=500
  local backend_pids=()
  local admission=()
  [[ $mode == fleet-admission ]] && admission=(--admission)
  for ((i = 0; i < backends; i++)); do
    "$backend_bin" --ip "127.0.0.$((i + 1))" --call-ms "$call_ms" "${admission[@]}" \
      --window-start-ms $((start_ms + settle_ms)) \
      --window-ms $((window_ms - settle_ms)) >"$dir/backend$i.out" 2>"$dir/backend$i.err" &
    backend_pids+=($!)
    pids+=($!)
  done
  local addresses=()
  for ((i = 0; i < backends; i++)); do
    local line=""
    for _ in $(seq 100); do
      line=$(grep -m1 '^listening on ' "$dir/backend$i.out" 2>/dev/null || true)
      [[ -n "$line" ]] && break
      sleep 0.05
    done
    [[ -n "$line" ]] || { echo "backend $i did not start" >&2; cat "$dir/backend$i.err" >&2; exit 1; }
    addresses+=("${line#listening on }")
  done
  local target="ipv4:$(IFS=,; echo "${addresses[*]}")"
  local client_pids=()
  for ((c = 0; c < clients; c++)); do
    "$client_bin" --target "$target" --mode "$mode" --in-flight "$in_flight" \
      --hot-share "$hot_share" --seconds "$seconds" --start-at-ms "$start_ms" \
      --oob-interval "$oob_interval" --max-report-age "$max_report_age" \
      --factor "$factor" --seed "$c" --label "client$c" \
      >"$dir/client$c.out" 2>"$dir/client$c.err" &
    client_pids+=($!)
    pids+=($!)
  done
  local failed=0
  for p in "${client_pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
  for p in "${backend_pids[@]}"; do kill -TERM "$p"; done
  for p in "${backend_pids[@]}"; do wait "$p" || failed=$((failed + 1)); done
  pids=()
  echo "$failed" >"$dir/failed"
}

for mode in $modes; do
  echo "running $mode: $clients clients x $in_flight in flight, $backends backends, ${seconds}s ..." >&2
  run_mode "$mode"
done

python3 - "$work" "$clients" "$in_flight" "$backends" "$factor" "$hot_share" "$modes" <<'EOF'
import json, math, os, sys
work, C, K, B, f, H, modes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6]), sys.argv[7].split()
bound = math.ceil(f * C * K / (100 * B))
def lines(path):
    out = []
    for l in open(path):
        l = l.strip()
        if l.startswith('{'):
            out.append(json.loads(l))
    return out
print(f"clients {C} x {K} in flight, {B} backends (equal weights), hot share {H}, f {f}: global bound ceil(f C K w / (100 W)) = {bound}")
print()
hdr = f"{'mode':<15} {'bound':>5}  {'per backend peak/avg':<60} {'max peak':>8} {'max avg':>7} {'owner share':>11} {'calls':>7} {'errors':>6} {'reports':>8} {'refused':>7} {'no-report picks':>15} {'admission refusals':>18} {'in-flight 0':>11}"
print(hdr)
results = {}
admission = None
for mode in modes:
    d = os.path.join(work, mode)
    bs = [lines(os.path.join(d, f"backend{i}.out"))[0] for i in range(B)]
    cs = [lines(os.path.join(d, f"client{c}.out"))[0] for c in range(C) if lines(os.path.join(d, f"client{c}.out"))]
    per = " ".join(f"{b['peak']}/{b['avg']:.2f}" for b in bs)
    max_peak = max(b['peak'] for b in bs)
    max_avg = max(b['avg'] for b in bs)
    hot = sum(c['hot_calls'] for c in cs)
    owner = sum(c['hot_to_owner'] for c in cs)
    share = owner / hot if hot else float('nan')
    calls = sum(c['calls'] for c in cs)
    errors = sum(c['errors'] for c in cs)
    reports = sum(c['load_reports'] for c in cs)
    refused = sum(c['refused_load_reports'] for c in cs)
    noreport = sum(c['picks_without_some_report'] for c in cs)
    refusals = sum(c.get('admission_refusals', 0) for c in cs)
    zero = all(c['in_flight_zero'] for c in cs) and len(cs) == C
    failed = int(open(os.path.join(d, "failed")).read())
    results[mode] = max_avg
    if mode == 'fleet-admission':
        sent = max(b.get('max_bound', 0) for b in bs)
        admission = (max_peak, refusals, calls, errors, sent)
    print(f"{mode:<15} {bound:>5}  {per:<60} {max_peak:>8} {max_avg:>7.2f} {share:>11.2f} {calls:>7} {errors:>6} {reports:>8} {refused:>7} {noreport:>15} {refusals:>18} {str(zero and failed == 0):>11}")
    first = next((c['first_error'] for c in cs if c['first_error']), '')
    if first:
        print(f"{'':<15} first error: {first}")
print()
ok = True
if 'fleet-oob' in results:
    g = results['fleet-oob'] <= bound + 1
    ok = ok and g
    print(f"goal FLEET out-of-band max avg {results['fleet-oob']:.2f} <= bound + 1 = {bound + 1}: {'met' if g else 'NOT met'}")
if 'fleet-per-call' in results:
    g = results['fleet-per-call'] <= bound + 1
    print(f"     FLEET per-call    max avg {results['fleet-per-call']:.2f} <= bound + 1 = {bound + 1}: {'met' if g else 'not met'} (not required)")
if 'local' in results:
    g = results['local'] >= 2 * bound
    ok = ok and g
    print(f"     LOCAL             max avg {results['local']:.2f} >= 2 x bound = {2 * bound}: {'met' if g else 'NOT met'}")
if admission is not None:
    max_peak, refusals, calls, errors, sent = admission
    share = 100.0 * refusals / calls if calls else float('nan')
    # What the backends hold exactly; the bounds are the clients' estimates.
    print(f"     ADMISSION the largest bound a client sent: {sent} "
          f"(global bound {bound}); no backend's peak above it: "
          f"{'yes' if max_peak <= sent else 'NO'}")
    for name, g, text in (
            ("peak", max_peak <= bound + 1, f"every backend's peak {max_peak} <= bound + 1 = {bound + 1}"),
            ("refused", share <= 3.0, f"refused {refusals} = {share:.1f} % of {calls} calls <= 3 %"),
            ("failed", errors == 0, f"failed after the last attempt {errors} = 0")):
        ok = ok and g
        print(f"     ADMISSION {text}: {'met' if g else 'NOT met'}")
sys.exit(0 if ok else 1)
EOF
