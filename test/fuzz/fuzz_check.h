// FUZZ_CHECK(cond): a libFuzzer crash that names the failed invariant (the
// fuzzers assert properties, not just the absence of crashes).
#ifndef POISE_TEST_FUZZ_FUZZ_CHECK_H_
#define POISE_TEST_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                      \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::fprintf(stderr, "invariant failed: %s (%s:%d)\n", #cond, __FILE__, \
                   __LINE__);                                                 \
      std::abort();                                                           \
    }                                                                         \
  } while (0)

#endif  // POISE_TEST_FUZZ_FUZZ_CHECK_H_
