/**
 * @file kvc_stream.h
 * @brief One compressed KV stream (one layer x kv-head): the exact-region
 *        wrapper around a compression method, configured from a token budget.
 *
 * Life of a token j:  kvc_stream_append(k_j, v_j)  then  kvc_stream_attend(q_j).
 * The query sees (with weight 1) the first n_sink tokens, the n_window tokens
 * before the current one, the current token itself, and the method's weighted
 * cache of everything that left the window. A token enters the method when it
 * is pushed out of the window by the next append ("attend first, then update").
 *
 * Budget (docs/methods.md section 0): a budget of N tokens is N*(d+dv) stored
 * cache elements; key-only entries cost d/(d+dv) of a token. It covers sink,
 * window, the current token and the method, and bounds the peak (no transient
 * copies exist in any update). Per-entry metadata (weights, counters, token
 * ids) is reported separately in bytes. Streaming methods never need the
 * stream length.
 */
#ifndef KVC_STREAM_H
#define KVC_STREAM_H

#include "kvc_kernels.h"
#include "kvc_method_list.h"
#include "kvc_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Compression methods: one value per line of kvc_method_list.h (the
 *  registry's single list), e.g. KVC_METHOD_EXACT = 1, KVC_METHOD_SUBGEN = 4. */
#define KVC_METHOD_ENUM_ENTRY(ident, NAME, value, name, kvpress, summary) KVC_METHOD_##NAME = value,
/* KVC_METHOD_ENUM_32BIT is no method: it keeps the enum 4 bytes where enums
   are short by default (arm-none-eabi's -fshort-enums), so that configurations
   stored in arenas have one layout on every target */
typedef enum kvc_method { KVC_METHOD_LIST(KVC_METHOD_ENUM_ENTRY) KVC_METHOD_ENUM_32BIT = 0x7fffffff } kvc_method;
#undef KVC_METHOD_ENUM_ENTRY

/** Words of a configuration's method parameters (kvc_method_params): the
 *  same in both tiers, with room for parameters to come, so that a method
 *  gaining a parameter changes no stable structure. */
#define KVC_METHOD_PARAMS_WORDS 24

#if defined(KVC_ADVANCED)
/* ---- advanced tier: the methods' parameters by field. The stable tier sets
 * and reads them by name (kvc_stream_config_set, kvc_stream_config_get,
 * kvc_method_param_at for names, ranges and defaults). ---- */

/** How SubGen and streaming BalanceKV turn what they hold into an output
 *  (README "Why SubGen and BalanceKV diverged, and the fix"). */
typedef enum kvc_estimator {
    /** Self-normalised (default): every held entry carries its key and its
     *  value, and one set of weights forms both the numerator and the
     *  denominator, so the output is a convex combination of held values: it
     *  never leaves their coordinate box, whatever the sample. Consistent
     *  (ratio estimator), bias O(1/samples). */
    KVC_ESTIMATOR_SELF = 1,
    /** The paper's: independent numerator and denominator estimates (SubGen:
     *  value-norm reservoir / key clusters; BalanceKV: value-norm buckets /
     *  a key-only tree). Each is unbiased, but their ratio is not bounded:
     *  on real models the output can leave the values' hull by orders of
     *  magnitude and the error cascades through layers. For research. */
    KVC_ESTIMATOR_PAPER = 2
} kvc_estimator;

/** SubGen parameters; 0 means "derive from the budget". */
typedef struct kvc_subgen_params {
    uint32_t t;         /**< samples per cluster, 0 -> 8; else 1 .. 4096 */
    uint32_t s;         /**< value-reservoir slots, 0 -> half the method budget */
    uint32_t m_max;     /**< cluster capacity, 0 -> what the rest of the budget holds */
    float delta0;       /**< starting cluster radius >= 0; 0 = set at first overflow */
    uint32_t estimator; /**< kvc_estimator; 0 -> KVC_ESTIMATOR_SELF (cluster samples then also hold values) */
} kvc_subgen_params;

/** How SoftmaxBalance picks the kept point of each pair (see kvc_balancekv.h). */
typedef enum kvc_balance_mode {
    KVC_BALANCE_PRACTICAL = 1,     /**< p = 1/2 - gamma * a (the authors' code, gamma = 4) */
    KVC_BALANCE_THEORY = 2,        /**< p = 1/2 - a / (2 c R^2), c = 30 ln(S/delta) */
    KVC_BALANCE_SMALLER_CLASS = 3, /**< the paper's literal Alg. 2: keep the smaller sign class (BIASED) */
    KVC_BALANCE_SPLIT = 4,         /**< one sign per token (the first +1, then p = 1/2 - gamma * a) and the
                                        authors' split of the batch: at the first c where a class reaches
                                        half, that class's tokens up to c go, the rest up to half stay */
    KVC_BALANCE_OFFLINE = 5        /**< balancekv-prefill only: the prompt's middle compressed at once by
                                        kvc_balancekv_offline (the authors' walk and split over whole
                                        rounds) when it arrives through kvc_stream_prefill, whose caller
                                        scratch holds the walk's buffers; the arena holds survivors only */
} kvc_balance_mode;

