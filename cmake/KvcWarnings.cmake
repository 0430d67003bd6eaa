# Warnings for every target of the project (C11, gcc and clang); errors only
# with KVC_WERROR (on in the CI presets), so a user's newer compiler never
# breaks their build over a new warning.
function(kvc_warnings target)
  if(CMAKE_C_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow -Wstrict-prototypes
                                             -Wmissing-prototypes -Wvla -Wno-unused-function)
    if(KVC_WERROR)
      target_compile_options(${target} PRIVATE -Werror)
    endif()
  endif()
endfunction()
