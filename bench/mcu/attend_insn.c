/* Instructions per attended token on a Cortex-M, under QEMU with -icount:
 * the CMSDK timer of the MPS2 boards counts virtual time, which icount ties
 * to retired instructions (2^shift ns each; the timer ticks every 40 ns at
 * 25 MHz). bench/mcu_insn.sh runs it with shift 6 (1.6 ticks per
 * instruction) for the M0+, M4F and M7, and a calibration loop of a known
 * instruction count checks the conversion in the same run.
 *
 * The measured call: kvc_stream_attend of 2 query heads (one kv-head group
 * of stories260K: head dim 8) against a sink-window stream holding 64
 * tokens, for each storage type and each kernel table built in (the double
 * reference, the single-precision one). Output: one line per pair, with
 * instructions per call and per attended token. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kvc/kvc.h"

enum { D = 8, N_Q = 2, N_TOK = 64, REPEAT = 4, TIMER_NS_PER_TICK = 40 };
#ifndef KVC_ICOUNT_SHIFT
#define KVC_ICOUNT_SHIFT 6 /* must match qemu -icount shift=... */
#endif

static _Alignas(64) unsigned char g_arena[16384];

#define TIMER0 ((volatile uint32_t *)0x40000000u) /* CTRL, VALUE, RELOAD */

static void timer_start(void)
{
    TIMER0[0] = 0;
    TIMER0[2] = 0xFFFFFFFFu;
    TIMER0[1] = 0xFFFFFFFFu;
    TIMER0[0] = 1;
}

static uint32_t timer_ticks(void) { return 0xFFFFFFFFu - TIMER0[1]; }

/* ticks -> instructions: ticks * 40 ns / 2^shift ns */
static double insns(uint32_t ticks) { return (double)ticks * TIMER_NS_PER_TICK / (double)(1u << KVC_ICOUNT_SHIFT); }

/* 3 instructions per iteration (subs, nop, bne) */
static void known_loop(uint32_t n)
{
    __asm__ volatile(".syntax unified\n1: subs %0, %0, #1\n\tnop\n\tbne 1b" : "+l"(n) : : "cc");
}

int main(void)
{
    timer_start();
    const uint32_t t0 = timer_ticks();
    known_loop(100000);
    const uint32_t t1 = timer_ticks();
    printf("calibration: a loop of 300000 instructions counts %.0f\n", insns(t1 - t0));
    const kvc_kernels *tables[2] = {kvc_kernels_ref(), kvc_kernels_single()};
    printf("%-6s %-6s %12s %14s\n", "type", "table", "insn/call", "insn/token");
    for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++) {
        if (!kvc_dtype_implemented((kvc_dtype)t)) continue;
        kvc_stream_config c = kvc_stream_config_default(KVC_METHOD_SINK_WINDOW, D, D, N_TOK, 1);
        c.dtype = (kvc_dtype)t, c.n_sink = 4;
        kvc_stream *st;
        if (kvc_stream_arena_bytes(&c) > sizeof g_arena ||
            kvc_stream_init(g_arena, sizeof g_arena, &c, &st) != KVC_OK) {
            printf("%s: does not fit\n", kvc_dtype_name((kvc_dtype)t));
            return 1;
        }
        kvc_rng r;
        kvc_rng_seed(&r, 3);
        float k[D], v[D], q[N_Q * D], out[N_Q * D];
        for (int i = 0; i < N_TOK - 1; i++) { /* + the current token of the attend = 64 entries */
            for (int j = 0; j < D; j++) k[j] = (float)kvc_rng_normal(&r), v[j] = (float)kvc_rng_normal(&r);
            kvc_stream_append(st, NULL, k, v);
        }
        for (int j = 0; j < N_Q * D; j++) q[j] = (float)kvc_rng_normal(&r);
        for (int ti = 0; ti < 2; ti++) {
            const uint32_t a = timer_ticks();
            for (int rep = 0; rep < REPEAT; rep++) kvc_stream_attend(st, tables[ti], q, N_Q, out);
            const uint32_t b = timer_ticks();
            const double per_call = insns(b - a) / REPEAT;
            printf("%-6s %-6s %12.0f %14.1f\n", kvc_dtype_name((kvc_dtype)t), tables[ti]->name, per_call,
                   per_call / (double)kvc_stream_view_entries(st));
        }
    }
    /* one int8 segment of 64 rows, the 2 queries of a group: the three kernels on the same data */
    {
        enum { N = 64 };
        static unsigned char K[N * 12], V[N * 12]; /* KVC_DTYPE_I8 rows of 8: 4 + 8 bytes */
        const kvc_row_kernels *rk = &kvc_kernels_ref()->rows[KVC_DTYPE_I8];
        kvc_rng r;
        kvc_rng_seed(&r, 5);
        float x[D], q[N_Q * D], out[N_Q * D];
        for (int j = 0; j < N; j++) {
            for (int c = 0; c < D; c++) x[c] = (float)kvc_rng_normal(&r);
            rk->store(K + j * 12, x, D);
            for (int c = 0; c < D; c++) x[c] = (float)kvc_rng_normal(&r);
            rk->store(V + j * 12, x, D);
        }
        for (int c = 0; c < N_Q * D; c++) q[c] = (float)kvc_rng_normal(&r);
        unsigned char qrow[N_Q][12];
        for (int h = 0; h < N_Q; h++) rk->store(qrow[h], q + h * D, D);
        kvc_view view;
        memset(&view, 0, sizeof view);
        view.d = view.dv = D, view.beta = 0.35355339f, view.n_seg = 1;
        view.seg[0].n = N, view.seg[0].role = KVC_SET_BOTH, view.seg[0].scale = 1.0, view.seg[0].dtype = KVC_DTYPE_I8;
        view.seg[0].keys_q = K, view.seg[0].values_q = V;
        static double work[N_Q * (D + 3)];
        printf("one int8 segment of %d rows, %d query heads, head dim %d:\n", N, N_Q, D);
        printf("%-8s %12s %14s\n", "kernel", "insn/call", "insn/token");
        double base = 0.0;
        for (int kind = 0; kind < 3; kind++) {
            const uint32_t a = timer_ticks();
            for (int rep = 0; rep < REPEAT; rep++) {
                if (kind < 2) {
                    kvc_attend_batch b = {q, 1, N_Q, 0, out, NULL, NULL};
                    tables[kind]->attend_batch(tables[kind], &view, &b, work, sizeof work);
                } else {
                    uint32_t bits[N_Q * D], beta_bits, qs;
                    static int32_t scores[2 * N];
                    memcpy(&beta_bits, &view.beta, 4);
                    for (int h = 0; h < N_Q; h++) {
                        memcpy(&qs, qrow[h], 4);
                        kvc_fx_attend_rows((const int8_t *)K, 12, (const int8_t *)V, 12, N, NULL, D, D,
                                           (const int8_t *)(qrow[h] + 4), qs, beta_bits, scores, bits + h * D);
                    }
                }
            }
            const double per_call = insns(timer_ticks() - a) / REPEAT;
            if (kind == 0) base = per_call;
            printf("%-8s %12.0f %14.1f   (%.1fx fewer than double)\n",
                   kind == 0   ? "double"
                   : kind == 1 ? "single"
                               : "integer",
                   per_call, per_call / N, base / per_call);
        }
    }
    printf("1 passed, 0 failed\n");
    return 0;
}
