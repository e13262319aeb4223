#!/usr/bin/env bash
# Builds and runs test/consumer against poise in one of two ways:
#   run.sh installed SOURCE_DIR BUILD_DIR WORK_DIR   cmake --install, then find_package
#   run.sh subdirectory SOURCE_DIR WORK_DIR          add_subdirectory of the source tree
#   run.sh pkgconfig SOURCE_DIR BUILD_DIR WORK_DIR   cmake --install, then a plain c++
#                                                    command with pkg-config's flags
#   run.sh valgrind SOURCE_DIR BUILD_DIR WORK_DIR    the pkgconfig program, run under
#                                                    valgrind (memcheck, callgrind)
#   run.sh headers SOURCE_DIR BUILD_DIR WORK_DIR     every installed header compiled
#                                                    alone with pkg-config's flags,
#                                                    warnings as errors, including
#                                                    no file the install lacks
set -euo pipefail
mode=$1 source=$2
if [[ $mode == headers ]]; then
  build=$3 work=$4
  rm -rf "$work" && mkdir -p "$work"
  cmake --install "$build" --prefix "$work/prefix" >/dev/null
  pc_dir=$(dirname "$(find "$work/prefix" -name poise.pc -print -quit)")
  export PKG_CONFIG_PATH=$pc_dir
  cflags=$(pkg-config --cflags poise)
  count=0
  for header in "$work"/prefix/include/poise/*.h; do
    name=poise/$(basename "$header")
    printf '#include "%s"\n' "$name" >"$work/alone.cc"
    # -H lists every file the header pulls in: none may come from the source
    # tree (a header the install does not carry would fail here only by
    # luck of the include path).
    # shellcheck disable=SC2086 # word splitting of the flags is intended
    if ! c++ -std=c++17 -Wall -Wextra -Wshadow -Wconversion -Werror -fsyntax-only -H \
      $cflags "$work/alone.cc" 2>"$work/included.txt"; then
      cat "$work/included.txt" >&2
      echo "$name does not compile alone" >&2
      exit 1
    fi
    # (The prefix itself may lie inside the source tree, in a build folder.)
    if grep -F "$source/" "$work/included.txt" | grep -vF "$work/prefix/" >&2; then
      echo "$name includes files from the source tree (above)" >&2
      exit 1
    fi
    count=$((count + 1))
  done
  ((count > 0)) || { echo "no header installed under $work/prefix/include/poise" >&2; exit 1; }
  echo "installed headers: $count compile alone"
  exit 0
fi
if [[ $mode == pkgconfig || $mode == valgrind ]]; then
  build=$3 work=$4
  rm -rf "$work" && mkdir -p "$work"
  cmake --install "$build" --prefix "$work/prefix" >/dev/null
  pc_dir=$(dirname "$(find "$work/prefix" -name poise.pc -print -quit)")
  [[ -f $pc_dir/poise.pc ]] || { echo "no poise.pc installed under $work/prefix" >&2; exit 1; }
  export PKG_CONFIG_PATH=$pc_dir
  cflags=$(pkg-config --cflags poise)
  # The language level is the consumer's: a C++20 build gets no -std=c++17.
  if [[ " $cflags " == *" -std="* ]]; then
    echo "poise.pc forces a language level: $cflags" >&2
    exit 1
  fi
  # shellcheck disable=SC2086 # word splitting of the flags is intended
  c++ -std=c++20 $cflags "$source/test/consumer/pkgconfig_main.cc" \
    -o "$work/consumer" $(pkg-config --libs poise)
  if [[ $mode == pkgconfig ]]; then
    "$work/consumer"
    exit 0
  fi
  # valgrind: the program runs under memcheck and callgrind on every host.
  # Debian's libhwy.so calibrates a timer with rdtscp when it is loaded,
  # which valgrind cannot decode on AMD Zen 4/5: no libhwy may be loaded.
  if ldd "$work/consumer" | grep -i hwy; then
    echo "the consumer loads Highway's shared library (above)" >&2
    exit 1
  fi
  grep -m1 '^cpu family' /proc/cpuinfo || true
  valgrind -q --error-exitcode=1 "$work/consumer"
  valgrind -q --tool=callgrind --callgrind-out-file="$work/callgrind.out" "$work/consumer"
  echo "valgrind consumer: ok"
  exit 0
fi
if [[ $mode == installed ]]; then
  build=$3 work=$4
  rm -rf "$work" && mkdir -p "$work"
  cmake --install "$build" --prefix "$work/prefix" >/dev/null
  cmake -S "$source/test/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$work/prefix" \
    -DECHO_PROTO="$source/proto/echo.proto" >/dev/null
else
  work=$3
  rm -rf "$work" && mkdir -p "$work"
  cmake -S "$source/test/consumer" -B "$work/consumer" -DPOISE_SOURCE_DIR="$source" \
    -DECHO_PROTO="$source/proto/echo.proto" >/dev/null
fi
cmake --build "$work/consumer" -j"$(nproc)" >/dev/null
"$work/consumer/consumer"