/** BalanceKV parameters; 0 means "default / derive from the budget". */
typedef struct kvc_balancekv_params {
    uint32_t t;           /**< batch size (even, >= 2); 0 -> largest that fits the budget */
    uint32_t levels;      /**< T, tree levels above the input level, 1 .. 16; 0 -> 3 */
    uint32_t b_max;       /**< value-norm buckets kept (a window of exponents), 1 .. 64; 0 -> 8 */
    uint32_t mode;        /**< kvc_balance_mode; 0 -> KVC_BALANCE_PRACTICAL (streaming and prefill; README) */
    float gamma;          /**< practical-mode step, > 0; 0 -> 4 */
    float delta;          /**< theory-mode failure probability in (0, 1); 0 -> 0.01 */
    float rho;            /**< erase buckets with 2^i <= rho * v_max; 0 = never (default) */
    float kappa;          /**< combined-kernel constant (<v,v'> + kappa); 0 in streaming mode */
    uint32_t tail_method; /**< balancekv-prefill: what holds tokens after the prompt: 0 or KVC_METHOD_UNIFORM (a uniform
                               reservoir of the rest of the budget: never full) or
                               KVC_METHOD_EXACT (exact, refuses with KVC_E_CAPACITY when full) */
    uint32_t estimator;   /**< streaming: kvc_estimator; 0 -> KVC_ESTIMATOR_SELF (no key-only tree:
                              its memory goes to the joint trees, read self-normalised; b_max
                              default 1, kappa default 0.025). Prefill is always self-normalised. */
} kvc_balancekv_params;

/** How kernel halving sets its threshold scale L (docs/express.md section 6.4). */
enum {
    KVC_EXPRESS_L_THEORY = 1, /**< L = 1/2 + ln(2S/delta_call), the summable delta schedule */
    KVC_EXPRESS_L_CONST = 2   /**< a constant L */
};

/** Thinformer Express parameters; 0 means "default / derive from the budget". */
typedef struct kvc_express_params {
    uint32_t s;           /**< cache size: a power of two >= 2; 0 -> largest whose worst case fits */
    uint32_t c;           /**< inflation factor: a power of two dividing s; 0 -> s */
    uint32_t l_mode;      /**< KVC_EXPRESS_L_THEORY or KVC_EXPRESS_L_CONST; 0 -> the measured default */
    float L;              /**< the constant of KVC_EXPRESS_L_CONST, > 0; 0 -> 1 */
    float delta;          /**< theory mode: total failure probability in (0, 1); 0 -> 0.5 */
    uint32_t center;      /**< 1: keys centred on each Halve call's mean; 2: not; 0 -> the measured default */
    uint32_t tail_method; /**< express-prefill: what holds tokens after the prompt, as
                               kvc_balancekv_params::tail_method (0 or KVC_METHOD_UNIFORM, KVC_METHOD_EXACT) */
} kvc_express_params;

/** Every method's parameters; only the configured method's are read. */
typedef struct kvc_method_params {
    kvc_subgen_params subgen;
    /** BalanceKV, and balancekv-prefill: t = block size b (0 -> 256), levels =
     *  rounds T (0 -> fewest that fit), kappa (0 -> 0.025) */
    kvc_balancekv_params balancekv;
    /** Thinformer Express and express-prefill */
    kvc_express_params express;
    /** 0: room for parameters to come (kvc_stream_config_problem refuses others) */
    uint32_t reserved_[KVC_METHOD_PARAMS_WORDS - 22];
} kvc_method_params;
#else
/** The methods' parameters, opaque here: set and read them by name
 *  (kvc_stream_config_set, kvc_stream_config_get). */
typedef struct kvc_method_params {
    uint32_t opaque_[KVC_METHOD_PARAMS_WORDS];
} kvc_method_params;
#endif

/** Everything needed to size and initialise a stream. Plain data: copyable. */
typedef struct kvc_stream_config {
    kvc_method method;
    kvc_dtype dtype;     /**< storage type: any for which kvc_dtype_implemented() is true */
    uint32_t d;          /**< key dim, 1 .. KVC_MAX_HEAD_DIM */
    uint32_t dv;         /**< value dim, 1 .. KVC_MAX_HEAD_DIM */
    uint32_t budget;     /**< tokens, 1 .. KVC_MAX_BUDGET (see file comment) */
    uint32_t n_sink;     /**< exact first tokens (default 32; may be 0) */
    uint32_t n_window;   /**< exact recent tokens before the current one (default 32; may be 0);
                            ignored by sink-window, whose window is the whole rest of the budget */
    float beta;          /**< score scale > 0; 0 -> 1/sqrt(d) */
    uint64_t seed;       /**< any value; same seed + same stream -> same arena bytes */
    uint32_t prefix_len; /**< prefill methods: length of the prompt they compress (tokens, >= 1) */
    /** Needle-preserving spans (README "Protected spans"): tokens of the budget
     *  that keep, exactly and with weight 1, the tokens near a key outlier when
     *  they leave the window, instead of handing them to the method. A token
     *  is an outlier when its key is anti-correlated with the keys in the
     *  window before it, <k_j, sum of window keys> <= 0 (BalanceKV's augmented
     *  test on a sliding block); a token leaving the window is protected when
     *  an outlier lies within protect_radius positions of it. First come,
     *  first kept: when the n_protect slots are full, protected tokens go to
     *  the method. 0 = off (default); needs n_window >= 1. */
    uint32_t n_protect;
    uint32_t protect_radius; /**< positions either side, 1 .. 4096; 0 -> 25 (the paper's dilation) */
    uint32_t reserved_;      /**< 0 (keeps params 8-aligned) */
    /** The method's own parameters (SubGen's t, BalanceKV's mode, ...): set
     *  them by name with kvc_stream_config_set; 0 = derive from the budget. */
    kvc_method_params params;
} kvc_stream_config;

