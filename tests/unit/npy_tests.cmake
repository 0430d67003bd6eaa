# .npy reader/writer tests (apps/io); included from tests/unit.
kvc_add_test_exe(NAME test_npy SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_npy.c LABEL unit
  CASES roundtrip_f32_2d roundtrip_f32_3d roundtrip_f16 half_special_values half_exhaustive
        parse_big_endian parse_versions_and_spellings hostile_inputs save_header_layout api_errors
        load_from_pipe corpus_verdicts numpy_interop
  LIBS kvc_io)
