// Requires -UNDEBUG. Included first by every file of poise::grpc that
// includes gRPC's internal src/core/... headers.
//
// Debian built gRPC 1.51.1 without NDEBUG, and NDEBUG changes the layout of
// gRPC's ref-counted classes (debug-only trace members). Code compiled with
// NDEBUG would disagree with the shared library about object layouts and
// corrupt memory, so refuse to compile it. CMake adds -UNDEBUG for these
// files (cmake/PoiseGrpcInternal.cmake).
#ifndef POISE_SRC_GRPC_REQUIRE_UNDEBUG_H_
#define POISE_SRC_GRPC_REQUIRE_UNDEBUG_H_

#ifdef NDEBUG
#error "poise::grpc includes gRPC internals and must be compiled with -UNDEBUG"
#endif

#endif  // POISE_SRC_GRPC_REQUIRE_UNDEBUG_H_
