/**
 * @file kvc_kernels.h
 * @brief The weighted-cache view and the versioned table of hot kernels.
 *
 * Every method exposes its cache as a ::kvc_view: a few segments, each a block
 * of n keys (and values), a per-entry weight (or 1) times a common scale, and a
 * role saying whether the block belongs to the numerator set N, the
 * denominator set D, or both. One `attend` kernel answers every query:
 *
 *     z(q) = sum_{i in N} a_i e^{beta<q,k_i>} v_i / sum_{i in D} b_i e^{beta<q,k_i>}
 *
 * computed stably as an online softmax over s_i + ln w_i (weight 0 = excluded),
 * subtracting the running maximum over N u D, so weights that grow like
 * n/budget cannot overflow.
 *
 * Storage: a segment's rows are f32 (`keys`, `values`) or another storage
 * type (`keys_q`, `values_q`, rows of kvc_row_bytes(dtype, dim) bytes). Method
 * code never reads or writes a cached element itself: it goes through the
 * row kernels of the table (store on append, dot / distance / accumulate on
 * use), so a new storage type or a SIMD backend touches no method.
 */
#ifndef KVC_KERNELS_H
#define KVC_KERNELS_H

#include "kvc_sizes.h"
#include "kvc_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** A backend's kernel table; what it holds is in the advanced tier (KVC_ADVANCED). */
typedef struct kvc_kernels kvc_kernels;

/** Bytes of one stored row of @p dim elements of type @p t (0 for a type
 *  that is not stored row by row). Every row size is a multiple of 4, so
 *  the f32 scale of an int8 row is aligned. The formulas are KVC_ROW_BYTES
 *  (kvc_sizes.h), the compile-time form: one definition for both. */
/*@ requires dim <= 16777216;
    assigns \nothing;
    ensures \result == kvc_row_bytes_l(t, dim);
    ensures \result % 4 == 0 && \result <= 4 * dim + 8;
*/
static inline uint64_t kvc_row_bytes(unsigned t, uint64_t dim) { return KVC_ROW_BYTES(t, dim); }

/** Bytes one cached element costs in rows of @p dim elements of type @p t
 *  (the int8 row scale and padding spread over the row; KIVI4: an int4 row's,
 *  since a key block costs 32 int4 rows and its values are int4 rows). */
/*@ requires 1 <= dim <= 16777216;
    assigns \nothing;
*/
static inline double kvc_element_bytes(unsigned t, uint64_t dim)
{
    const unsigned rows = t == (unsigned)KVC_DTYPE_KIVI4 ? (unsigned)KVC_DTYPE_I4 : t;
    return dim ? (double)kvc_row_bytes(rows, dim) / (double)dim : 0.0;
}

/** CPU features a backend may need (kvc_cpu_features()). */
enum {
    KVC_CPU_AVX2 = 1u << 0,   /**< x86 AVX2 + FMA */
    KVC_CPU_AVX512 = 1u << 1, /**< x86 AVX-512F */
    KVC_CPU_NEON = 1u << 2,   /**< Arm Advanced SIMD */
    KVC_CPU_DOTPROD = 1u << 3 /**< Arm Armv8.2 dot product (sdot/udot; Linux: HWCAP_ASIMDDP) */
};

/** The scalar reference kernels (ground truth). Never NULL. Pass it
 *  explicitly where arenas must be byte-identical across machines: the other
 *  tables sum in a different order, so the scores an observing or halving
 *  method ranks by may differ in their last bits, and with them which tokens
 *  are kept. */
/*@ assigns \nothing;
    ensures \valid_read(\result);
*/
const kvc_kernels *kvc_kernels_ref(void);

/** The name of @p kern ("ref", "avx2", "avx512", "neon", "single", "cuda", ...);
 *  NULL means the table every call uses for NULL: kvc_kernels_best(), resolved at the
 *  library's first NULL (so KVC_KERNELS is read once). */
/*@ requires kern == \null || \valid_read(kern);
    assigns \nothing;
*/
const char *kvc_kernels_name(const kvc_kernels *kern);

/** Number of tables built into this library (the reference one is index 0). */
size_t kvc_kernels_count(void);

/** The @p i-th built-in table, NULL past the end. */
const kvc_kernels *kvc_kernels_at(size_t i);

/** The built-in table named @p name ("ref", "avx2", ...), NULL if none. */
const kvc_kernels *kvc_kernels_by_name(const char *name);

/** KVC_CPU_* bits of the running CPU (the one run-time detection of the
 *  project: the decoder's GEMM and the kernel tables both use it). */
