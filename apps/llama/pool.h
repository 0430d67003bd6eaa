/**
 * @file pool.h
 * @brief The decoder's worker threads (the library itself starts none): a
 *        fixed set of threads that run the tasks of one parallel step, the
 *        calling thread among them. The decoder splits its matrix products by
 *        output panels and each cache attend by kv head x split-K part
 *        (kvc_stream_attend_part + kvc_attend_merge).
 */
#ifndef KVC_POOL_H
#define KVC_POOL_H

#include <stddef.h>

/** Use @p n threads in all (1 .. KVC_POOL_MAX; 1 = the caller alone, no
 *  worker). Stops the previous workers first. 0 ok, -1 bad count or a thread
 *  that could not start (then the pool is left at 1 thread). */
int kvc_pool_set_threads(int n);

/** Threads in use (1 when the pool was never started). */
int kvc_pool_threads(void);

/** Run fn(ctx, i) for every i < n on the pool's threads, the caller included;
 *  returns when all have run. Tasks must be independent. Not reentrant: one
 *  step at a time, from one thread. */
void kvc_pool_run(size_t n, void (*fn)(void *ctx, size_t i), void *ctx);

#define KVC_POOL_MAX 64
#endif
