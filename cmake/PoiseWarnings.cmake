# poise_warnings(target): the repository's warning set, fatal when POISE_WERROR.
function(poise_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wconversion)
  if(POISE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
