/* The kernel tables built into the library, and the one run-time CPU
 * dispatch of the project: kvc_cpu_features() detects the ISA once per call
 * (cheap: a cpuid, or a constant), kvc_kernels_best() takes the last built-in
 * table whose needs the CPU meets (opt-in tables aside). Accelerated tables (accel/) are appended
 * to `builtin` by their build option, after the reference and the
 * single-precision ones (which best() never picks: it is opt-in). */
#include <stdlib.h>
#include <string.h>
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

#include "kvc/kvc_kernels.h"
#include "ref/rows_ref.h"
#include "internal/kvc_internal.h"
#include "simd_entries.h"

/*@ assigns \nothing;
    ensures \valid_read(\result);
*/
static const kvc_kernels *ref_table(void) { return &kvc_kernels_ref_table; }

/* accel/cpu_simd: the entries of each SIMD file built in, in the order
 * best() prefers the later (NEON; AVX2, AVX-512): CMake writes the list from
 * the folders it built (core/CMakeLists.txt, each folder's isa.cmake). A
 * build outside CMake (the cross-compiled fingerprint of tests/abi) has the
 * reference tables only. */
#if defined(KVC_SIMD_TABLES_HEADER)
#include KVC_SIMD_TABLES_HEADER
#else
#define KVC_SIMD_TABLES(X)
#endif
#define KVC_SIMD_DECLARE(isa) extern const kvc_simd_entries kvc_simd_entries_##isa;
KVC_SIMD_TABLES(KVC_SIMD_DECLARE)
#undef KVC_SIMD_DECLARE
#define KVC_SIMD_ENTRY(isa) &kvc_simd_entries_##isa,
static const kvc_simd_entries *const accel[] = {KVC_SIMD_TABLES(KVC_SIMD_ENTRY) NULL};
#undef KVC_SIMD_ENTRY
#define N_ACCEL (sizeof accel / sizeof accel[0] - 1u) /* the NULL ends the list */

/* The accelerated tables: the reference entries, then each file's. Built
 * once, by whichever thread asks first (the others wait for it); this code
 * is compiled for the baseline ISA, so asking never runs an instruction the
 * CPU lacks. */
static kvc_kernels accel_tables[N_ACCEL + 1u];
static int accel_state; /* 0 not built, 1 being built, 2 ready */