/** Opaque stream state; it lives at the start of its arena. */
typedef struct kvc_stream kvc_stream;

/* ---- the method registry (one list in the library: kvc_method_list.h) ---- */

/** Number of methods this build knows (iterate with kvc_method_at). */
/*@ assigns \nothing;
    ensures \result <= KVC_METHOD_LIST_COUNT;
*/
size_t kvc_method_count(void);

/** The @p i-th method, i in 0 .. kvc_method_count()-1 (0 past the end). */
/*@ assigns \nothing; */
kvc_method kvc_method_at(size_t i);

/** Method names as the command line spells them ("exact", "sink-window",
 *  "uniform", "subgen", ...); NULL for an unknown value. */
/*@ assigns \nothing; */
const char *kvc_method_name(kvc_method m);

/** One line on what the method keeps; NULL for an unknown value. */
/*@ assigns \nothing; */
const char *kvc_method_summary(kvc_method m);

/** 1 when method @p m chooses what it keeps from the attention the decoder's
 *  queries give (H2O, TOVA): a decoder must attend through
 *  kvc_stream_attend_observed / kvc_cache_attend_observed (or call
 *  kvc_stream_observe itself), or the method never sees a score. 0 otherwise
 *  and for an unknown value. */
/*@ assigns \nothing;
    ensures \result == 0 || \result == 1;
*/
int kvc_method_observes(kvc_method m);

/** The name of the kvpress press that computes the same method ("streaming_llm" for
 *  sink-window, "observed_attention" for h2o, "random" for uniform, ...), or NULL
 *  when kvpress has none or @p m is unknown. */
const char *kvc_method_kvpress_name(kvc_method m);

/** Parse a method name, or its kvpress name (kvc_method_kvpress_name: "streaming_llm",
 *  "observed_attention", ...); returns KVC_E_ARG for an unknown name. */
kvc_status kvc_method_parse(const char *name, kvc_method *out);

/** Every method name, comma-separated, into @p buf (truncated to @p cap,
 *  NUL-terminated when cap > 0); returns the length the whole list needs. */
size_t kvc_method_names(char *buf, size_t cap);

/** Kind of a method parameter's value. */
typedef enum kvc_param_type {
    KVC_PARAM_U32 = 1,   /**< unsigned integer in [min, max] */
    KVC_PARAM_F32 = 2,   /**< finite number in [min, max] */
    KVC_PARAM_CHOICE = 3 /**< one of the words in `choices` (| separated) */
} kvc_param_type;

/** One tunable parameter of a method, as the command line spells it. Value 0
 *  (or not setting it) always means "derive from the budget / default". */
typedef struct kvc_param_desc {
    const char *name; /**< flag name without "--", e.g. "subgen-t" */
    kvc_param_type type;
    double min, max;     /**< range of an explicit value (U32, F32) */
    const char *choices; /**< CHOICE: the accepted words, "|"-separated; F32 may also accept these */
    const char *dflt;    /**< what 0 / unset means, in words */
    const char *help;    /**< one line */
} kvc_param_desc;

/** Number of parameters of method @p m (0 for an unknown method). */
/*@ assigns \nothing; */
size_t kvc_method_param_count(kvc_method m);

/** The @p i-th parameter of @p m, or NULL past the end (like ZSTD_cParam_getBounds). */
/*@ assigns \nothing; */
const kvc_param_desc *kvc_method_param_at(kvc_method m, size_t i);

/**
 * @brief Set parameter @p name of @p cfg (for cfg->method) from its text.
 * @return KVC_OK; KVC_E_ARG when the method has no such parameter or the text
 *         is outside the descriptor's range or choices (cfg unchanged).
 */
kvc_status kvc_stream_config_set(kvc_stream_config *cfg, const char *name, const char *text);

/**
 * @brief Read parameter @p name of @p cfg (for cfg->method) as the text
 *        kvc_stream_config_set accepts: a decimal integer, a real ("%.9g",
 *        which gives the same float back), a word of the choices, or "0" for
 *        a parameter left to its default. get then set leaves cfg unchanged.
 * @param buf  receives the text, NUL-terminated; @p cap its size (16 is always enough).
 * @return KVC_OK; KVC_E_ARG when the method has no such parameter, an argument
 *         is NULL or @p cap is too small (buf then holds "" when cap > 0);
 *         KVC_E_UNSUPPORTED for a real in a build without printf (KVC_DESCRIBE=OFF).
 */
kvc_status kvc_stream_config_get(const kvc_stream_config *cfg, const char *name, char *buf, size_t cap);

/**
 * @brief A configuration with the documented defaults (sink 32, window 32,
 *        beta 1/sqrt(d), f32 storage, SubGen parameters derived).
 */
kvc_stream_config kvc_stream_config_default(kvc_method m, uint32_t d, uint32_t dv, uint32_t budget, uint64_t seed);

