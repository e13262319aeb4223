# gRPC 1.51.1 and the internal headers of exactly that version.
#
# Debian installs gRPC's public headers and libraries but not the LB-policy
# headers under src/core/. tools/setup.sh unpacks the Debian source package of
# the installed version into third_party/grpc-src; this module checks that the
# two agree and provides poise::grpc_internal, the interface target that code
# including src/core/... links to.
#
# Debian built gRPC without NDEBUG, and NDEBUG changes the layout of gRPC's
# ref-counted classes, so everything including src/core/... is compiled with
# -UNDEBUG (src/grpc/require_undebug.h turns a mistake into an #error).
find_package(gRPC 1.51.1 EXACT CONFIG REQUIRED)
find_package(Protobuf REQUIRED)
find_package(absl CONFIG REQUIRED)

set(POISE_GRPC_SOURCE_DIR "${PROJECT_SOURCE_DIR}/third_party/grpc-src"
  CACHE PATH "gRPC source tree of the installed version (internal headers)")

set(_poise_grpc_cmake "${POISE_GRPC_SOURCE_DIR}/CMakeLists.txt")
if(NOT EXISTS "${_poise_grpc_cmake}")
  message(FATAL_ERROR
    "gRPC's internal headers are missing: ${POISE_GRPC_SOURCE_DIR} has no CMakeLists.txt.\n"
    "Run tools/setup.sh, which unpacks the Debian source package of the installed gRPC there.")
endif()
file(STRINGS "${_poise_grpc_cmake}" _poise_version_line REGEX "^set\\(PACKAGE_VERSION +\"[0-9.]+\"\\)")
string(REGEX MATCH "[0-9]+\\.[0-9]+\\.[0-9]+" POISE_GRPC_SOURCE_VERSION "${_poise_version_line}")
if(NOT POISE_GRPC_SOURCE_VERSION VERSION_EQUAL gRPC_VERSION)
  message(FATAL_ERROR
    "gRPC source tree version '${POISE_GRPC_SOURCE_VERSION}' (${POISE_GRPC_SOURCE_DIR}) differs from "
    "the installed gRPC ${gRPC_VERSION}. The LB-policy API and object layouts change between releases: "
    "remove that folder and run tools/setup.sh to fetch the matching Debian source package.")
endif()

add_library(poise_grpc_internal INTERFACE)
add_library(poise::grpc_internal ALIAS poise_grpc_internal)
target_include_directories(poise_grpc_internal SYSTEM INTERFACE
  $<BUILD_INTERFACE:${POISE_GRPC_SOURCE_DIR}>)
target_compile_options(poise_grpc_internal INTERFACE -UNDEBUG)
target_link_libraries(poise_grpc_internal INTERFACE gRPC::grpc++ gRPC::grpc absl::statusor absl::strings)