static const kvc_kernels *accel_table(size_t i)
{
    int expect = 0;
    if (__atomic_load_n(&accel_state, __ATOMIC_ACQUIRE) != 2 &&
        __atomic_compare_exchange_n(&accel_state, &expect, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        for (size_t a = 0; accel[a] != NULL; a++) {
            kvc_kernels x = kvc_kernels_ref_table;
            const kvc_simd_entries *e = accel[a];
            x.name = e->name, x.needs = e->needs;
            /* int4, Q15 and KIVI4 keep the reference row kernels; the batched
               attend dequantises their blocks into the f32 pass (attend_simd.h) */
            x.caps = e->caps | (kvc_kernels_ref_table.caps & (KVC_CAP_I4 | KVC_CAP_Q15 | KVC_CAP_KIVI4));
            x.attend_f32 = e->attend_f32, x.attend_batch = e->attend_batch;
            for (unsigned t = 0; t < KVC_DTYPE_COUNT; t++) {
                if (e->row_dot_f32[t]) x.rows[t].dot_f32 = e->row_dot_f32[t];
                if (e->row_dot_f64[t]) x.rows[t].dot_f64 = e->row_dot_f64[t];
                if (e->row_dot_rows[t]) x.rows[t].dot_rows = e->row_dot_rows[t];
                if (e->row_sqdist_f32[t]) x.rows[t].sqdist_f32 = e->row_sqdist_f32[t];
            }
            accel_tables[a] = x;
        }
        __atomic_store_n(&accel_state, 2, __ATOMIC_RELEASE);
    }
    while (__atomic_load_n(&accel_state, __ATOMIC_ACQUIRE) != 2) {
    }
    return &accel_tables[i];
}

/* The built-in tables, the reference first; kvc_kernels_best takes the last
 * one the CPU can run. */
static const kvc_kernels *builtin(size_t i)
{
    if (i == 0) return ref_table();
    if (i == 1) return &kvc_kernels_single_table;
    for (size_t a = 0; accel[a] != NULL; a++)
        if (a == i - 2u) return accel_table(a);
    return NULL;
}

const kvc_kernels *kvc_kernels_ref(void) { return ref_table(); }

/* NULL's table, resolved once: kvc_kernels_best() reads the environment and
 * the CPU and walks the tables, which does not belong in every append and
 * attend. Two threads resolving at once compute the same pointer. */
const kvc_kernels *kvc_kernels_or_best(const kvc_kernels *kern)
{
    static const kvc_kernels *resolved;
    if (kern != NULL) return kern;
    const kvc_kernels *t = __atomic_load_n(&resolved, __ATOMIC_ACQUIRE);
    if (t == NULL) {
        t = kvc_kernels_best();
        __atomic_store_n(&resolved, t, __ATOMIC_RELEASE);
    }
    return t;
}

const char *kvc_kernels_name(const kvc_kernels *kern) { return kvc_kernels_or_best(kern)->name; }

const kvc_kernels *kvc_kernels_single(void) { return &kvc_kernels_single_table; }

size_t kvc_kernels_count(void)
{
    size_t n = 0;
    while (builtin(n) != NULL) n++;
    return n;
}

const kvc_kernels *kvc_kernels_at(size_t i) { return builtin(i); }

const kvc_kernels *kvc_kernels_by_name(const char *name)
{
    if (name == NULL) return NULL;
    for (size_t i = 0; i < kvc_kernels_count(); i++)
        if (strcmp(kvc_kernels_at(i)->name, name) == 0) return kvc_kernels_at(i);
    return NULL;
}

uint32_t kvc_cpu_features(void)
{
    uint32_t f = 0;
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) f |= KVC_CPU_AVX2;
    if (__builtin_cpu_supports("avx512f")) f |= KVC_CPU_AVX512;
#elif defined(__ARM_NEON) || defined(__aarch64__)
    f |= KVC_CPU_NEON;
#if defined(__aarch64__) && defined(__linux__)
    /* the dot product instructions: the kernel's hwcap bit (HWCAP_ASIMDDP) */
    if (getauxval(AT_HWCAP) & (1ul << 20)) f |= KVC_CPU_DOTPROD;
#elif defined(__ARM_FEATURE_DOTPROD)
    f |= KVC_CPU_DOTPROD; /* no run-time query here: the compiler's target says it */
#endif
#endif
    return f;
}

const kvc_kernels *kvc_kernels_best(void)
{
    /* KVC_KERNELS=ref|avx2|... forces a table (when built in and runnable here) */
    const char *want = getenv("KVC_KERNELS");
    const uint32_t have = kvc_cpu_features();
    if (want != NULL && *want != '\0') {
        const kvc_kernels *t = kvc_kernels_by_name(want);
        if (t != NULL && (t->needs & have) == t->needs) return t;
    }
    const kvc_kernels *best = ref_table();
    for (size_t i = 1; i < kvc_kernels_count(); i++) {
        const kvc_kernels *t = kvc_kernels_at(i);
        if ((t->needs & have) == t->needs && !(t->caps & KVC_CAP_OPT_IN)) best = t;
    }
    return best;
}

int kvc_kernels_support(const kvc_kernels *kern, unsigned t)
{
    return kvc_table_supports(kvc_kernels_or_best(kern), t);
}

int kvc_table_supports(const kvc_kernels *kern, unsigned t)
{
    if (kern->version != KVC_KERNELS_VERSION || t >= KVC_DTYPE_COUNT) return 0;
    if (!((kern->caps >> t) & 1u)) return 0; /* bit t (a right shift: no unsigned wrap to prove) */
    /* KIVI4: the key blocks are read by the attend itself (KVC_CAP_KIVI4);
       its values are int4 rows, so the int4 row kernels must be there */
    const unsigned rows_of = t == (unsigned)KVC_DTYPE_KIVI4 ? (unsigned)KVC_DTYPE_I4 : t;
    const kvc_row_kernels *r = &kern->rows[rows_of];
    return r->store && r->load && r->dot_f32 && r->dot_f64 && r->dot_rows && r->sqdist_f32 && r->axpy && r->absmax;
}