#if defined(KVC_ADVANCED)
/** What a configuration turns into (all derived from the budget). */
typedef struct kvc_stream_plan {
    kvc_method method;
    uint32_t d, dv;
    float beta;
    uint32_t n_sink, n_window;          /**< exact regions actually used */
    uint32_t n_protect, protect_radius; /**< protected spans (0, 0 when off) */
    uint32_t method_tokens;             /**< budget left to the method (tokens) */
    uint32_t capacity;                  /**< exact / uniform: token slots of the method */
    uint32_t t, s, m_max;               /**< SubGen */
    float delta0;                       /**< SubGen */
    uint32_t subgen_estimator;          /**< SubGen: kvc_estimator, resolved */
    kvc_balancekv_params bkv;           /**< BalanceKV / prefill, every field resolved (express-prefill:
                                             tail_method only) */
    uint32_t prefix_method_tokens;      /**< prefill: prompt tokens that reach the method */
    uint32_t tail_capacity;             /**< prefill: token slots after the prompt (exact or reservoir) */
    kvc_express_params xp;              /**< Express, every field resolved */
    uint32_t dtype;                     /**< kvc_dtype of every cached row: int4 for a KIVI4 configuration */
    uint32_t key_blocks;                /**< 1: KIVI4, the sinks' and window's keys in blocks of 32 tokens
                                             quantised per channel (the open block in f16 after the method's
                                             bytes; docs/architecture.md); 0: every key a row of dtype */
    uint64_t worst_elements;            /**< peak cache elements (floats of k/v vectors), worst case */
    uint64_t budget_elements;           /**< budget * (d + dv) */
    uint64_t metadata_bytes;            /**< per-entry weights / counters / ids, worst case */
    uint64_t arena_bytes;               /**< what kvc_stream_arena_bytes returns (always <= SIZE_MAX) */
} kvc_stream_plan;

/*@ // what every plan kvc_stream_plan_make accepts satisfies (proved by
    // verify wp_plan, docs/proofs.md): dimensions and regions in range, a
    // storage type with rows, the worst case within the budget, the arena
    // addressable on the target
    predicate kvc_plan_accepted(kvc_stream_plan *p) =
      1 <= p->d <= 256 && 1 <= p->dv <= 256 &&
      p->n_sink + p->n_window + p->n_protect + 1 + p->method_tokens <= 16777216 &&
      kvc_dtype_rows_l(p->dtype) &&
      p->protect_radius <= 4096 &&
      p->budget_elements == (p->n_sink + p->n_window + p->n_protect + 1 + p->method_tokens) * (p->d + p->dv) &&
      (p->n_sink + p->n_window + p->n_protect + 1) * (p->d + p->dv) <= p->worst_elements <= p->budget_elements &&
      p->arena_bytes <= PTRDIFF_MAX && p->arena_bytes % 64 == 0;
*/
/**
 * @brief Derive every parameter from the budget.
 * @return KVC_OK; KVC_E_ARG for out-of-range fields or a budget too small for
 *         the method (the plan is then not written); KVC_E_UNSUPPORTED for a
 *         dtype that kvc_dtype_implemented() refuses.
 */
/*@ requires cfg == \null || \valid_read(cfg);
    requires plan == \null || (\valid(plan) && \separated(cfg, plan));
    assigns *plan;
    ensures \result == KVC_OK ==> kvc_plan_accepted(plan);
    ensures \result != KVC_OK ==> *plan == \old(*plan);
*/
kvc_status kvc_stream_plan_make(const kvc_stream_config *cfg, kvc_stream_plan *plan);
#endif

/**
 * @brief Why a configuration is rejected, in one sentence.
 * @return a static string naming the first rule @p cfg breaks, or NULL when
 *         kvc_stream_plan_make would accept it.
 */
/*@ requires cfg == \null || \valid_read(cfg);
    assigns \nothing;
*/
const char *kvc_stream_config_problem(const kvc_stream_config *cfg);

/** @brief Arena bytes for @p cfg (0 when the configuration is invalid). */
/*@ requires cfg == \null || \valid_read(cfg);
    assigns \nothing;
    ensures \result <= PTRDIFF_MAX && \result % 64 == 0;
*/
size_t kvc_stream_arena_bytes(const kvc_stream_config *cfg);

/**
 * @brief Budgets in bytes: the largest token budget whose arena, with every
 *        other field of @p cfg as given (method, storage type, sinks,
 *        window, parameters), fits in @p bytes. The arena counts everything
 *        the stream keeps: rows in their storage type, per-entry weights and
 *        token ids, scratch and the header; so this turns bytes into
 *        tokens x precision for any method.
 * @param bytes  caller's byte budget for one stream (one layer x kv head);
 *               e.g. 25% of an f16 exact cache of n tokens is n (d + dv) / 2.
 * @return the budget in tokens (1 .. KVC_MAX_BUDGET), or 0 when no valid
 *         budget fits (too few bytes, or a configuration that is invalid
 *         at every budget). cfg->budget is ignored and not written.
 */
uint32_t kvc_stream_budget_for_bytes(const kvc_stream_config *cfg, uint64_t bytes);

