# Highway 1.0.3 for the hashing kernels (src/core/hash_kernels.cc), built into
# poise_core: no program that links poise loads libhwy.so.
#
# Why not Debian's libhwy.so: it runs a static initializer when it is loaded
# (nanobenchmark.cc calibrates its timer with rdtscp), before main, in every
# process that links it; valgrind 3.19 does not decode rdtscp on AMD Zen 4/5,
# so every such program dies under valgrind there. The kernels need only
# Highway's target detection and dispatch (hwy/targets.cc, hwy/per_target.cc),
# which do their work at the first dispatch, not at load time.
#
# tools/setup.sh unpacks the Debian source package of the installed
# libhwy-dev into third_party/highway-src; its headers and those two files are
# all this uses. The namespace `hwy` is compiled as `poise_hwy` (in the
# kernels and the two files alike), so a program may also link its own
# Highway, of any version, without two definitions of one symbol.
set(POISE_HIGHWAY_SOURCE_DIR "${PROJECT_SOURCE_DIR}/third_party/highway-src"
  CACHE PATH "Highway source tree (Debian source package highway, tools/setup.sh)")

set(_poise_hwy_header "${POISE_HIGHWAY_SOURCE_DIR}/hwy/highway.h")
if(NOT EXISTS "${_poise_hwy_header}")
  message(FATAL_ERROR
    "Highway's sources are missing: ${POISE_HIGHWAY_SOURCE_DIR} has no hwy/highway.h.\n"
    "Run tools/setup.sh, which unpacks the Debian source package of the installed libhwy-dev there.")
endif()
file(STRINGS "${_poise_hwy_header}" _poise_hwy_lines REGEX "^#define HWY_(MAJOR|MINOR|PATCH) [0-9]+")
string(REGEX REPLACE "[^0-9;]*([0-9]+)[^;]*" "\\1" _poise_hwy_parts "${_poise_hwy_lines}")
string(REPLACE ";" "." POISE_HIGHWAY_VERSION "${_poise_hwy_parts}")
if(NOT POISE_HIGHWAY_VERSION VERSION_EQUAL 1.0.3)
  message(FATAL_ERROR
    "Highway source tree version '${POISE_HIGHWAY_VERSION}' (${POISE_HIGHWAY_SOURCE_DIR}): the kernels "
    "are written for 1.0.3 (Debian 12). Remove that folder and run tools/setup.sh.")
endif()

# poise_highway: Highway's headers, and its namespace renamed, for whatever
# compiles Highway code into poise (the kernels and the runtime below).
add_library(poise_highway INTERFACE)
target_include_directories(poise_highway SYSTEM INTERFACE
  $<BUILD_INTERFACE:${POISE_HIGHWAY_SOURCE_DIR}>)
target_compile_definitions(poise_highway INTERFACE $<BUILD_INTERFACE:hwy=poise_hwy>)

# Highway's run-time target detection, as objects of poise_core.
add_library(poise_highway_runtime OBJECT
  "${POISE_HIGHWAY_SOURCE_DIR}/hwy/targets.cc"
  "${POISE_HIGHWAY_SOURCE_DIR}/hwy/per_target.cc")
target_link_libraries(poise_highway_runtime PRIVATE poise_highway)
set_target_properties(poise_highway_runtime PROPERTIES POSITION_INDEPENDENT_CODE ON)
