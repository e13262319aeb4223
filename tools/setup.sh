#!/usr/bin/env bash
# Prepares a Debian 12 machine to build poise-grpc:
#   1. installs the Debian packages the build, tests, fuzzers and tools need;
#   2. unpacks the sources of exactly the installed gRPC and Highway (Debian source
#      packages `grpc`, `highway`) into third_party/grpc-src and third_party/highway-src:
#      gRPC's LB-policy headers Debian does not install, Highway's target detection.
# Idempotent: when everything is already in place it returns in well under a second.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(
  g++ cmake make pkg-config dpkg-dev
  libgrpc++-dev libgrpc-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev libabsl-dev
  libhwy-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev clang-format clang-tidy gnuplot-nox valgrind
  dnsmasq-base libc-ares-dev openssl
  # tools/test-arm64.sh: the core cross-built for arm64, tested under qemu
  # (GoogleTest from the googletest package's sources).
  g++-aarch64-linux-gnu qemu-user libc6-dev:arm64 libabsl-dev:arm64
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

# fetch_source BINARY DIR VERSION_RE: unpacks the Debian source package of the
# installed package BINARY into DIR, after checking that the tree's upstream
# version (the first capture of VERSION_RE over its CMakeLists.txt) is the
# installed one. A stamp holding the installed Debian version makes it a no-op.
fetch_source() {
  local binary=$1 dir=$2 version_re=$3
  local source installed stamp="$2/.poise-source-version"
  # The native architecture's copy (a package may be installed for arm64 too).
  binary+=":$(dpkg --print-architecture)"
  source=$(dpkg-query -W -f='${source:Package}' "$binary")
  installed=$(dpkg-query -W -f='${source:Version}' "$binary")
  [[ -f $stamp && $(cat "$stamp") == "$installed" ]] && return 0
  ensure_deb_src
  echo "setup: fetching Debian source package $source=$installed"
  local work tree got
  work=$(mktemp -d)
  chmod 755 "$work" # lets apt's sandbox user write the download
  (cd "$work" && apt-get source -qq "$source=$installed" >/dev/null)
  tree=$(find "$work" -maxdepth 1 -mindepth 1 -type d -name "$source-*" | head -n1)
  [[ -n $tree ]] || { echo "setup: apt-get source $source produced no tree" >&2; rm -rf "$work"; exit 1; }
  got=$(sed -n "s/$version_re/\1/p" "$tree/CMakeLists.txt" | head -n1)
  if [[ $got != "${installed%%-*}" ]]; then
    echo "setup: source tree is $source $got but $binary is $installed" >&2
    rm -rf "$work"
    exit 1
  fi
  rm -rf "$dir"
  mkdir -p "$(dirname "$dir")"
  mv "$tree" "$dir"
  rm -rf "$work"
  echo "$installed" >"$stamp"
  echo "setup: $source $got source tree in ${dir#"$root"/}"
}

# A deb-src entry mirroring the machine's own deb entries, and fresh lists.
ensure_deb_src() {
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
  apt_updated=1
}

# gRPC: the LB-policy and ORCA sources Debian does not install.
fetch_source libgrpc-dev "$root/third_party/grpc-src" '^set(PACKAGE_VERSION *"\([0-9.]*\)").*'
# Highway: its target detection (hwy/targets.cc, hwy/per_target.cc), compiled
# into poise_core so that no program linking poise loads libhwy.so, whose
# load-time timer calibration valgrind cannot run on every CPU (README, Build).
fetch_source libhwy-dev "$root/third_party/highway-src" '^project(hwy VERSION \([0-9.]*\)).*'
