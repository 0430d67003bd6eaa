/**
 * @file kvc_method_list.h
 * @brief The one list of compression methods. The kvc_method enum, the
 *        registry (kvc_method_count / kvc_method_at / names), and every
 *        iteration over methods in the library, the command line, the oracle
 *        and the tests are generated from it.
 *
 * Adding a method: one line here, and a file core/src/methods/<ident>.c that
 * defines `const kvc_method_ops kvc_method_ops_<ident>` (see core/src/methods.h
 * and the README's "Adding a method").
 *
 *   X(ident, ENUM_NAME, value, one-line description)
 */
#ifndef KVC_METHOD_LIST_H
#define KVC_METHOD_LIST_H

/* A build may append methods of its own (tests/unit/test_hooks.c adds a toy
 * query-aware one): define KVC_EXTRA_METHODS(X) for the whole build. */
#ifndef KVC_EXTRA_METHODS
#define KVC_EXTRA_METHODS(X)
#endif

#define KVC_METHOD_LIST(X)                                                                                     \
    X(exact, EXACT, 1, "keep everything; refuses (KVC_E_CAPACITY) when full")                                 \
    X(sink_window, SINK_WINDOW, 2, "StreamingLLM: sinks + FIFO window, drop the middle")                      \
    X(uniform, UNIFORM, 3, "reservoir sample of the middle, weight seen/kept")                                \
    X(subgen, SUBGEN, 4, "SubGen: key clusters + value-norm reservoir")                                       \
    X(balancekv, BALANCEKV, 5, "BalanceKV: value-norm buckets of MergeAndReduce trees of SoftmaxBalance")     \
    X(balancekv_prefill, BALANCEKV_PREFILL, 6,                                                                 \
      "BalanceKV's prefill compression: T rounds of halving blocks of b, causal replay, then an exact tail")  \
    X(express, EXPRESS, 7, "Thinformer Express: kernel halving, Compress2, Subsample (docs/express.md)")            \
    X(express_prefill, EXPRESS_PREFILL, 8,                                                                     \
      "Express over a known prompt (equal to Offline-Express on it), then an exact tail")                     \
    X(knorm, KNORM, 9, "K-norm (Devoto et al. 2024): the lowest-L2-norm keys, sinks and window exact")       \
    X(keydiff, KEYDIFF, 10, "KeyDiff (Park et al. 2025): evict the key most similar to the mean normalised key") \
    X(h2o, H2O, 11, "H2O (Zhang et al. 2023): evict the lowest accumulated attention; needs observed attends")   \
    X(tova, TOVA, 12, "TOVA (Oren et al. 2024): evict the lowest attention of the last query; needs observed attends") \
    X(snapkv, SNAPKV, 13, "SnapKV (Li et al. 2024): keep what the prompt's last queries attend to; give them first")   \
    KVC_EXTRA_METHODS(X)

#endif
