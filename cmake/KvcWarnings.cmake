# Warnings as errors for every target of the project (C11, gcc and clang).
function(kvc_warnings target)
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes
                                             -Wmissing-prototypes -Wvla -Wno-unused-function)
  endif()
endfunction()