/**
 * @brief Initialise a stream inside @p arena (zeroed first, so equal streams
 *        give equal bytes).
 * @param arena        aligned to KVC_ARENA_ALIGN.
 * @param arena_bytes  >= kvc_stream_arena_bytes(cfg).
 * @param[out] out     the stream handle (== arena) on success.
 * @return KVC_OK, KVC_E_ARG, KVC_E_UNSUPPORTED, or KVC_E_ARENA (NULL,
 *         misaligned or too small).
 */
kvc_status kvc_stream_init(void *arena, size_t arena_bytes, const kvc_stream_config *cfg, kvc_stream **out);

/**
 * @brief Append the next token (its key and value, post-RoPE).
 * @param kern  kernel table; NULL: kvc_kernels_best() (pass kvc_kernels_ref() for arenas byte-identical across machines).
 * @param k     d finite floats.  @param v  dv finite floats (neither inside the stream's arena).
 * @return KVC_OK; KVC_E_NONFINITE, KVC_E_ARG (NULL), KVC_E_STATE (bad
 *         handle), KVC_E_CAPACITY (exact is full). On error nothing changed.
 */
kvc_status kvc_stream_append(kvc_stream *st, const kvc_kernels *kern, const float *k, const float *v);

/**
 * @brief Attend @p n_q queries (a GQA group) to everything appended so far,
 *        including the current token.
 * @param q    n_q x d finite floats.  @param n_q  1 .. KVC_MAX_QUERY_HEADS.
 * @param out  n_q x dv floats.
 * @return KVC_OK; KVC_E_STATE before the first append; KVC_E_NONFINITE; KVC_E_ARG;
 *         KVC_E_RANGE (out zeroed) when SubGen's or BalanceKV's estimate
 *         overflows a float; KVC_E_CORRUPT / KVC_E_ARENA for a bad arena.
 */
kvc_status kvc_stream_attend(const kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_q, float *out);

#if defined(KVC_ADVANCED)
/* ---- advanced tier: batched, split-K and observed attends, the raw view ---- */

/** @brief Entries of the stream's view now (the length of a mass array); 0 for a bad handle. */
size_t kvc_stream_view_entries(const kvc_stream *st);

/** @brief Workspace bytes kvc_stream_attend_batch needs for @p n_pos x @p n_q queries (0 for a bad handle). */
size_t kvc_stream_attend_work_bytes(const kvc_stream *st, size_t n_pos, size_t n_q);

/**
 * @brief Batched causal attend: the last @p n_pos appended tokens are the
 *        positions; position p sees everything appended up to itself. Every
 *        cached row is read once per call (kvc_attend_batch_fn).
 * @param q      n_pos x n_q x d finite floats (position-major, then head).
 * @param n_pos  1 .. KVC_MAX_BATCH_POSITIONS, and the positions must still be
 *               exact: n_pos <= the window's tokens + 1 (or every token seen,
 *               while nothing has reached the method).
 * @param out    n_pos x n_q x dv floats.
 * @param mass   NULL, or kvc_stream_view_entries(st) doubles: overwritten with
 *               the attention each view entry received, summed over the queries
 *               (the input of kvc_stream_observe; view order).
 * @param work   kvc_stream_attend_work_bytes(st, n_pos, n_q) bytes of caller
 *               memory, 8-aligned; nothing is kept in it after the call.
 * @return KVC_OK; KVC_E_ARG (sizes, pointers, short workspace); KVC_E_STATE
 *         before the first append; KVC_E_NONFINITE; KVC_E_UNSUPPORTED (the
 *         table lacks the storage type); KVC_E_RANGE (out zeroed); KVC_E_CORRUPT.
 */
kvc_status kvc_stream_attend_batch(const kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_pos,
                                   size_t n_q, float *out, double *mass, void *work, size_t work_bytes);

/** @brief Workspace bytes kvc_stream_attend_part needs for @p n_q heads (0 for a bad handle). */
size_t kvc_stream_attend_part_work_bytes(const kvc_stream *st, size_t n_q);

/**
 * @brief Split-K decode attend: part @p part of @p n_parts of the cache (the
 *        view's entries cut into equal consecutive ranges) for the current
 *        position's @p n_q query heads; writes each head's unnormalised state
 *        (KVC_ATTEND_STATE(dv) doubles) to @p state. Parts are independent and
 *        read-only, so a caller's threads can run them at once;
 *        kvc_attend_merge combines the states into what kvc_stream_attend
 *        computes (to rounding). The library starts no threads.
 * @param part     0 .. n_parts - 1.  @param n_parts 1 .. 1024.
 * @param work     kvc_stream_attend_part_work_bytes(st, n_q) bytes, 8-aligned.
 * @return KVC_OK; KVC_E_ARG; KVC_E_STATE before the first append; KVC_E_NONFINITE;
 *         KVC_E_UNSUPPORTED; KVC_E_CORRUPT.
 */
kvc_status kvc_stream_attend_part(const kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_q,
                                  size_t part, size_t n_parts, double *state, void *work, size_t work_bytes);

/**
 * @brief Query-aware methods: hand the method the attention mass its entries
 *        received (from kvc_stream_attend_batch). Methods without the hook
 *        ignore it.
 * @param mass       kvc_stream_view_entries(st) finite doubles >= 0.
 * @return KVC_OK; KVC_E_ARG (wrong count, negative); KVC_E_NONFINITE; KVC_E_CORRUPT.
 */