uint32_t kvc_cpu_features(void);

/** The best table this machine can run: the last built-in table whose
 *  `needs` the CPU has (the reference one when no accelerated backend is
 *  built in). Never NULL. */
const kvc_kernels *kvc_kernels_best(void);

/** 1 when @p kern is usable for storage type @p t (right version, row kernels present). */
/*@ requires kern == \null || \valid_read(kern);
    assigns \nothing;
    ensures \result == 0 || \result == 1;
    ensures \result == 1 ==> t < KVC_DTYPE_COUNT;
*/
int kvc_kernels_support(const kvc_kernels *kern, unsigned t);

#if defined(KVC_ADVANCED)
/* ---- advanced tier: what a backend author or a caller of the attend
 * kernels needs (define KVC_ADVANCED before including kvc.h) ---- */

/** Which set(s) of the weighted query a segment belongs to (bit mask). */
enum {
    KVC_SET_NUM = 1u, /**< numerator set N (needs values) */
    KVC_SET_DEN = 2u, /**< denominator set D (values may be NULL) */
    KVC_SET_BOTH = 3u /**< same entry, same weight, in N and in D */
};

/** One block of cache entries with a common role. Pointers are transient:
 *  they are rebuilt from arena offsets each time a view is taken. */
typedef struct kvc_segment {
    const float *keys;    /**< f32 storage: n rows of d floats, row-major (NULL otherwise) */
    const float *values;  /**< f32 storage: n rows of dv floats; may be NULL iff role == KVC_SET_DEN */
    const float *weights; /**< n per-entry multipliers >= 0, or NULL for all 1 */
    double scale;         /**< common multiplier > 0 applied to every entry */
    size_t n;             /**< number of entries (0 allowed) */
    unsigned role;        /**< KVC_SET_NUM, KVC_SET_DEN or KVC_SET_BOTH */
    unsigned dtype;       /**< kvc_dtype of the rows; KVC_DTYPE_F32 uses keys/values */
    const void *keys_q;   /**< other storage types: n rows of kvc_row_bytes(dtype, d) bytes;
                               KVC_DTYPE_KIVI4: ceil(n / 32) key blocks (kvc_kivi4_key_block_store) */
    const void *values_q; /**< other storage types: n rows of kvc_row_bytes(dtype, dv) bytes;
                               KVC_DTYPE_KIVI4: n int4 rows (kvc_segment_value_dtype) */
    size_t first;         /**< KVC_DTYPE_KIVI4: the first entry's token in the first key block
                               (0 .. 31; values_q points at that entry's row); 0 otherwise */
} kvc_segment;

/** Tokens of one KIVI key block (the channel grouping of KVC_DTYPE_KIVI4). */
#define KVC_KIVI_BLOCK 32u

/** Bytes of one KIVI4 key block of @p d channels: per channel, in channel
 *  order, an int4 row of the block's 32 values (f16 scale, f16 minimum, 16
 *  bytes of nibbles; token 2i in the low nibble), 20 bytes a channel, then
 *  zeros up to the bytes of 32 int4 rows of d elements. A block therefore
 *  costs exactly what 32 per-token int4 rows cost (5 bits an element at
 *  d = 64, where there is no padding) and sits where those rows would: a
 *  row-based region holds blocks at rows 0, 32, 64, ... */
#define KVC_KIVI4_KEY_BLOCK_BYTES(d) ((uint64_t)KVC_KIVI_BLOCK * KVC_ROW_BYTES(KVC_DTYPE_I4, d))

/** The storage type of a segment's value rows: int4 rows for KIVI4 (KIVI
 *  quantises values per token), the segment's own type otherwise. */
static inline unsigned kvc_segment_value_dtype(unsigned t)
{
    return t == (unsigned)KVC_DTYPE_KIVI4 ? (unsigned)KVC_DTYPE_I4 : t;
}

/** Bytes of the keys of @p n KIVI4 tokens: ceil(n / 32) blocks of d channels
 *  (n <= 2^32, d <= KVC_MAX_HEAD_DIM: at most 2^32 + 32 int4 rows). */
/*@ requires n <= 4294967296 && d <= 256;
    assigns \nothing;
    ensures \result == (n + 31) / 32 * (32 * kvc_row_bytes_l(6, d));
*/
uint64_t kvc_kivi4_key_bytes(uint64_t n, uint64_t d);

