#!/usr/bin/env bash
# Issue 26's simulation goals: poise-sim --fleet at (C x k, n) = (16 x 1, 5),
# (100 x 2, 50), (1,000 x 1, 100) and (1,000 x 4, 100), with per-call reports
# only and with out-of-band reports every 1/10 and 1 mean call time. Prints
# LOCAL, FLEET, IDEAL and PLAIN (FLEET without its herding rule) and checks
# FLEET against the goals: time-averaged maximum <= 1.1 x the global bound B,
# peak <= 1.25 B + 1, owner share within 2 points of IDEAL's. Then ADMIT
# (FLEET with admission at the backends, issue 39) against its goals: peak
# <= B + 1, time-averaged maximum <= 1.05 B, refused <= 3 % of calls, 0
# failed after the last attempt, owner share within 2 points of IDEAL's.
# "IDEAL freed": the calls that ended on a backend at its bound, per call
# started (room every client may ask for at once; docs/fleet-bounds.md).
#   bench/fleet_sim.sh [poise-sim]    (default: build/tools/poise-sim)
#   DURATION=T SEEDS="1 2"            simulated call times per run, seeds
#   WARMUP=T                          call times not measured (default 1100:
#                                     past maxReportAge, 1000, so that clients
#                                     have lost and renewed reports as they
#                                     do in steady state)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
sim=${1:-$root/build/tools/poise-sim}
duration=${DURATION:-100}
warmup=${WARMUP:-1100}
seeds=${SEEDS:-1}

printf '%-12s %-9s %3s  %-22s %-22s %-22s %-22s %-30s %-22s %-16s %-14s %s\n' \
  "C x k, n" reports B "LOCAL peak/avg/owner" "FLEET peak/avg/owner" \
  "IDEAL peak/avg/owner" "PLAIN peak/avg/owner" \
  "FLEET goals (avg, peak, owner)" "ADMIT peak/avg/owner" "refused/failed" \
  "IDEAL freed" "ADMIT goals (peak, avg, refused, failed, owner)"
for config in "16 1 5" "100 2 50" "1000 1 100" "1000 4 100"; do
  read -r c k n <<<"$config"
  for oob in 0 0.1 1; do
    for seed in $seeds; do
      "$sim" --fleet --clients "$c" --calls "$k" --backends "$n" --oob "$oob" \
        --duration "$duration" --warmup "$warmup" --seed "$seed" --plain --admission --csv |
        awk -F, -v label="$c x $k, $n" -v oob="$oob" '
          NR == 1 { next }
          { peak[$1] = $7; avg[$1] = $8; owner[$1] = $12; bound = $6
            if ($1 == "ADMIT") { refused = $14; failed = $15 }
            if ($1 == "IDEAL") freed = $16 }
          END {
            reports = oob == 0 ? "per-call" : "oob " oob
            printf "%-12s %-9s %3d ", label, reports, bound
            split("LOCAL FLEET IDEAL PLAIN", modes, " ")
            for (i = 1; i <= 4; i++) {
              m = modes[i]
              printf " %5.0f/%6.2f/%5.1f%%     ", peak[m], avg[m], 100 * owner[m]
            }
            ok_avg = avg["FLEET"] <= 1.1 * bound
            ok_peak = peak["FLEET"] <= 1.25 * bound + 1
            d = 100 * (owner["FLEET"] - owner["IDEAL"])
            ok_owner = d >= -2 && d <= 2
            printf "%s %s %s (%+.1f)%-16s", ok_avg ? "met" : "MISSED",
                   ok_peak ? "met" : "MISSED", ok_owner ? "met" : "MISSED", d, ""
            printf " %5.0f/%6.2f/%5.1f%%     ", peak["ADMIT"], avg["ADMIT"],
                   100 * owner["ADMIT"]
            share = 100 * refused
            printf " %5.2f%%/%-8d ", share, failed
            printf " %5.1f%%        ", 100 * freed
            a_peak = peak["ADMIT"] <= bound + 1
            a_avg = avg["ADMIT"] <= 1.05 * bound
            a_refused = share <= 3
            a_failed = failed == 0
            da = 100 * (owner["ADMIT"] - owner["IDEAL"])
            a_owner = da >= -2 && da <= 2
            printf "%s %s %s %s %s (%+.1f)\n", a_peak ? "met" : "MISSED",
                   a_avg ? "met" : "MISSED", a_refused ? "met" : "MISSED",
                   a_failed ? "met" : "MISSED", a_owner ? "met" : "MISSED", da
          }'
    done
  done
done