kvc_status kvc_stream_observe(kvc_stream *st, const kvc_kernels *kern, const double *mass, size_t n_entries);

/** @brief Workspace bytes kvc_stream_attend_observed needs now for @p n_q heads
 *         (the view grows while the stream fills: ask before each call); 0 for a bad handle. */
size_t kvc_stream_attend_observed_work_bytes(const kvc_stream *st, size_t n_q);

/**
 * @brief The decode step of a query-aware method in one call: attend the
 *        current position (as kvc_stream_attend) and hand the method the
 *        attention each entry received (kvc_stream_observe). For a method that
 *        does not observe (kvc_method_observes = 0) it is kvc_stream_attend.
 * @param q     n_q x d finite floats.  @param out  n_q x dv floats.
 * @param work  kvc_stream_attend_observed_work_bytes(st, n_q) bytes, 8-aligned.
 * @return as kvc_stream_attend_batch; on an error nothing was observed.
 */
kvc_status kvc_stream_attend_observed(kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_q, float *out,
                                      void *work, size_t work_bytes);

/**
 * @brief Query-aware methods: the prompt's last queries (SnapKV's observation
 *        window), typically given once before the prompt is appended.
 * @param q       n_rows x d finite floats.  @param n_rows 1 .. KVC_MAX_BATCH_POSITIONS.
 * @return KVC_OK (also for methods without the hook); KVC_E_ARG; KVC_E_NONFINITE; KVC_E_CORRUPT.
 */
kvc_status kvc_stream_prefill_queries(kvc_stream *st, const kvc_kernels *kern, const float *q, size_t n_rows);

/**
 * @brief Scratch bytes kvc_stream_prefill needs for a prompt of @p n tokens:
 *        0 when the method needs none (every method but balancekv-prefill in
 *        mode offline, and that one once its prompt is in). One buffer of the
 *        largest size serves every stream of a cache in turn: the walk's
 *        working memory is paid once, not in each stream's arena.
 * @param n  1 .. KVC_MAX_PREFILL_TOKENS; 0 is returned for a bad handle or n.
 */
size_t kvc_stream_prefill_work_bytes(const kvc_stream *st, size_t n);

/**
 * @brief Append @p n tokens at once: the same as n calls of
 *        kvc_stream_append, except for balancekv-prefill in mode offline,
 *        which stages the prompt tokens that reach it and, at the call's
 *        end, compresses them as BalanceKV's authors do (kvc_balancekv_offline:
 *        T rounds over blocks of 256, one sign per token, one split per
 *        round), keeping only the survivors with their weights. In that mode
 *        the prompt must come through this call: a plain append that would
 *        hand the method a token before it is refused (KVC_E_CAPACITY), and
 *        after the first call every later token goes to the method's tail.
 *        The method reads the caller's f32 rows, not the window's stored copy;
 *        tokens appended before the call that reach it during the call (up
 *        to n_sink + n_window + 1 plain appends are allowed first) come as
 *        the window's rows, copied into @p work as they arrive.
 * @param keys, values  row i at keys + i * key_stride (values + i * value_stride), finite.
 * @param key_stride    >= d floats.  @param value_stride  >= dv floats.
 * @param n             1 .. KVC_MAX_PREFILL_TOKENS.
 * @param work          kvc_stream_prefill_work_bytes(st, n) bytes, 8-aligned (NULL when that is 0),
 *                      overlapping none of the rows (the call writes it while it reads them).
 * @return KVC_OK; refusals before the first write leave the stream unchanged:
 *         KVC_E_ARG (NULL rows, strides, n, work overlapping the rows), KVC_E_ARENA (short or
 *         misaligned work), KVC_E_NONFINITE (any element), KVC_E_CAPACITY
 *         (positions past 2^32), KVC_E_BACKEND / KVC_E_UNSUPPORTED (the
 *         kernel table), KVC_E_STATE / KVC_E_CORRUPT (bad handle). A capacity
 *         refusal of one append (an exact store or tail that is full) stops
 *         the call there: the tokens before it stay appended, as a loop of
 *         appends would leave them, and what was staged is still compressed.
 */
kvc_status kvc_stream_prefill(kvc_stream *st, const kvc_kernels *kern, const float *keys, size_t key_stride,
                              const float *values, size_t value_stride, size_t n, void *work, size_t work_bytes);

/**
 * @brief Decide whether an appended token is a protected-span centre,
 *        replacing the key-outlier test's verdict on it: with @p centre 1,
 *        when it leaves the window it and the tokens within protect_radius
 *        positions of it go to the protected rows (first come, first kept,
 *        like every span); with 0 it is not a centre, whatever its key. For a
 *        caller that scores tokens itself (e.g. KVzip's reconstruction scores,
 *        kvc bench recall --protect-marks kvzip): marking every token as it
 *        enters the window leaves the spans to the caller alone. A mark
 *        changes only the window's flag byte of that token.
 * @param token   the token's position, 0-based in append order; it must be in
 *                the window: appended and followed by at least one more append
 *                (the newest token is pending: mark it after the next append),
 *                and not yet gone to the method or the protected rows.
 * @param centre  1 (a centre) or 0 (not one).
 * @return KVC_OK (set, or a sink: held exactly already); KVC_E_ARG (centre not
 *         0 or 1, or a token not in the window: not yet, or no longer;
 *         nothing changed); KVC_E_UNSUPPORTED (no protected spans or no
 *         window); KVC_E_STATE / KVC_E_CORRUPT (bad handle).
 */