/**
 * @brief Quantise the keys of up to 32 consecutive tokens into one KIVI4 key
 *        block: each channel over the block's tokens gets its own f16 scale
 *        and minimum (asymmetric, 16 levels); the padding is zeroed.
 * @param block  KVC_KIVI4_KEY_BLOCK_BYTES(d) bytes (written whole).
 * @param keys   @p n_tok rows of @p d finite floats, token-major.
 * @param n_tok  1 .. KVC_KIVI_BLOCK; a partial block's unused codes repeat its first token.
 * @param d      1 .. KVC_MAX_HEAD_DIM.
 * Out-of-range arguments write nothing.
 */
void kvc_kivi4_key_block_store(void *block, const float *keys, size_t n_tok, size_t d);

/** The same from @p n_tok f16 rows (kvc_row_bytes(KVC_DTYPE_F16, d) bytes
 *  each, consecutive): what a cache's open block becomes when it fills. Reads
 *  a channel at a time (32 floats of stack). */
void kvc_kivi4_key_block_store_f16(void *block, const void *rows_f16, size_t n_tok, size_t d);

/** Token @p i of KIVI4 key blocks starting at @p keys, dequantised into @p x
 *  (d floats): min + q scale per channel, rounded to float once. */
void kvc_kivi4_key_load(const void *keys, size_t i, float *x, size_t d);

/** Entry @p i's key (@p d floats) or value (@p dv floats) of a segment of any
 *  storage type, dequantised by the reference kernels; 1 on success, 0 for an
 *  entry past n, a NULL pointer or a bad dimension. What a harness compares
 *  kernels against, and what slow paths use. */
int kvc_segment_key_load(const kvc_segment *s, size_t d, size_t i, float *x);
int kvc_segment_value_load(const kvc_segment *s, size_t dv, size_t i, float *x);

/** Largest number of segments one view can hold. */
#define KVC_VIEW_MAX_SEGMENTS 12u

/** A method's cache as the attend kernel sees it. */
typedef struct kvc_view {
    kvc_segment seg[KVC_VIEW_MAX_SEGMENTS];
    size_t n_seg; /**< 0 .. KVC_VIEW_MAX_SEGMENTS */
    size_t d;     /**< key dimension, 1 .. KVC_MAX_HEAD_DIM */
    size_t dv;    /**< value dimension, 1 .. KVC_MAX_HEAD_DIM */
    float beta;   /**< score scale, finite and > 0 */
} kvc_view;

/*@ predicate kvc_segment_ok(kvc_segment *s, integer d, integer dv) =
      \valid_read(s) &&
      0 <= s->n <= 16777216 &&
      s->dtype == 0 &&
      (s->role == 1 || s->role == 2 || s->role == 3) &&
      // scale: finite and > 0, as documented and as kvc_attend() checks
      \is_finite(s->scale) && s->scale > 0.0 &&
      \valid_read(s->keys + (0 .. s->n * d - 1)) &&
      ((s->role == 1 || s->role == 3) ==> \valid_read(s->values + (0 .. s->n * dv - 1))) &&
      (s->weights != \null ==> \valid_read(s->weights + (0 .. s->n - 1)));

    predicate kvc_view_ok(kvc_view *v) =
      \valid_read(v) &&
      1 <= v->d <= 256 && 1 <= v->dv <= 256 &&
      0 <= v->n_seg <= 8 &&
      \forall integer i; 0 <= i < v->n_seg ==> kvc_segment_ok(&v->seg[i], v->d, v->dv);
*/

/**
 * @brief Signature of the one-position f32 attend kernel: answer @p n_q
 *        queries (all query heads of one kv-head group, GQA) against a view
 *        whose segments are all f32.
 * @param view  the cache; d, dv in 1..KVC_MAX_HEAD_DIM, beta > 0.
 * @param q     n_q rows of view->d floats (finite).
 * @param n_q   1 .. KVC_MAX_QUERY_HEADS.
 * @param out   n_q rows of view->dv floats; all-zero rows where the denominator is 0.
 * @return KVC_OK, or KVC_E_ARG for out-of-range dimensions / NULL pointers.
 */
typedef kvc_status (*kvc_attend_fn)(const kvc_view *view, const float *q, size_t n_q, float *out);

/** A batched attend request: n_pos positions x n_q query heads of one
 *  kv-head group against one view, any storage type. */
