#include <math.h>
#include <stdint.h>
#include <string.h>

#include "stream_internal.h"

/* ---- KIVI4 key blocks in the in-order regions (plan.key_blocks) ----
 * docs/architecture.md "KIVI4 in the in-order regions". The sinks and the
 * window keep their keys in KIVI4 blocks of 32 tokens wherever whole blocks
 * fit (a KIVI4 plan's window is a multiple of 32; the sinks' last
 * n_sink mod 32 tokens stay int4 rows), each block in the bytes of its 32
 * int4 rows, so no region changes size. A block's new tokens wait in the
 * open block (32 f16 key rows, 32 f16 value rows, after the method's bytes)
 * and are quantised together when the block's last slot is written: by then
 * every older token of that ring block has left the window (eviction stays
 * one token at a time, oldest first, so the counters and their proofs are
 * the row types'). Values are int4 rows, written at once; the open block's
 * f16 copy is what the view reads until the block closes.
 *
 * trusted-by (the helpers below, outside the proof jobs): each writes only
 * the row array and the open block it is given, inside the regions the
 * proved layout places apart (wp_sizes); tests/unit/test_stream.c
 * kivi4_regions_match_blocks checks every token of KIVI4 streams against
 * blocks quantised independently, also under ASan in CI. */

/* Slots [0, blocked) of an n-slot region hold KIVI4 blocks. */
uint32_t kvc_stream_blocked_slots(const kvc_stream *st, uint32_t n)
{
    return st->plan.key_blocks ? n / KVC_KIVI_BLOCK * KVC_KIVI_BLOCK : 0u;
}

/* Tokens in the open block: the newest of the sinks (while they fill) or of the window. */
uint32_t kvc_stream_open_count(const kvc_stream *st)
{
    const kvc_stream_plan *p = &st->plan;
    if (!p->key_blocks) return 0;
    if (st->sink_used < p->n_sink) {
        const uint32_t sb = kvc_stream_blocked_slots(st, p->n_sink);
        return st->sink_used < sb ? st->sink_used % KVC_KIVI_BLOCK : 0u;
    }
    if (p->n_window == 0) return 0;
    uint32_t next = st->win_head + st->win_count; /* the slot the next token takes */
    if (next >= p->n_window) next -= p->n_window;
    return next % KVC_KIVI_BLOCK;
}

static const kvc_row_kernels *f16_rows(void) { return &kvc_kernels_ref()->rows[KVC_DTYPE_F16]; }
static unsigned char *open_key_row(const stream_regions *R, const kvc_stream_plan *p, uint32_t slot)
{
    return R->open + (size_t)(slot % KVC_KIVI_BLOCK) * kvc_row_bytes(KVC_DTYPE_F16, p->d);
}
static unsigned char *open_value_row(const stream_regions *R, const kvc_stream_plan *p, uint32_t slot)
{
    return R->open + KVC_ALIGN_UP((uint64_t)KVC_KIVI_BLOCK * kvc_row_bytes(KVC_DTYPE_F16, p->d)) +
           (size_t)(slot % KVC_KIVI_BLOCK) * kvc_row_bytes(KVC_DTYPE_F16, p->dv);
}

/* Slot i of an n-slot in-order region gets the key (is_key) or the value x. */
void kvc_stream_blocks_store(const kvc_stream *st, const stream_regions *R, const kvc_rows *r, uint32_t i, uint32_t n,
                             const float *x, int is_key)
{
    if (i >= kvc_stream_blocked_slots(st, n)) { /* the sinks' int4 tail */
        kvc_row_store(r, i, x);
        return;
    }
    if (!is_key) { /* values: the int4 row now, the f16 copy for the view until the block closes */
        kvc_row_store(r, i, x);
        f16_rows()->store(open_value_row(R, &st->plan, i), x, r->dim);
        return;
    }
    f16_rows()->store(open_key_row(R, &st->plan, i), x, r->dim);
    if (i % KVC_KIVI_BLOCK == KVC_KIVI_BLOCK - 1u) /* the block's last slot: quantise the block */
        kvc_kivi4_key_block_store_f16(r->base + (size_t)(i / KVC_KIVI_BLOCK) * KVC_KIVI_BLOCK * r->stride, R->open,
                                      KVC_KIVI_BLOCK, r->dim);
}

/* The key of window slot `slot` (a closed one: the oldest token, leaving) into x. */
void kvc_stream_window_key_load(const kvc_stream *st, const stream_regions *R, uint32_t slot, float *x)
{
    if (st->plan.key_blocks)
        kvc_kivi4_key_load(R->wk.base, slot, x, st->plan.d);
    else
        kvc_row_load(&R->wk, slot, x);
}

/* The key of window slot `slot` (closed) into protected row `at`, through
 * the staging row (which a quantised plan has: header_ok refuses key blocks
 * on any type but int4; the guard keeps this contract true regardless). */
void kvc_stream_window_key_protect(const kvc_stream *st, const stream_regions *R, uint32_t at, uint32_t slot)
{
    if (st->plan.dtype == KVC_DTYPE_F32) return;
    kvc_kivi4_key_load(R->wk.base, slot, R->stage, st->plan.d);
    kvc_row_store(&R->rk, at, R->stage);
}

void kvc_stream_window_key_add(const kvc_stream *st, const stream_regions *R, uint32_t i, uint32_t slot, double *sum)
{
    const uint32_t d = st->plan.d;
    if (!st->plan.key_blocks) {
        kvc_row_axpy(&R->wk, slot, sum, 1.0);
    } else if (i >= st->win_count - kvc_stream_open_count(st)) { /* still in the open block */
        f16_rows()->axpy(sum, 1.0, open_key_row(R, &st->plan, slot), d);
    } else {
        float x[KVC_MAX_HEAD_DIM];
        kvc_kivi4_key_load(R->wk.base, slot, x, d);
        for (uint32_t c = 0; c < d; c++) sum[c] += (double)x[c];
    }
}
