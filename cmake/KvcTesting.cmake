# kvc_add_test_exe(NAME <exe> SOURCES ... LABEL <label> CASES <case>... [LIBS ...])
# Builds one test executable and registers each case as its own ctest test
# named <label>.<exe>.<case>; exit code 77 means "skipped" (printed why).
function(kvc_add_test_exe)
  cmake_parse_arguments(T "" "NAME;LABEL;TIMEOUT" "SOURCES;CASES;LIBS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  kvc_warnings(${T_NAME})
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${T_NAME} PRIVATE kvc ${T_LIBS} m)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  foreach(c IN LISTS T_CASES)
    add_test(NAME ${T_LABEL}.${T_NAME}.${c} COMMAND ${T_NAME} ${c})
    set_tests_properties(${T_LABEL}.${T_NAME}.${c} PROPERTIES
      LABELS ${T_LABEL} SKIP_RETURN_CODE 77 TIMEOUT ${T_TIMEOUT})
  endforeach()
endfunction()