kvc_status kvc_stream_mark(kvc_stream *st, uint64_t token, int centre);

/** The protected spans' outlier test's running state for one kv head, for
 *  kvc_outlier_flags: zero it before a sequence's first key. */
typedef struct kvc_outlier_state {
    double mu, var; /**< moving mean and variance of a key's cosine to the keys before it */
    uint64_t seen;  /**< keys passed so far (the test is warm from the 64th on) */
} kvc_outlier_state;

/**
 * @brief The protected spans' key-outlier test, outside a stream: for an
 *        engine that keeps its own cache (a paged pool) and wants the
 *        centres a stream's window would flag. Key i is an outlier when its
 *        cosine to the sum of the (at most 32) keys before it falls more than
 *        3 moving standard deviations below the moving mean of that cosine
 *        (the stream's test; no verdict with fewer than 8 keys before it, nor
 *        before the 64th key). Call it again with the next keys and the last
 *        keys as @p context to continue a sequence.
 * @param state      the head's running state, updated (zeroed to start).
 * @param context    the keys just before @p keys, oldest first, rows @p stride
 *                   floats apart; NULL when @p n_context is 0.
 * @param n_context  0 .. 32.
 * @param keys       n keys of d floats, row i at keys + i * stride.
 * @param d          1 .. KVC_MAX_HEAD_DIM; @p stride >= d.
 * @param flags      n bytes: 1 for an outlier, else 0.
 * @return KVC_OK; KVC_E_ARG (a null pointer, d, stride or n_context out of
 *         range); KVC_E_NONFINITE (a NaN or Inf in a key or the context).
 *         On an error nothing is written.
 */
kvc_status kvc_outlier_flags(kvc_outlier_state *state, const float *context, uint32_t n_context, const float *keys,
                             uint32_t n, uint32_t d, size_t stride, uint8_t *flags);

/**
 * @brief Whole spans (sentences, say) for a stream's protected rows, chosen
 *        by a caller's per-token scores (each token's surprisal, or KVzip's
 *        reconstruction score): the spans in order of falling mean score
 *        (ties: the earlier), each taken while its tokens plus 2 * radius fit
 *        in what is left of @p budget; spans starting before @p first are
 *        skipped (the sinks hold them). The chosen spans' tokens get
 *        marks[t] = 1, all others 0: the centres to give kvc_stream_mark as
 *        the tokens enter the window (the spans then hold them, as
 *        protect_radius says). No allocation; O(n_spans x n) time.
 * @param scores    n finite scores.
 * @param span_end  n_spans ends, strictly increasing, the last equal to n:
 *                  span i is [span_end[i - 1], span_end[i]), span 0 from 0.
 * @param first     the first token a span may start at (the stream's n_sink).
 * @param budget    tokens of protected rows (the plan's n_protect).
 * @param radius    the plan's protect_radius: what each span costs beyond its tokens.
 * @param marks     n bytes, written.
 * @return KVC_OK; KVC_E_ARG (a null pointer, n or n_spans 0, ends not
 *         strictly increasing to n); KVC_E_NONFINITE (a NaN or Inf score).
 *         On an error nothing is written.
 */
kvc_status kvc_spans_choose(const float *scores, uint32_t n, const uint32_t *span_end, uint32_t n_spans, uint32_t first,
                            uint32_t budget, uint32_t radius, uint8_t *marks);

/**
 * @brief The spans kvc_spans_choose takes, from each token's text: a token
 *        whose text holds '.', '!', '?' or a line break ends a sentence; with
 *        @p surprisal, a token that is a space and an ASCII capital letter on,
 *        with a surprisal above the prompt's mean by more than @p split_sigma
 *        standard deviations (token 0 left out of mean and deviation), starts
 *        a span too: text inserted mid-sentence (a needle cut into prose) is
 *        then a span of its own rather than diluting the mean of the sentence
 *        it interrupts. No allocation; O(n) time plus the texts' lengths.
 * @param texts        n NUL-terminated token texts (UTF-8, as decoded).
 * @param surprisal    n finite floats (-log p of each token given the ones
 *                     before it), or NULL for sentences alone.
 * @param n            1 .. UINT32_MAX tokens.
 * @param split_sigma  0 .. 100 (1.5 in the press); ignored without surprisal.
 * @param span_end     room for n ends, written strictly increasing, the last = n.
 * @param n_spans      out: the number of spans (1 .. n).
 * @return KVC_OK; KVC_E_ARG (a null pointer, n 0, split_sigma out of range);
 *         KVC_E_NONFINITE (a NaN or Inf surprisal). On an error nothing is
 *         written.
 */
kvc_status kvc_sentence_ends(const char *const *texts, const float *surprisal, uint32_t n, float split_sigma,
                             uint32_t *span_end, uint32_t *n_spans);

