# Cross build for 64-bit ARM Linux with Debian's toolchain
# (g++-aarch64-linux-gnu) and multiarch libraries (libabsl-dev:arm64 in
# /usr/lib/aarch64-linux-gnu; Highway is built from its sources, as on
# x86-64); tools/test-arm64.sh uses it. Tests run under qemu-user: CMAKE_CROSSCOMPILING_EMULATOR is what ctest
# and gtest_discover_tests put in front of every test binary.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# Multiarch: CMake looks in lib/aarch64-linux-gnu (packages' config files,
# libraries) and never in the host's lib/x86_64-linux-gnu.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# The binaries load the multiarch runtime (libc6:arm64, /lib/ld-linux-
# aarch64.so.1): "-L /". With "-L /usr/aarch64-linux-gnu" the loader would
# come from the cross toolchain's libc and libc.so.6 from the multiarch one,
# two glibc builds that hang in the first pthread_create. The CPU qemu
# emulates comes from QEMU_CPU (unset: "max", with SVE and SVE2;
# QEMU_CPU=cortex-a72: NEON without SVE).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)
