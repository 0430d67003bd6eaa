/**
 * @file kvc_method_list.h
 * @brief The one list of compression methods. The kvc_method enum, the
 *        registry (kvc_method_count / kvc_method_at / names), and every
 *        iteration over methods in the library, the command line, the oracle
 *        and the tests are generated from it.
 *
 * Adding a method: one line here, and a file core/src/methods/<ident>.c that
 * defines `const kvc_method_ops kvc_method_ops_<ident>` (see core/src/methods.h
 * and docs/extending.md).
 *
 *   X(ident, ENUM_NAME, value, name, kvpress name, one-line summary)
 *
 * The name is the one every interface spells (kvc_method_name, the command
 * line, CMake's KVC_METHODS, CSV files, Python). The kvpress name is the
 * press that computes the same thing in NVIDIA's kvpress ("" when it has
 * none); kvc_method_parse accepts it as an alias (no_press, streaming_llm,
 * random, knorm, keydiff, observed_attention, tova, snapkv).
 */
#ifndef KVC_METHOD_LIST_H
#define KVC_METHOD_LIST_H

/* A build may append methods of its own (tests/unit/test_hooks.c adds a toy
 * query-aware one): define KVC_EXTRA_METHODS(X) for the whole build. */
#ifndef KVC_EXTRA_METHODS
#define KVC_EXTRA_METHODS(X)
#endif

#define KVC_METHOD_LIST(X)                                                                                             \
    X(exact, EXACT, 1, "exact", "no_press", "every token; refuses (KVC_E_CAPACITY) when the budget is full")           \
    X(sink_window, SINK_WINDOW, 2, "sink-window", "streaming_llm",                                                     \
      "StreamingLLM: the first n_sink tokens and a FIFO of the most recent")                                           \
    X(uniform, UNIFORM, 3, "uniform", "random",                                                                        \
      "sinks, window, and a uniform reservoir of the rest (weight seen/kept)")                                         \
    X(subgen, SUBGEN, 4, "subgen", "", "SubGen: key clusters (denominator) + a value-norm reservoir (numerator)")      \
    X(balancekv, BALANCEKV, 5, "balancekv", "",                                                                        \
      "BalanceKV streaming: value-norm buckets of MergeAndReduce trees + a keys-only denominator tree")                \
    X(balancekv_prefill, BALANCEKV_PREFILL, 6, "balancekv-prefill", "",                                                \
      "BalanceKV prefill: the prompt compressed by rounds of halving blocks, then a reservoir (or exact) tail")        \
    X(express, EXPRESS, 7, "express", "", "Thinformer Express: kernel halving, streaming Compress2 and Subsample")     \
    X(express_prefill, EXPRESS_PREFILL, 8, "express-prefill", "",                                                      \
      "Express with s sized for a known prompt (equal to Offline-Express on it), then a reservoir (or exact) tail")    \
    X(knorm, KNORM, 9, "knorm", "knorm", "K-norm: the tokens whose keys have the lowest L2 norm (weight 1)")           \
    X(keydiff, KEYDIFF, 10, "keydiff", "keydiff",                                                                      \
      "KeyDiff: evict the key most similar (cosine) to the sum of the normalised keys held (weight 1)")                \
    X(h2o, H2O, 11, "h2o", "observed_attention",                                                                       \
      "H2O: evict the lowest accumulated attention (observed queries); weight 1")                                      \
    X(tova, TOVA, 12, "tova", "tova", "TOVA: evict the lowest attention of the last observed query; weight 1")         \
    X(snapkv, SNAPKV, 13, "snapkv", "snapkv",                                                                          \
      "SnapKV: keep the tokens the prompt's last queries (given first) attend to most, pooled; weight 1")              \
    X(expected_attention, EXPECTED_ATTENTION, 14, "expected-attention", "",                                            \
      "keep the tokens coming queries are expected to attend to most (a Gaussian fit of the prompt's last queries)")   \
    KVC_EXTRA_METHODS(X)

/* How many methods the list holds (a build's extra ones included): the bound
 * the registry's contracts state, counted here rather than written by hand. */
#define KVC_METHOD_LIST_ONE(ident, NAME, value, name, kvpress, summary) +1
#define KVC_METHOD_LIST_COUNT                                           (0 KVC_METHOD_LIST(KVC_METHOD_LIST_ONE))

#endif