/** Number of leading segments of a stream's view that are its exact regions:
 *  the sinks in KIVI4 blocks and in rows, the window ring's closed tokens in two
 *  pieces, the open block (f16), the current token (these six hold the most recent
 *  tokens in token order: the causal block of a batched attend), the protected
 *  spans. The method's own segments follow them. A plan without key blocks
 *  (every type but KIVI4) leaves the blocks' and the open block's segments empty. */
#define KVC_STREAM_EXACT_SEGMENTS 7u

/** @brief The weighted cache the next attend would use (pointers into the arena). */
kvc_status kvc_stream_view(const kvc_stream *st, kvc_view *view);

#endif /* KVC_ADVANCED */

/**
 * @brief Full validation of a stream arena, e.g. one restored from a snapshot:
 *        alignment, magic and format version, the plan recomputed from the
 *        stored configuration and compared, the layout, every counter and
 *        index of the wrapper and of the method, and that the arena holds it.
 *
 * Every call that takes a stream (append, attend, view, stats) also runs the
 * cheap part of these checks (a digest of the fixed header instead of the
 * plan recomputation), so a corrupted header gives a status, never an
 * out-of-bounds access. Corrupted *data* (a key turned into another finite
 * number, or NaN) cannot be detected this way; kvc_stream_checksum can.
 *
 * @param arena        the restored bytes (any pointer; NULL gives KVC_E_ARG).
 * @param arena_bytes  how many bytes are readable at @p arena.
 * @return KVC_OK; KVC_E_ARENA (misaligned, or shorter than the plan says);
 *         KVC_E_STATE (no stream magic: never initialised);
 *         KVC_E_CORRUPT (anything else that does not check out).
 */
kvc_status kvc_stream_validate(const void *arena, size_t arena_bytes);

/**
 * @brief 64-bit checksum of every byte of the stream's arena (its data
 *        included). Store it beside a snapshot and compare after restoring
 *        to detect corrupted data, which validation cannot see.
 * @return the checksum, or 0 for a handle that does not validate.
 */
uint64_t kvc_stream_checksum(const kvc_stream *st);

/** @brief The configuration the stream was built from (NULL for a handle that does not check out). */
const kvc_stream_config *kvc_stream_get_config(const kvc_stream *st);

/** Words of a stream's method counters (kvc_method_counters), the same in both tiers. */
#define KVC_METHOD_COUNTERS_WORDS 8

#if defined(KVC_ADVANCED)
/** @brief The plan the stream was built from (NULL for a handle that does not check out). */
const kvc_stream_plan *kvc_stream_get_plan(const kvc_stream *st);

/**
 * @brief The method's derived parameters as " name=value" pairs (e.g. SubGen's
 *        " t=8 s=188 m_max=41 delta0=0"), from the method's own describe.
 * @return the length the whole text needs (as snprintf); @p buf (when cap > 0)
 *         is NUL-terminated, "" for a method with nothing to add.
 */
size_t kvc_stream_plan_describe(const kvc_stream_config *cfg, const kvc_stream_plan *plan, char *buf, size_t cap);

/** The counters of the method a stream runs (only that method's are written; the rest are 0). */
typedef struct kvc_method_counters {
    /* SubGen */
    uint32_t clusters;  /**< live clusters */
    uint32_t doublings; /**< radius doublings (bounded-memory rule) */
    uint32_t merges;    /**< clusters absorbed by merges */
    /* BalanceKV */
    uint32_t buckets;     /**< live numerator buckets */
    uint64_t clip_events; /**< walk steps whose probability was clipped */
    uint64_t halvings;    /**< SoftmaxBalance calls */
    uint64_t dropped;     /**< tokens dropped by erased buckets (rho > 0) */
    double delta;         /**< SubGen: current radius */
    /* Express */
    uint32_t round;                                     /**< r: thinning factor t = 4^r */
    uint32_t reserved_;                                 /**< 0 */
    uint64_t reserved2_[KVC_METHOD_COUNTERS_WORDS - 7]; /**< 0: room for counters to come */
} kvc_method_counters;
#else
/** The method's counters, opaque here: kvc_stream_stats_describe prints them. */
typedef struct kvc_method_counters {
    uint64_t opaque_[KVC_METHOD_COUNTERS_WORDS];
} kvc_method_counters;
#endif

/** Live counters of a stream. */
typedef struct kvc_stream_stats {
    uint64_t tokens_seen;      /**< appends accepted */
    uint64_t elements;         /**< cache elements held now */
    uint64_t peak_elements;    /**< max of elements over the stream's life */
    uint64_t method_tokens_in; /**< tokens handed to the method so far */
    uint64_t
        observes; /**< H2O / TOVA: kvc_stream_observe calls the method received; SnapKV: observation rows it holds */
    uint32_t protected_tokens;    /**< tokens held in the protected spans (n_protect) */
    uint32_t reserved_;           /**< 0 */
    kvc_method_counters counters; /**< the method's own (SubGen's clusters, BalanceKV's halvings, ...) */
} kvc_stream_stats;

/** @brief Current counters (KVC_E_STATE / KVC_E_CORRUPT for a bad handle). */
kvc_status kvc_stream_get_stats(const kvc_stream *st, kvc_stream_stats *stats);

/** @brief One line of the method's live counters ("subgen: clusters=..."), "" when it has none; returns as above. */
size_t kvc_stream_stats_describe(kvc_method m, const kvc_stream_stats *stats, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif /* KVC_STREAM_H */
