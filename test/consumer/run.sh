#!/usr/bin/env bash
# Builds and runs test/consumer against poise in one of two ways:
#   run.sh installed SOURCE_DIR BUILD_DIR WORK_DIR   cmake --install, then find_package
#   run.sh subdirectory SOURCE_DIR WORK_DIR          add_subdirectory of the source tree
set -euo pipefail
mode=$1 source=$2
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
