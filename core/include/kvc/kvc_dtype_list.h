/**
 * @file kvc_dtype_list.h
 * @brief The one list of storage types. The kvc_dtype enum, the names
 *        kvc_dtype_name / kvc_dtype_parse use, the bits per element, which
 *        types are implemented, the row bytes (KVC_ROW_BYTES, a compile-time
 *        constant for static arenas), the grouping kvc_storage_describe
 *        reports, and every message or help text that lists the types are
 *        generated from it.
 *
 *   X(ENUM_NAME, value, name, bits per element, implemented, rows,
 *     scale bytes per group, group, has a minimum, what a row holds)
 *
 * rows: 1 when every vector is one row of the type (KIVI's keys are blocks
 * of channels instead: their row bytes are 0). A row is its groups' scale
 * bytes (group 0: one group, the whole row) then the packed elements padded
 * to 4 bytes, so that every row keeps a scale 4-aligned:
 *   row bytes = scale bytes * groups + ceil(bits * dim / 32) * 4.
 */
#ifndef KVC_DTYPE_LIST_H
#define KVC_DTYPE_LIST_H

/* The list, with two arguments handed to every entry (a and b: what a
   formula over the list needs, such as KVC_ROW_BYTES's type and dim). */
#define KVC_DTYPE_LIST_WITH(X, a, b)                                                                                   \
    X(a, b, F32, 0, "f32", 32, 1, 1, 0, 0, 0, "IEEE binary32")                                                         \
    X(a, b, F16, 1, "f16", 16, 1, 1, 0, 0, 0, "IEEE binary16, round to nearest even")                                  \
    X(a, b, I8, 2, "int8", 8, 1, 1, 4, 0, 0, "int8 with one f32 scale per row (symmetric)")                            \
    X(a, b, Q15, 3, "q15", 16, 1, 1, 4, 0, 0, "Q15 fixed point with one f32 scale per row; the integer attend's type") \
    X(a, b, KIVI4, 4, "kivi4", 4, 1, 0, 4, 32, 1,                                                                      \
      "KIVI int4: keys per channel over blocks of 32 tokens in the sinks and window, values and other rows int4")      \
    X(a, b, KIVI2, 5, "kivi2", 2, 0, 0, 4, 32, 1, "KIVI int2, the same grouping (described, not implemented)")         \
    X(a, b, I4, 6, "int4", 4, 1, 1, 4, 32, 1, "int4 in groups of 32 with an f16 scale and minimum per group")

/* The list without them: X(ENUM_NAME, value, name, bits, implemented, rows, ...). */
#define KVC_DTYPE_DROP2_(X, unused, ...) X(__VA_ARGS__)
#define KVC_DTYPE_LIST(X)                KVC_DTYPE_LIST_WITH(KVC_DTYPE_DROP2_, X, ~)

#endif /* KVC_DTYPE_LIST_H */
