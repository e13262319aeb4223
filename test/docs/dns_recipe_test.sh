#!/usr/bin/env bash
# Runs the dnsmasq recipe of docs/dns.md as written (the block between its
# recipe markers), in BUILD_DIR, on free ports, and checks what it prints:
# every key of the example client served, each by one pod three times.
#   dns_recipe_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
source_dir=$1 build_dir=$2
work=$(mktemp -d)
recipe=$work/recipe.sh
pgid=
# The recipe runs in a process group of its own: stop all of it on any exit
# (its own kill does not run when it fails or times out).
cleanup() {
  trap - EXIT
  [[ -n $pgid ]] && kill -KILL -- "-$pgid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
sed -n '/<!-- recipe: dnsmasq/,/<!-- end recipe -->/p' "$source_dir/docs/dns.md" |
  sed -n '/^```sh$/,/^```$/p' | sed '1d;$d' >"$recipe"
[[ -s $recipe ]] || { echo "no recipe block in docs/dns.md" >&2; exit 1; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
export PORT DNS_PORT
PORT=$(free_port)
DNS_PORT=$(free_port)
cd "$build_dir"
setsid bash "$recipe" >"$work/out" 2>&1 &
pgid=$!
for _ in $(seq 600); do  # 60 s
  kill -0 "$pgid" 2>/dev/null || break
  sleep 0.1
done
if kill -0 "$pgid" 2>/dev/null; then
  cat "$work/out"
  echo "the recipe did not finish within 60 s" >&2
  exit 1
fi
status=0
wait "$pgid" || status=$?
out=$(cat "$work/out")
echo "$out"
served=$(grep -c -- '-> backend web-[01]$' <<<"$out" || true)
[[ $served == 15 ]] || { echo "expected 15 calls served by web-0 or web-1, got $served" >&2; exit 1; }
for key in customer-1 customer-2 customer-3 customer-42 customer-7; do
  pods=$(grep "^$key " <<<"$out" | awk '{print $NF}' | sort -u | wc -l)
  [[ $pods == 1 ]] || { echo "$key went to $pods pods" >&2; exit 1; }
done
echo "dns recipe: ok (exit $status)"
