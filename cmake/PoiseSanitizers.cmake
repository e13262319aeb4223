# POISE_SANITIZE=address: ASan + UBSan over everything we build.
# POISE_SANITIZE=thread:  TSan (system gRPC is uninstrumented; see test/tsan.supp).
if(POISE_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
elseif(POISE_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
elseif(NOT POISE_SANITIZE STREQUAL "")
  message(FATAL_ERROR "POISE_SANITIZE must be '', 'address' or 'thread', not '${POISE_SANITIZE}'")
endif()
