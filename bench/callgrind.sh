#!/usr/bin/env bash
# Instructions per call of the three policies, end to end, under callgrind.
#
# Usage: bench/callgrind.sh [CALLS] [N...]      (defaults: 2000; 3 10 100 1000)
#   BUILD=dir (default build/) holds poise_e2e_bench; OUT=dir keeps the
#   callgrind files (default: a temporary directory, removed at the end);
#   PATTERN=balanced uses poise_e2e_bench's balanced key order (default
#   stride; balanced needs >= 1 key per backend found, slow at n = 1000).
#
# For each n: `poise_e2e_bench --serve n` starts n echo backends in their own
# process, NOT under valgrind (so server work is not counted at all). The
# client `poise_e2e_bench --callgrind-target ...` runs under
#   valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes
# and makes one channel per policy (round_robin, weighted_rendezvous,
# bounded_load_rendezvous; header x-session-id), warms each up (every key
# twice, then CALLS more calls), then per policy makes CALLS sequential
# unary calls (the same keys in the same order for each policy) with
# instrumentation on only around them, dumping after each policy. Counted:
# every instruction any thread of the client process executes while those
# calls run (the calling thread, which in gRPC 1.51 also polls the socket,
# plus gRPC's background threads). Set-up, connection and warm-up are not.
#
# Printed per n and policy: Ir/call (all client threads), the calling
# thread's Ir/call, the difference to round_robin (Ir and %), and the parts,
# inclusive Ir/call from callgrind_annotate --inclusive=yes: the channel's
# pick (ClientChannel::LoadBalancedCall::PickSubchannelLocked, which calls
# the policy's picker: the only pick figure round_robin has, since Debian's
# libgrpc does not export its picker's symbol), our picker
# (RendezvousPicker::Pick), inside it the header lookup
# (LoadBalancedCall::Metadata::Lookup, twice: key and previous-attempts),
# poise::router::Picker::Pick, and the CallTracker (Start, Finish and the
# destructor, which frees the slot; the constructor is inlined into the
# picker). A part with no samples shows as "-".
#
# Why it is stable: instruction counts do not depend on the machine's speed,
# only on the path each call takes; what can still vary is how often
# gRPC's poller wakes up and how many events each epoll_wait returns, which
# depend on timing. Run it twice for one n to see the spread (docs/
# performance.md shows such a pair). ~50x slower than native: on a 2-core VM
# 2000 calls take about a minute per n for n = 3, 10 and 100; n = 1000 takes
# far longer (its warm-up connects 1000 subchannels per channel: > 10 min).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${BUILD:-$root/build}
bin=$build/bench/poise_e2e_bench
calls=${1:-2000}
shift || true
sizes=("$@")
((${#sizes[@]})) || sizes=(3 10 100 1000)
[[ -x $bin ]] || {
  echo "callgrind.sh: build $bin first" >&2
  exit 2
}
command -v valgrind >/dev/null || {
  echo "callgrind.sh: valgrind not installed" >&2
  exit 2
}

out=${OUT:-}
cleanup_out=0
if [[ -z $out ]]; then
  out=$(mktemp -d)
  cleanup_out=1
fi
mkdir -p "$out"
server_pid=
cleanup() {
  if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi
  if ((cleanup_out)); then rm -rf "$out"; fi
}
trap cleanup EXIT

# Inclusive Ir of the functions whose names match the regex $2 in file $1
# (summed over matching lines), from callgrind_annotate.
inclusive() {
  callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
    { grep -E "$2" || true; } | awk '{gsub(",", "", $1); s += $1} END {print s + 0}'
}
total() {
  callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ && !done {gsub(",", "", $1); print $1; done = 1}'
}

echo "callgrind: $calls measured calls per policy after warm-up, ${PATTERN:-stride} pattern; client threads only (backends in a separate, uninstrumented process)"
echo
echo "| n | policy | Ir/call (all client threads) | calling thread | vs round_robin | channel pick | RendezvousPicker::Pick | header lookup | router Pick | CallTracker | own work |"
echo "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---|"
for n in "${sizes[@]}"; do
  target_file=$out/target-$n
  "$bin" --serve "$n" >"$target_file" &
  server_pid=$!
  for _ in $(seq 600); do
    [[ -s $target_file ]] && break
    sleep 0.1
  done
  target=$(head -1 "$target_file")
  [[ -n $target ]] || {
    echo "callgrind.sh: backends for n=$n did not start" >&2
    exit 1
  }
  rm -f "$out"/callgrind.out.n"$n".*
  valgrind --tool=callgrind --instr-atstart=no --separate-threads=yes \
    --callgrind-out-file="$out/callgrind.out.n$n" \
    "$bin" --callgrind-target "$target" --callgrind-n "$n" --calls "$calls" --pattern "${PATTERN:-stride}" \
    >"$out/client-$n.log" 2>"$out/valgrind-$n.log" || {
    echo "callgrind.sh: client failed for n=$n (see $out)" >&2
    cat "$out/client-$n.log" >&2
    exit 1
  }
  kill "$server_pid" 2>/dev/null || true
  wait "$server_pid" 2>/dev/null || true
  server_pid=
  rr_ir=
  # Dumps 1, 2, 3 are round_robin, weighted_rendezvous, bounded_load_rendezvous.
  dump=0
  for policy in round_robin weighted_rendezvous bounded_load_rendezvous; do
    dump=$((dump + 1))
    ir=0
    main_ir=0
    chpick=0
    pick=0
    lookup=0
    rpick=0
    tracker=0
    for f in "$out/callgrind.out.n$n.$dump"-*; do
      t=$(total "$f")
      ir=$((ir + t))
      [[ $f == *-01 ]] && main_ir=$t
      chpick=$((chpick + $(inclusive "$f" 'LoadBalancedCall::PickSubchannelLocked\(')))
      pick=$((pick + $(inclusive "$f" 'RendezvousPicker::Pick\(')))
      lookup=$((lookup + $(inclusive "$f" 'LoadBalancedCall::Metadata::Lookup\(')))
      rpick=$((rpick + $(inclusive "$f" 'poise::router::Picker::Pick\(')))
      tracker=$((tracker + $(inclusive "$f" 'CallTracker::(~?CallTracker|Finish|Start)\(')))
    done
    per() { awk -v a="$1" -v c="$calls" 'BEGIN { if (a == 0) print "-"; else printf "%.0f", a / c }'; }
    if [[ $policy == round_robin ]]; then
      rr_ir=$ir
      rr_chpick=$chpick
      vs="reference"
      own="-"
    else
      vs=$(awk -v a="$ir" -v b="$rr_ir" -v c="$calls" 'BEGIN { printf "%+.0f (%+.2f %%)", (a - b) / c, 100 * (a - b) / b }')
      # Own work, what the goals hold (the total moves with the poller's
      # wake-ups): the channel pick past round_robin's, plus the tracker, as
      # a share of round_robin's Ir per call; beside it the goal.
      goal=$([[ $policy == weighted_rendezvous ]] && echo 2 || echo 3)
      own=$(awk -v p="$chpick" -v rp="$rr_chpick" -v t="$tracker" -v b="$rr_ir" -v g="$goal" 'BEGIN {
        o = 100 * (p - rp + t) / b
        printf "%+.2f %% (goal <= +%d %%: %s)", o, g, o <= g ? "met" : "missed" }')
    fi
    echo "| $n | $policy | $(per "$ir") | $(per "$main_ir") | $vs | $(per "$chpick") | $(per "$pick") | $(per "$lookup") | $(per "$rpick") | $(per "$tracker") | $own |"
  done
done
echo
echo "goals (own work): weighted_rendezvous <= +2 %, bounded_load_rendezvous <= +3 % of round_robin's Ir/call at n = 100 and 1000"
