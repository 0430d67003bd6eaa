#ifndef KVC_PLAN_H
#define KVC_PLAN_H

#include "kvc/kvc_stream.h"
#include "methods.h"

typedef struct kvc_stream_layout {
    uint64_t off_sink_k, off_sink_v, off_win_k, off_win_v, off_pend_k, off_pend_v, off_method;
    uint64_t off_prot_k, off_prot_v, off_wflag; /* protected rows, one outlier flag per window slot */
    uint64_t method_bytes;
} kvc_stream_layout;

/* The stream's arena layout: the header, then every region of the plan in a
 * fixed order (sinks, window, pending token, protected rows, outlier flags,
 * the method's sub-arena), each 64-aligned. Returns the arena bytes; every
 * region lies inside them and after the previous one (proved on LP64 and
 * ILP32: verify wp_sizes). */
/*@ // what kvc_stream_layout_make gives: every region 64-aligned, after the
    // header and after the previous one, inside `bytes` (proved: wp_sizes)
    predicate kvc_stream_layout_ok(kvc_stream_layout *lay, kvc_stream_plan *p, integer bytes) =
      512 <= lay->off_sink_k &&
      kvc_region_before(lay->off_sink_k, kvc_stream_rows_l(p, p->n_sink, p->d), lay->off_sink_v) &&
      kvc_region_before(lay->off_sink_v, kvc_stream_rows_l(p, p->n_sink, p->dv), lay->off_win_k) &&
      kvc_region_before(lay->off_win_k, kvc_stream_rows_l(p, p->n_window, p->d), lay->off_win_v) &&
      kvc_region_before(lay->off_win_v, kvc_stream_rows_l(p, p->n_window, p->dv), lay->off_pend_k) &&
      kvc_region_before(lay->off_pend_k, 4 * p->d, lay->off_pend_v) &&
      kvc_region_before(lay->off_pend_v, 4 * (p->dv + (p->dtype == 0 ? 0 : p->d + p->dv)), lay->off_prot_k) &&
      kvc_region_before(lay->off_prot_k, kvc_stream_rows_l(p, p->n_protect, p->d), lay->off_prot_v) &&
      kvc_region_before(lay->off_prot_v, kvc_stream_rows_l(p, p->n_protect, p->dv), lay->off_wflag) &&
      kvc_region_before(lay->off_wflag, p->n_protect ? p->n_window : 0, lay->off_method) &&
      kvc_region_before(lay->off_method, lay->method_bytes, bytes);
*/

/*@ requires kvc_plan_dims_ok(p);
    requires method_bytes <= 4503599627370496;
    requires \valid(lay) && \separated(p, lay);
    assigns *lay;
    ensures lay->method_bytes == method_bytes;
    ensures kvc_stream_layout_ok(lay, p, \result);
    ensures \result % 64 == 0 && \result <= method_bytes + 274877906944;
*/
uint64_t kvc_stream_layout_make(const kvc_stream_plan *p, uint64_t method_bytes, kvc_stream_layout *lay);

/* A KIVI4 plan's open block (32 f16 key rows, then 32 f16 value rows, each
 * part 64-aligned), the last bytes of the method's sub-arena; 0 otherwise.
 * trusted-by: size arithmetic on d, dv <= 256 (at most 2 * 16384 bytes). */
/*@ requires \valid_read(p);
    assigns \nothing;
*/
uint64_t kvc_stream_open_block_bytes(const kvc_stream_plan *p);

/* The method's own arena bytes for a plan (0 for sink-window), and a KIVI4
 * plan's open block after them.
 * trusted-by: assigns nothing, a dispatch to the method's arena_size (size
 * arithmetic only: wp_sizes proves exact's and uniform's); stream_check
 * bounds the answer before the layout uses it. */
/*@ requires \valid_read(p);
    assigns \nothing;
*/
uint64_t kvc_stream_method_bytes(const kvc_stream_plan *p);

/* *dst = *src: a plan copied out of the planner or into a stream's header.
 * trusted-by: a struct assignment (WP's typed memory model does not carry the
 * copy of the 38-field plan: every field's equality timed out, measured in
 * plan.c); the ensures lists the fields the proofs read. */
/*@ requires \valid(dst) && \valid_read(src) && \separated(dst, src);
    assigns *dst;
    ensures dst->method == \old(src->method) && dst->d == \old(src->d) && dst->dv == \old(src->dv);
    ensures dst->n_sink == \old(src->n_sink) && dst->n_window == \old(src->n_window);
    ensures dst->n_protect == \old(src->n_protect) && dst->protect_radius == \old(src->protect_radius);
    ensures dst->method_tokens == \old(src->method_tokens) && dst->dtype == \old(src->dtype);
    ensures dst->worst_elements == \old(src->worst_elements) && dst->budget_elements == \old(src->budget_elements);
    ensures dst->arena_bytes == \old(src->arena_bytes);
    ensures \old(kvc_plan_accepted(src)) ==> kvc_plan_accepted(dst);
*/
void kvc_plan_copy(kvc_stream_plan *dst, const kvc_stream_plan *src);

#endif
