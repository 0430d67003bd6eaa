/* The decoder's worker threads (see pool.h). A step is published by bumping a
 * generation number under the mutex; workers claim task indices with an
 * atomic counter, and the caller, after taking its share, waits for the done
 * count. Workers spin briefly on the generation before sleeping on the
 * condition variable: a decode step issues a few hundred short parallel
 * steps, and a sleep/wake per step would cost more than the work. */
#define _POSIX_C_SOURCE 200809L
#include "pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_wake = PTHREAD_COND_INITIALIZER;
static struct {
    pthread_t tid[KVC_POOL_MAX];
    int n_workers;
    atomic_uint gen; /* bumped per step (and on stop) */
    atomic_int stop;
    /* the current step */
    void (*fn)(void *ctx, size_t i);
    void *ctx;
    size_t n;
    atomic_size_t next, done;
} P;

static void take_tasks(void)
{
    size_t i;
    while ((i = atomic_fetch_add(&P.next, 1)) < P.n) {
        P.fn(P.ctx, i);
        atomic_fetch_add(&P.done, 1);
    }
}

static void *worker(void *arg)
{
    (void)arg;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load(&P.gen)) == seen && spins < 20000) spins++, sched_yield();
        if (g == seen) {
            pthread_mutex_lock(&pool_mu);
            while ((g = atomic_load(&P.gen)) == seen) pthread_cond_wait(&pool_wake, &pool_mu);
            pthread_mutex_unlock(&pool_mu);
        }
        seen = g;
        if (atomic_load(&P.stop)) return NULL;
        take_tasks();
    }
}

static void stop_workers(void)
{
    if (P.n_workers == 0) return;
    pthread_mutex_lock(&pool_mu);
    atomic_store(&P.stop, 1);
    atomic_fetch_add(&P.gen, 1);
    pthread_cond_broadcast(&pool_wake);
    pthread_mutex_unlock(&pool_mu);
    for (int i = 0; i < P.n_workers; i++) pthread_join(P.tid[i], NULL);
    P.n_workers = 0;
    atomic_store(&P.stop, 0);
}

int kvc_pool_set_threads(int n)
{
    if (n < 1 || n > KVC_POOL_MAX) return -1;
    stop_workers();
    for (int i = 0; i < n - 1; i++) {
        if (pthread_create(&P.tid[i], NULL, worker, NULL) != 0) {
            stop_workers();
            return -1;
        }
        P.n_workers++;
    }
    return 0;
}

int kvc_pool_threads(void) { return P.n_workers + 1; }

void kvc_pool_run(size_t n, void (*fn)(void *ctx, size_t i), void *ctx)
{
    if (P.n_workers == 0 || n <= 1) {
        for (size_t i = 0; i < n; i++) fn(ctx, i);
        return;
    }
    P.fn = fn, P.ctx = ctx, P.n = n;
    atomic_store(&P.done, 0);
    atomic_store(&P.next, 0);
    pthread_mutex_lock(&pool_mu);
    atomic_fetch_add(&P.gen, 1);
    pthread_cond_broadcast(&pool_wake);
    pthread_mutex_unlock(&pool_mu);
    take_tasks();
    while (atomic_load(&P.done) < n) sched_yield();
}
