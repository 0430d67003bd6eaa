# cmake -DSRC=<repo> -DBIN=<dir> -DTOOLCHAIN=<file> -DBOARD=<mps2-...> -DTARGET=<firmware>
#       [-DHOST=<host program> [-DHOST_ARGS=a;b]] [-DARGS=<the firmware's command line>]
#       [-DCONFIG_ARGS=-Dx=y;...] [-DICOUNT=<shift>] -P run_firmware.cmake
# Builds the firmware in BIN (rebuilt when sources change),
# runs HOST first (it may write files the firmware reads through
# semihosting), then the firmware under qemu-system-arm, and requires exit
# status 0 and a closing "N passed, 0 failed"; with HOST, the host program's
# output must be the same, line for line, but the firmware's own report (lines
# starting "# "). Missing tools print KVC_SKIP (a skip).
foreach(tool arm-none-eabi-gcc qemu-system-arm)
  find_program(found_${tool} ${tool})
  if(NOT found_${tool})
    message("${tool} is not installed (apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm)")
    message(FATAL_ERROR "KVC_SKIP")
  endif()
endforeach()
# configured every time (quick once cached), so that new firmware targets are known
execute_process(COMMAND ${CMAKE_COMMAND} --no-warn-unused-cli -S ${SRC} -B ${BIN} --toolchain ${TOOLCHAIN} -DCMAKE_BUILD_TYPE=Release
                        -DKVC_BUILD_ORACLE=OFF -DKVC_BUILD_APPS=OFF -DKVC_BUILD_TESTS=OFF -DKVC_INSTALL=OFF
                        -DKVC_BUILD_FIRMWARE=ON -DKVC_WERROR=ON -DKVC_MAX_HEAD_DIM=64 -DKVC_MAX_QUERY_HEADS=8
                        ${CONFIG_ARGS}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  file(REMOVE ${BIN}/CMakeCache.txt)
  message(FATAL_ERROR "configuring the firmware failed:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BIN} --target ${TARGET} RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "building the firmware failed:\n${out}")
endif()
execute_process(COMMAND arm-none-eabi-size ${BIN}/tests/mcu/${TARGET}.elf OUTPUT_VARIABLE size)
message("${size}")
if(DEFINED HOST)
  execute_process(COMMAND ${HOST} ${HOST_ARGS} RESULT_VARIABLE host_rc OUTPUT_VARIABLE host)
endif()
set(qemu qemu-system-arm -M ${BOARD} -nographic -monitor none -serial none
         -semihosting-config enable=on,target=native)
if(DEFINED ARGS)
  list(APPEND qemu -append "${ARGS}")
endif()
if(DEFINED ICOUNT)
  list(APPEND qemu -icount shift=${ICOUNT})
endif()
execute_process(COMMAND ${qemu} -kernel ${BIN}/tests/mcu/${TARGET}.elf RESULT_VARIABLE fw_rc OUTPUT_VARIABLE fw
                ERROR_VARIABLE fw_err TIMEOUT 850)
string(REPLACE "\r" "" fw "${fw}")
message("firmware on ${BOARD} (exit ${fw_rc}):\n${fw}${fw_err}")
if(NOT fw_rc EQUAL 0 OR NOT fw MATCHES "[0-9]+ passed, 0 failed\n?$")
  message(FATAL_ERROR "the firmware failed (exit ${fw_rc})")
endif()
if(DEFINED HOST)
  string(REGEX REPLACE "(^|\n)# [^\n]*" "" fw_compared "${fw}")
  if(NOT host_rc EQUAL 0 OR NOT host STREQUAL fw_compared)
    message("host (exit ${host_rc}):\n${host}")
    message(FATAL_ERROR "the firmware's output differs from the host build's")
  endif()
  message("the host build prints the same lines")
endif()
