/* The packed model (pack_story.py) linked into flash: story.kvs, found on the
   assembler's include path (-Wa,-I<dir>: tests/mcu/CMakeLists.txt). */
    .section .rodata.kvc_story_blob, "a"
    .balign 8
    .global kvc_story_blob
    .global kvc_story_blob_end
kvc_story_blob:
    .incbin "story.kvs"
kvc_story_blob_end:
