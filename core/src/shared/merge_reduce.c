/* MergeAndReduce in bounded mode: see merge_reduce.h for the invariants. */
#include "merge_reduce.h"

#include <math.h>
#include <string.h>

size_t kvc_mr_slot(const kvc_mr_env *env, const kvc_mr *mr, uint32_t level, size_t i)
{
    size_t base = (size_t)mr->store * env->slots_per_store;
    if (level == 0) return base + i;
    return base + env->t + (size_t)(level - 1) * (env->t / 2) + i;
}

static size_t cand_slot(const kvc_mr_env *env, const kvc_mr *mr)
{
    return (size_t)mr->store * env->slots_per_store + env->slots_per_store - 1;
}

static void set_weights(kvc_mr_env *env, size_t slot, size_t n, float w)
{
    for (size_t i = 0; i < n; i++) env->weights[slot + i] = w;
}

static void copy_slot(kvc_mr_env *env, size_t dst, size_t src)
{
    if (dst == src) return;
    kvc_row_copy(&env->keys, dst, &env->keys, src);
    if (env->values.base) kvc_row_copy(&env->values, dst, &env->values, src);
    env->tokens[dst] = env->tokens[src];
}

/* A token into a slot: f32 vectors are quantised by the store kernel;
   already-stored rows (k_row / v_row, from another slot) move as bytes. */
typedef struct token_in {
    const float *k, *v;        /* f32 input, or NULL */
    const void *k_row, *v_row; /* stored rows, when k is NULL */
    uint32_t token;
} token_in;

static void write_slot(kvc_mr_env *env, size_t dst, const token_in *in)
{
    if (in->k != NULL) {
        kvc_row_store(&env->keys, dst, in->k);
        if (env->values.base) kvc_row_store(&env->values, dst, in->v);
    } else {
        memcpy(kvc_row(&env->keys, dst), in->k_row, env->keys.stride);
        kvc_rows_record(&env->keys, dst, 1);
        if (env->values.base) {
            memcpy(kvc_row(&env->values, dst), in->v_row, env->values.stride);
            kvc_rows_record(&env->values, dst, 1);
        }
    }
    env->tokens[dst] = in->token;
}

void kvc_mr_reset(kvc_mr_env *env, kvc_mr *mr, uint32_t store)
{
    memset(mr, 0, sizeof *mr);
    mr->store = store;
    size_t base = (size_t)store * env->slots_per_store;
    set_weights(env, base, env->slots_per_store, 0.0f);
}

size_t kvc_mr_held(const kvc_mr *mr, uint32_t T)
{
    size_t n = mr->has_cand;
    for (uint32_t l = 0; l <= T; l++) n += mr->count[l];
    return n;
}

/* Halve the batch A = [a0, a0+na) u B = [b0, b0+nb) into slots a0.. (in
 * order: survivors of A's pairs, then of B's). Returns the survivors. */
static size_t halve_into(kvc_mr_env *env, size_t a0, size_t na, size_t b0, size_t nb)
{
    kvc_balance_io *io = &env->bal;
    io->keys = env->keys, io->values = env->values, io->d = env->d, io->dv = env->dv;
    io->a0 = a0, io->na = na, io->b0 = b0, io->nb = nb;
    kvc_balance_select(io);
    env->halvings++;
    /* compaction is safe in place: the survivor of pair i comes from batch
       position >= i, and positions < i of A were consumed by earlier pairs */
    size_t out = 0;
    for (size_t i = 0; i < na + nb; i++) {
        if (!io->keep[i]) continue;
        copy_slot(env, a0 + out, i < na ? a0 + i : b0 + (i - na));
        out++;
    }
    return out;
}

/* Level 0 is full: halve it and let the block climb (binary-counter cascade). */
static void cascade(kvc_mr_env *env, kvc_mr *mr)
{
    const uint32_t T = env->T;
    size_t l0 = kvc_mr_slot(env, mr, 0, 0);
    size_t block_at = l0;
    size_t block_n = halve_into(env, l0, mr->count[0], 0, 0);
    set_weights(env, l0, env->t, 0.0f);
    mr->count[0] = 0;
    for (uint32_t l = 1; l <= T; l++) {
        const size_t ls = kvc_mr_slot(env, mr, l, 0);
        if (mr->count[l] == 0) {
            for (size_t i = 0; i < block_n; i++) copy_slot(env, ls + i, block_at + i);
            set_weights(env, block_at, block_n, 0.0f);
            mr->count[l] = (uint32_t)block_n;
            if (l == T) mr->top_exp = mr->e0 + (int32_t)T;
            set_weights(env, ls, block_n, (float)ldexp(1.0, l == T ? mr->top_exp : mr->e0 + (int32_t)l));
            return;
        }
        if (l == T && !env->bounded) {
            /* prefill mode: the top accumulates every block of the prefix
               (top_cap holds every block a prompt of the planned length can
               send up; a longer one is refused before it gets here) */
            if (mr->count[l] + block_n > env->top_cap) block_n = 0; /* unreachable for a valid state */
            for (size_t i = 0; i < block_n; i++) copy_slot(env, ls + mr->count[l] + i, block_at + i);
            set_weights(env, block_at, block_n, 0.0f);
            set_weights(env, ls + mr->count[l], block_n, (float)ldexp(1.0, mr->top_exp));
            mr->count[l] += (uint32_t)block_n;
            return;
        }
        /* occupied: unite with the arriving block and halve again */
        const size_t held = mr->count[l];
        set_weights(env, ls, held, 0.0f);
        size_t out = halve_into(env, ls, held, block_at, block_n);
        set_weights(env, block_at, block_n, 0.0f);
        if (l == T) {
            /* bounded mode: the top keeps the survivors with twice the weight,
               and from now on the input is subsampled to match */
            mr->count[T] = (uint32_t)out;
            mr->top_exp += 1;
            mr->e0 = mr->top_exp - (int32_t)T;
            set_weights(env, ls, out, (float)ldexp(1.0, mr->top_exp));
            return;
        }
        mr->count[l] = 0;
        block_at = ls;
        block_n = out;
    }
}

