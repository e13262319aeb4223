#!/usr/bin/env bash
# Prepares a Debian 12 machine to build poise-grpc:
#   1. installs the Debian packages the build, tests, fuzzers and tools need;
#   2. unpacks the source of exactly the installed gRPC (Debian source package `grpc`)
#      into third_party/grpc-src, for the LB-policy headers Debian does not install.
# Idempotent: when everything is already in place it returns in well under a second.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
src_dir="$root/third_party/grpc-src"

packages=(
  g++ cmake make pkg-config dpkg-dev
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev libabsl-dev
  libhwy-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev clang-format clang-tidy gnuplot-nox valgrind
  dnsmasq-base libc-ares-dev openssl
  # tools/test-arm64.sh: the core cross-built for arm64, tested under qemu
  # (GoogleTest from the googletest package's sources).
  g++-aarch64-linux-gnu qemu-user libc6-dev:arm64 libabsl-dev:arm64 libhwy-dev:arm64
)

sudo_cmd=()
if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi

# The :arm64 packages come from Debian's multiarch archive; apt-get update
# (below, as a package is then missing) fetches its lists.
if ! dpkg --print-foreign-architectures | grep -qx arm64; then
  echo "setup: adding the arm64 architecture"
  "${sudo_cmd[@]}" dpkg --add-architecture arm64
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p")
done

apt_updated=0
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  "${sudo_cmd[@]}" apt-get update -qq
  apt_updated=1
  "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The gRPC source tree must match the installed library to the Debian revision's upstream version.
installed=$(dpkg-query -W -f='${source:Version}' libgrpc-dev)
want_upstream=${installed%%-*}
stamp="$src_dir/.poise-source-version"
if [[ -f $stamp && $(cat "$stamp") == "$installed" ]]; then
  exit 0
fi

# A deb-src entry mirroring the machine's own deb entries.
if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -qs '^deb-src' /etc/apt/sources.list; then
  echo "setup: adding a deb-src entry for bookworm"
  "${sudo_cmd[@]}" tee /etc/apt/sources.list.d/poise-deb-src.sources >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  apt_updated=0
fi
((apt_updated)) || "${sudo_cmd[@]}" apt-get update -qq

echo "setup: fetching Debian source package grpc=$installed"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work" # lets apt's sandbox user write the download
(cd "$work" && apt-get source -qq "grpc=$installed" >/dev/null)
tree=$(find "$work" -maxdepth 1 -mindepth 1 -type d -name 'grpc-*' | head -n1)
[[ -n $tree ]] || { echo "setup: apt-get source grpc produced no tree" >&2; exit 1; }
got=$(sed -n 's/^set(PACKAGE_VERSION *"\([0-9.]*\)").*/\1/p' "$tree/CMakeLists.txt")
if [[ $got != "$want_upstream" ]]; then
  echo "setup: source tree is gRPC $got but libgrpc-dev is $installed" >&2
  exit 1
fi
rm -rf "$src_dir"
mkdir -p "$root/third_party"
mv "$tree" "$src_dir"
echo "$installed" >"$stamp"
echo "setup: gRPC $got source tree in third_party/grpc-src"
