// The injected-bug matrix's switch (tests/bug_matrix.sh, accel/cuda/README.md).
//
// A build with KVC_BUG_MATRIX=1 (the matrix's test binaries only, on the CPU
// SIMT runtime) compiles every injected bug into the kernels, each behind a
// test of kvc_injected_bug, which the test driver sets from the environment
// variable KVC_BUG (0 or unset: none). One binary per runtime flavour then
// serves every row of the matrix, where a compile-time switch needed one
// build of the kernels per bug and flavour (33 compilations of the two
// kernel sources, most of the CI build). Every other build, the library's
// among them, leaves KVC_BUG_MATRIX undefined: the tests are preprocessed out
// and its kernels are the clean ones, line for line.
#ifndef KVC_CUDA_INJECTED_BUG_CUH
#define KVC_CUDA_INJECTED_BUG_CUH

#ifndef KVC_BUG_MATRIX
#define KVC_BUG_MATRIX 0
#endif

#if KVC_BUG_MATRIX
/** The bug injected into this run's kernels: 0 none, 1..16 the matrix's rows. */
extern int kvc_injected_bug;
#endif

#endif