/* One unit (weight q) into level 0. */
static void push_unit(kvc_mr_env *env, kvc_mr *mr, const token_in *in)
{
    size_t s = kvc_mr_slot(env, mr, 0, mr->count[0]);
    write_slot(env, s, in);
    env->weights[s] = (float)ldexp(1.0, mr->e0);
    mr->count[0]++;
    if (mr->count[0] == env->t) cascade(env, mr);
}

/* Copy a slot's token out first: pushing may overwrite it during a cascade. */
static void push_unit_from_slot(kvc_mr_env *env, kvc_mr *mr, const kvc_mr_env *src_env, size_t src)
{
    /* rows of at most KVC_MAX_HEAD_DIM f32 elements (the largest row type), as bytes */
    float kb[KVC_MAX_HEAD_DIM], vb[KVC_MAX_HEAD_DIM];
    memcpy(kb, kvc_row(&src_env->keys, src), src_env->keys.stride);
    if (src_env->values.base) memcpy(vb, kvc_row(&src_env->values, src), src_env->values.stride);
    const token_in in = {NULL, NULL, kb, vb, src_env->tokens[src]};
    push_unit(env, mr, &in);
}

void kvc_mr_push_raw(kvc_mr_env *env, kvc_mr *mr, const float *k, const float *v, uint32_t token)
{
    const token_in in = {k, v, NULL, NULL, token};
    mr->tokens++;
    if (mr->e0 == 0 && mr->group_n == 0) {
        push_unit(env, mr, &in);
        return;
    }
    /* stratified input: one uniform token per group of q = 2^e0 raw tokens
       (a size-1 reservoir); the candidate stands for the group so far */
    const size_t cs = cand_slot(env, mr);
    mr->group_n++;
    if (mr->group_n == 1 || kvc_rng_unit(env->bal.rng) * (double)mr->group_n < 1.0) {
        write_slot(env, cs, &in);
        mr->has_cand = 1;
    }
    env->weights[cs] = (float)mr->group_n;
    if ((double)mr->group_n >= ldexp(1.0, mr->e0)) {
        mr->group_n = 0;
        mr->has_cand = 0;
        env->weights[cs] = 0.0f;
        push_unit_from_slot(env, mr, env, cs);
    }
}

/* A token of weight w becomes units of weight q: w <= q keeps it with
 * probability w/q; w > q (a power-of-two multiple) pushes w/q copies. Either
 * way its expected contribution is unchanged. */
static void push_weighted(kvc_mr_env *env, kvc_mr *into, size_t src, double w)
{
    const double q = ldexp(1.0, into->e0);
    if (w <= q) {
        if (kvc_rng_unit(env->bal.rng) * q < w) push_unit_from_slot(env, into, env, src);
        return;
    }
    const uint64_t copies = (uint64_t)(w / q + 0.5);
    for (uint64_t c = 0; c < copies; c++) push_unit_from_slot(env, into, env, src);
}

void kvc_mr_merge(kvc_mr_env *env, kvc_mr *into, kvc_mr *from)
{
    /* weights from the tree's exponents (what the slots hold, exactly),
       not read back from the slots: stored data never drives a loop count */
    for (uint32_t l = 0; l <= env->T; l++) {
        const double w = ldexp(1.0, l == env->T ? from->top_exp : from->e0 + (int32_t)l);
        for (size_t i = 0; i < from->count[l]; i++) push_weighted(env, into, kvc_mr_slot(env, from, l, i), w);
    }
    if (from->has_cand) push_weighted(env, into, cand_slot(env, from), (double)from->group_n);
    into->tokens += from->tokens;
    kvc_mr_reset(env, from, from->store);
}

int kvc_mr_ok(const kvc_mr *mr, uint32_t t, uint32_t T, uint64_t top_cap, int bounded)
{
    if (T < 1 || T > KVC_MR_MAX_LEVELS || mr->count[0] >= t || mr->has_cand > 1u) return 0;
    for (uint32_t l = 1; l < T; l++)
        if (mr->count[l] > t / 2) return 0;
    for (uint32_t l = T + 1; l <= KVC_MR_MAX_LEVELS; l++)
        if (mr->count[l] != 0) return 0;
    if (mr->count[T] > (bounded ? t / 2 : top_cap)) return 0;
    /* unit weights 2^e0 reach at most 2^62 tokens; the top is 2^T units */
    if (mr->e0 < 0 || mr->e0 > 62 || (!bounded && (mr->e0 != 0 || mr->group_n != 0 || mr->has_cand))) return 0;
    if (mr->count[T] > 0 && mr->top_exp != mr->e0 + (int32_t)T) return 0;
    if (mr->group_n > (1ull << mr->e0)) return 0;
    return 1;
}
