# cmake -DSRC= -DBIN= -DTOOLCHAIN= -DBOARD= -DHOST=<mcu_story_host> -DPYTHON=<python3>
#       -DMODEL_DIR=<folder of stories260K.bin and tok512.bin> -P run_story.cmake
# Packs stories260K into BIN/story/story.kvs (apps/mcu_story/pack_story.py),
# builds the story firmware with it in flash and a 256 KiB RAM limit, runs it
# under QEMU (-icount, for its instruction count) and requires the host
# decoder's text. Skips (KVC_SKIP) without the model, python3 or numpy.
set(model ${MODEL_DIR}/stories260K.bin)
set(tok ${MODEL_DIR}/tok512.bin)
if(NOT EXISTS ${model} OR NOT EXISTS ${tok})
  message("stories260K not found in ${MODEL_DIR}")
  message(FATAL_ERROR "KVC_SKIP")
endif()
if(NOT PYTHON)
  message("python3 not found")
  message(FATAL_ERROR "KVC_SKIP")
endif()
set(blob_dir ${BIN}/story)
file(MAKE_DIRECTORY ${blob_dir})
execute_process(COMMAND ${PYTHON} ${SRC}/apps/mcu_story/pack_story.py ${model} ${tok} ${blob_dir}/story.kvs.new
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT rc EQUAL 0)
  message("${out}")
  if(out MATCHES "No module named")
    message(FATAL_ERROR "KVC_SKIP")
  endif()
  message(FATAL_ERROR "packing the model failed")
endif()
# replaced only when it changed, so that the firmware is not rebuilt for nothing
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${blob_dir}/story.kvs.new ${blob_dir}/story.kvs)
message("${out}")
set(TARGET kvc_story_fw)
set(HOST_ARGS ${blob_dir}/story.kvs)
set(CONFIG_ARGS -DKVC_STORY_BLOB_DIR=${blob_dir})
set(ICOUNT 6)
include(${CMAKE_CURRENT_LIST_DIR}/run_firmware.cmake)
