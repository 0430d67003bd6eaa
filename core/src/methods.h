/* Internal interface every compression method implements for the stream
 * wrapper (stream.c). Each method's state is the header at the start of its
 * own sub-arena; `update` is only called after `can_accept` said yes, and it
 * cannot fail, so a rejected append never leaves a half-updated state. */
#ifndef KVC_METHODS_H
#define KVC_METHODS_H

#include "kvc/kvc_stream.h"

/* ---- exact: every token, refuses when full ---- */
size_t kvc_exact_arena_size(uint32_t d, uint32_t dv, uint32_t capacity);
void kvc_exact_init(void *arena, uint32_t d, uint32_t dv, uint32_t capacity);
int kvc_exact_can_accept(const void *st);
void kvc_exact_update(void *st, const float *k, const float *v, uint64_t token);
size_t kvc_exact_view(const void *st, kvc_segment *seg); /* returns segments written */
uint64_t kvc_exact_elements(const void *st);

/* ---- uniform: reservoir (Vitter R) of the method's tokens, weight seen/kept ---- */
size_t kvc_uniform_arena_size(uint32_t d, uint32_t dv, uint32_t capacity);
void kvc_uniform_init(void *arena, uint32_t d, uint32_t dv, uint32_t capacity, uint64_t seed);
void kvc_uniform_update(void *st, const float *k, const float *v, uint64_t token);
size_t kvc_uniform_view(const void *st, kvc_segment *seg);
uint64_t kvc_uniform_elements(const void *st);

/* ---- subgen: clusters of keys (denominator) + value-norm reservoir (numerator) ---- */
size_t kvc_subgen_arena_size(uint32_t d, uint32_t dv, uint32_t t, uint32_t s, uint32_t m_max);
void kvc_subgen_init(void *arena, uint32_t d, uint32_t dv, uint32_t t, uint32_t s, uint32_t m_max,
                     float delta0, uint64_t seed);
void kvc_subgen_update(void *st, const kvc_kernels *kern, const float *k, const float *v,
                       uint64_t token);
size_t kvc_subgen_view(const void *st, kvc_segment *seg);
uint64_t kvc_subgen_elements(const void *st);
void kvc_subgen_fill_stats(const void *st, kvc_stream_stats *stats);

/* ---- balancekv: value-norm buckets of MergeAndReduce trees + a denominator tree ---- */
size_t kvc_balancekv_arena_size(const kvc_stream_plan *p);
size_t kvc_balancekv_scratch_bytes(const kvc_stream_plan *p);
void kvc_balancekv_init(void *arena, const kvc_stream_plan *p, uint64_t seed);
void kvc_balancekv_update(void *st, const float *k, const float *v, uint64_t token);
size_t kvc_balancekv_view(const void *st, kvc_segment *seg);
uint64_t kvc_balancekv_elements(const void *st);
void kvc_balancekv_fill_stats(const void *st, kvc_stream_stats *stats);

/* ---- balancekv-prefill: one MergeAndReduce tree over the prompt (top accumulates) + exact tail ---- */
size_t kvc_bkv_prefill_top_cap(uint64_t m, uint32_t t, uint32_t T);
size_t kvc_bkv_prefill_arena_size(const kvc_stream_plan *p);
void kvc_bkv_prefill_init(void *arena, const kvc_stream_plan *p, uint64_t seed);
int kvc_bkv_prefill_can_accept(const void *st);
void kvc_bkv_prefill_update(void *st, const float *k, const float *v, uint64_t token);
size_t kvc_bkv_prefill_view(const void *st, kvc_segment *seg);
uint64_t kvc_bkv_prefill_elements(const void *st);
void kvc_bkv_prefill_fill_stats(const void *st, kvc_stream_stats *stats);

/* ---- express: Thinformer Express (kernel halving, Compress2, Subsample) ---- */
size_t kvc_express_arena_size(const kvc_stream_plan *p);
size_t kvc_express_scratch_bytes(const kvc_stream_plan *p);
void kvc_express_init(void *arena, const kvc_stream_plan *p, uint64_t seed);
void kvc_express_update(void *st, const float *k, const float *v, uint64_t token);
size_t kvc_express_view(const void *st, kvc_segment *seg);
uint64_t kvc_express_elements(const void *st);
void kvc_express_fill_stats(const void *st, kvc_stream_stats *stats);
int kvc_express_can_accept(const void *st);
uint64_t kvc_express_prefix_worst(uint64_t m, uint64_t s, uint64_t c);

#endif
