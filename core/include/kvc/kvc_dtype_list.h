/**
 * @file kvc_dtype_list.h
 * @brief The one list of storage types. The kvc_dtype enum, the names
 *        kvc_dtype_name / kvc_dtype_parse use, the bits per element, which
 *        types are implemented, and every message or help text that lists
 *        them are generated from it. (Row bytes: KVC_ROW_BYTES in
 *        kvc_sizes.h, one formula per type, a compile-time constant for
 *        static arenas; the grouping details: kvc_storage_describe.)
 *
 *   X(ENUM_NAME, value, name, bits per element, implemented, what a row holds)
 */
#ifndef KVC_DTYPE_LIST_H
#define KVC_DTYPE_LIST_H

#define KVC_DTYPE_LIST(X)                                                                                              \
    X(F32, 0, "f32", 32, 1, "IEEE binary32")                                                                           \
    X(F16, 1, "f16", 16, 1, "IEEE binary16, round to nearest even")                                                    \
    X(I8, 2, "int8", 8, 1, "int8 with one f32 scale per row (symmetric)")                                              \
    X(Q15, 3, "q15", 16, 1, "Q15 fixed point with one f32 scale per row; the integer attend's type")                   \
    X(KIVI4, 4, "kivi4", 4, 1,                                                                                         \
      "KIVI int4: keys per channel over blocks of 32 tokens in the sinks and window, values and other rows int4")      \
    X(KIVI2, 5, "kivi2", 2, 0, "KIVI int2, the same grouping (described, not implemented)")                            \
    X(I4, 6, "int4", 4, 1, "int4 in groups of 32 with an f16 scale and minimum per group")

#endif /* KVC_DTYPE_LIST_H */