typedef struct kvc_attend_batch {
    const float *q; /**< n_pos * n_q rows of d floats: position-major, then head */
    size_t n_pos;   /**< 1 .. KVC_MAX_BATCH_POSITIONS */
    size_t n_q;     /**< 1 .. KVC_MAX_QUERY_HEADS */
    /** Causal mask: the first `causal_segs` segments hold their entries in
     *  token order, the last of them being the n_pos positions themselves;
     *  position p does not see the last n_pos-1-p of those entries. 0: no mask. */
    size_t causal_segs;
    float *out;    /**< n_pos * n_q rows of dv floats */
    double *mass;  /**< NULL, or one double per entry of the view (segment order):
                              receives the sum over queries of the attention each
                              entry got, w_i e^{s_i} / sum_D (added to what is there) */
    double *state; /**< NULL, or KVC_ATTEND_STATE(dv) doubles per query: the
                              unnormalised online-softmax state {m, den, acc[dv]}
                              (m = -inf: no entry seen), for split-K (kvc_attend_merge) */
} kvc_attend_batch;

/** Doubles of one query's split-K state: the running maximum, the denominator, dv accumulators. */
#define KVC_ATTEND_STATE(dv) ((size_t)(dv) + 2u)

/** Largest number of positions of one batched attend. */
#define KVC_MAX_BATCH_POSITIONS 4096u

/** Workspace bytes kvc_attend_batch_fn needs for n_pos x n_q queries of value dim dv. */
/*@ requires n_pos <= 4096 && n_q <= 64 && dv <= 256;
    assigns \nothing;
*/
static inline uint64_t kvc_attend_work_bytes(uint64_t n_pos, uint64_t n_q, uint64_t dv)
{
    return n_pos * n_q * (dv + 3u) * sizeof(double);
}

/**
 * @brief Signature of the batched attend kernel. It reads every cached row
 *        once per call (entries outer, queries inner; one online-softmax state
 *        per query lives in @p work), and a second time only when `mass` is
 *        asked for. ln(scale) + ln(w_i) is taken once per entry per call.
 * @param work  kvc_attend_work_bytes(n_pos, n_q, dv) bytes, 8-aligned (caller memory).
 * @return KVC_OK; KVC_E_ARG for bad dimensions, a NULL pointer, a short
 *         workspace, a causal mask the view cannot hold, or a storage type
 *         this table has no row kernels for.
 */
typedef kvc_status (*kvc_attend_batch_fn)(const struct kvc_kernels *kern, const kvc_view *view,
                                          const kvc_attend_batch *b, void *work, size_t work_bytes);

/** Row kernels of one storage type. `row` points at one stored row of
 *  kvc_row_bytes(type, dim) bytes; f32 vectors are plain floats; every
 *  reduction accumulates in double, in index order (the reference order). */
typedef struct kvc_row_kernels {
    /** Quantise the finite vector x into a row (the `store` of an append). */
    void (*store)(void *row, const float *x, size_t dim);
    /** Dequantise a row. */
    void (*load)(const void *row, float *x, size_t dim);
    /** <row, x>. */
    double (*dot_f32)(const void *row, const float *x, size_t dim);
    /** <row, x> with x in double (centres, means). */
    double (*dot_f64)(const void *row, const double *x, size_t dim);
    /** <a - mu, b - mu> of two rows; mu NULL means 0. The pair-Gram entries of
     *  the balancing and halving walks. */
    double (*dot_rows)(const void *a, const void *b, const double *mu, size_t dim);
    /** ||row - x||^2. */
    double (*sqdist_f32)(const void *row, const float *x, size_t dim);
    /** acc += p * row (values, means). */
    void (*axpy)(double *acc, double p, const void *row, size_t dim);
    /** max_c |row_c|. */
    double (*absmax)(const void *row, size_t dim);
} kvc_row_kernels;

/** Version of ::kvc_kernels; bumped whenever an entry is added or changed. */
#define KVC_KERNELS_VERSION 4u

/** One run of rows the core wrote: @p rows rows of @p stride bytes from byte
 *  @p offset of the journal's base (a quantised row is written whole, so a run
 *  is whole rows). */
typedef struct kvc_row_write {
    uint64_t offset; /**< from kvc_row_journal::base */
    uint32_t stride; /**< bytes per row, 4 .. 1032 */
    uint32_t rows;   /**< rows in the run, >= 1 */
} kvc_row_write;

/** Where the core records the rows it writes, for a mirror of its arena (a
 *  device's pages: kvc_mirror.h). Caller memory, filled by every row write of
 *  the calls made with a table whose ::kvc_kernels::journal points here:
 *  appends, prefills, observes, marks, the methods' merges and halvings.
 *  Adjacent writes of one stride coalesce into one run. A write that does not
 *  fit is counted in @p dropped (a mirror then re-sends every row it holds:
 *  correct, only slower). Not thread-safe: one journal per calling thread. */
