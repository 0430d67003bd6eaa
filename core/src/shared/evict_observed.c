/* Attention collected while recent, for the score methods that observe
 * (H2O, TOVA): shared/evict.h. The own region: a header (observes, ring),
 * then the ring's token tags and masses. */
#include "shared/evict.h"

typedef struct observed_header {
    uint64_t observes;
    uint32_t ring; /* n_window + 1 accumulators */
    uint32_t pad_;
} observed_header;
_Static_assert(sizeof(observed_header) <= KVC_EVICT_OBSERVED_FIXED, "the header fits the own region's fixed part");

typedef struct observed_ring {
    observed_header *h;
    uint64_t *tok;
    double *mass;
} observed_ring;

static observed_ring ring_of(unsigned char *own, uint32_t ring)
{
    observed_ring r = {(observed_header *)(void *)own, (uint64_t *)(void *)(own + KVC_EVICT_OBSERVED_FIXED), NULL};
    r.mass = (double *)(void *)(own + KVC_EVICT_OBSERVED_FIXED + (size_t)ring * sizeof(uint64_t));
    return r;
}

void kvc_evict_observed_init(kvc_evict_state *s, unsigned char *own, const kvc_stream_plan *p)
{
    (void)s;
    const observed_ring r = ring_of(own, p->n_window + 1u);
    r.h->ring = p->n_window + 1u;
    /* no token has the tag UINT64_MAX, so every accumulator starts empty */
    for (uint32_t i = 0; i < r.h->ring; i++) r.tok[i] = UINT64_MAX;
}

int kvc_evict_observed_check(const kvc_evict_state *s, const unsigned char *own, const kvc_stream_plan *p)
{
    (void)s;
    return ((const observed_header *)(const void *)own)->ring == p->n_window + 1u;
}

double kvc_evict_observed_score(kvc_evict_state *s, const kvc_method_ctx *cx, const float *k, const float *v,
                                uint64_t token)
{
    (void)k, (void)v;
    const observed_ring r = ring_of(kvc_evict_own(s), cx->plan->n_window + 1u);
    const uint32_t i = (uint32_t)(token % r.h->ring);
    const double mine = r.tok[i] == token ? r.mass[i] : 0.0;
    r.tok[i] = UINT64_MAX, r.mass[i] = 0.0;
    return mine;
}

static void observe_with(void *st, const double *mass, size_t n, const double *recent, size_t n_recent,
                         uint64_t first_recent, int accumulate)
{
    kvc_evict_state *s = (kvc_evict_state *)st;
    unsigned char *own = kvc_evict_own(s);
    const observed_ring r = ring_of(own, ((observed_header *)(void *)own)->ring);
    double *score = kvc_evict_scores(s);
    for (size_t i = 0; i < n && i < s->count; i++) score[i] = accumulate ? score[i] + mass[i] : mass[i];
    for (size_t i = 0; i < n_recent && i < r.h->ring; i++) {
        const uint64_t t = first_recent + i;
        const uint32_t j = (uint32_t)(t % r.h->ring);
        if (r.tok[j] != t) r.tok[j] = t, r.mass[j] = 0.0;
        r.mass[j] = accumulate ? r.mass[j] + recent[i] : recent[i];
    }
    r.h->observes++;
}

void kvc_evict_observe_add(void *st, const kvc_method_ctx *cx, const double *mass, size_t n, const double *recent,
                           size_t n_recent, uint64_t first_recent)
{
    (void)cx;
    observe_with(st, mass, n, recent, n_recent, first_recent, 1);
}

void kvc_evict_observe_set(void *st, const kvc_method_ctx *cx, const double *mass, size_t n, const double *recent,
                           size_t n_recent, uint64_t first_recent)
{
    (void)cx;
    observe_with(st, mass, n, recent, n_recent, first_recent, 0);
}

void kvc_evict_observed_stats(const void *st, kvc_stream_stats *stats)
{
    const kvc_evict_state *s = (const kvc_evict_state *)st;
    stats->observes = ((const observed_header *)(const void *)kvc_evict_own_c(s))->observes;
}

void kvc_evict_observed_describe_stats(const kvc_stream_stats *s, kvc_text *out)
{
    kvc_text_add(out, "observes=%llu", (unsigned long long)s->observes);
}
