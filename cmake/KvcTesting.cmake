# kvc_add_test_exe(NAME <exe> SOURCES ... LABEL <label> CASES <case>... [LIBS ...])
# Builds one test executable and registers each case as its own ctest test
# named <label>.<exe>.<case>; exit code 77 means "skipped" (printed why).
# Under an emulator (a cross build's qemu-user) every time limit is 10 times longer.
if(CMAKE_CROSSCOMPILING_EMULATOR)
  set(KVC_TEST_TIME_SCALE 10)
else()
  set(KVC_TEST_TIME_SCALE 1)
endif()

function(kvc_add_test_exe)
  cmake_parse_arguments(T "" "NAME;LABEL;TIMEOUT" "SOURCES;CASES;LIBS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  kvc_warnings(${T_NAME})
  target_include_directories(${T_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_link_libraries(${T_NAME} PRIVATE kvc ${T_LIBS} m)
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  math(EXPR T_TIMEOUT "${T_TIMEOUT} * ${KVC_TEST_TIME_SCALE}")
  foreach(c IN LISTS T_CASES)
    add_test(NAME ${T_LABEL}.${T_NAME}.${c} COMMAND ${T_NAME} ${c})
    set_tests_properties(${T_LABEL}.${T_NAME}.${c} PROPERTIES
      LABELS ${T_LABEL} SKIP_RETURN_CODE 77 TIMEOUT ${T_TIMEOUT})
  endforeach()
endfunction()