typedef struct kvc_row_journal {
    const unsigned char *base; /**< offsets are from here (a stream's or a cache's arena) */
    uint64_t bytes;            /**< writes outside [base, base + bytes) are not recorded */
    kvc_row_write *writes;     /**< capacity runs of caller memory */
    uint32_t capacity;         /**< 0 .. 2^32 - 1 */
    uint32_t count;            /**< runs recorded since the caller last set it to 0 */
    uint64_t dropped;          /**< rows that did not fit (0 after a complete record) */
} kvc_row_journal;

/** Capability bits of a table: the storage types it has row kernels for, and what its attend does. */
enum {
/** KVC_CAP_F32, KVC_CAP_F16, ...: one bit per storage type, the table implements it
 *  (KVC_CAP_KIVI4: attend_batch reads KIVI4 segments, whose values are int4 rows). */
#define KVC_CAP_OF_DTYPE(NAME, value, name, bits, impl, ...) KVC_CAP_##NAME = 1u << (value),
    KVC_DTYPE_LIST(KVC_CAP_OF_DTYPE)
#undef KVC_CAP_OF_DTYPE
        KVC_CAP_BATCH = 1u << 16, /**< attend_batch answers many positions per row read */
    KVC_CAP_MASS = 1u << 17,      /**< attend_batch returns per-entry attention mass */
    KVC_CAP_OPT_IN = 1u << 18,    /**< less precise than the reference by design (the single-precision
                                   table): never picked by kvc_kernels_best, only by name */
    KVC_CAP_Q8_INT4 = 1u << 19,   /**< attend_batch scores int4 keys against the query quantised to
                                   int8 per group of 32 channels (integer dot products): each score
                                   moves by up to sum_g (sq_g / 2) sum_{c in g} (k_c - min_g) more,
                                   sq_g = max_{c in g} |q_c| / 127 (tests/kvc_attend_bound.h) */
    KVC_CAP_Q8_PV_INT4 = 1u << 20 /**< attend_batch accumulates int4 value rows (dv a multiple of 64) on
                                   integers, the weights p_t sc_t of each block of 32 entries quantised to
                                   8 bits: channel c of a block's numerator moves by up to
                                   (max_t p_t sc_t / 510) sum_t code_tc more (tests/kvc_attend_bound.h) */
};

/** The bits of every storage type kvc_dtype_list.h marks implemented. */
#define KVC_CAP_OF_IMPLEMENTED(NAME, value, name, bits, impl, ...) | ((impl) ? 1u << (value) : 0u)
#define KVC_CAP_TYPES                                              (0u KVC_DTYPE_LIST(KVC_CAP_OF_IMPLEMENTED))

/** A backend's kernels. Entries a backend lacks point at the reference ones. */
typedef struct kvc_kernels {
    uint32_t version;                      /**< KVC_KERNELS_VERSION */
    uint32_t caps;                         /**< KVC_CAP_* bits */
    uint32_t needs;                        /**< KVC_CPU_* bits this table requires */
    const char *name;                      /**< "ref", "avx2", "cuda", ... */
    kvc_attend_fn attend_f32;              /**< one position, f32 views (the proved kernel in ref) */
    kvc_attend_batch_fn attend_batch;      /**< any storage type, batched, causal, optional mass */
    kvc_row_kernels rows[KVC_DTYPE_COUNT]; /**< per storage type; all-NULL = not supported */
    /** <a, b> over n floats, accumulated in double. */
    double (*dot_f32)(const float *a, const float *b, size_t n);
    /** ||a - b||^2 over n floats, accumulated in double. */
    double (*sqdist_f32)(const float *a, const float *b, size_t n);
    /** NULL in every shipped table. A mirror copies a table, points this at
     *  its ::kvc_row_journal and passes the copy to the calls whose row writes
     *  it must see (kvc_mirror.h). Nothing else reads it. */
    kvc_row_journal *journal;
} kvc_kernels;

/** The single-precision table ("single"): the reference row kernels, and an
 *  attend whose scores, exponentials and sums are float, for FPUs without
 *  double precision (Cortex-M4F, M33; about 20x fewer instructions there than
 *  the double reference, which such a core runs in software). Error bounded
 *  against the reference with u = 2^-24 (tests/kernels/test_backends.c).
 *  Built into every library, never chosen by kvc_kernels_best. Never NULL. */
/*@ assigns \nothing;
    ensures \valid_read(\result);
*/
const kvc_kernels *kvc_kernels_single(void);

#endif /* KVC_ADVANCED */

#ifdef __cplusplus
}
#endif
#endif /* KVC_KERNELS_H */
