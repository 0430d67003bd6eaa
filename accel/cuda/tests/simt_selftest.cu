// The CPU SIMT runtime against CUDA's semantics, lane by lane: shuffles of
// every kind and width, ballot/any/all, a warp-divergent shuffle, per-warp
// trip counts, a block reduction through static shared memory and
// barriers, atomics (each thread runs exactly once), 3-D indices, poisoned
// dynamic shared memory; and the errors a GPU would not report: divergent
// barriers, warp operations missing lanes, deadlock, bad masks and launches
// (each an argument; ctest expects its message); and the warp's m16n8k16
// tensor-core product (kernels/mma_f16.cuh: mma.sync on a GPU, shuffles
// here) against a double product of the same f16 inputs; the warp's
// ldmatrix.x4 and .x4.trans (kernels/ldmatrix.cuh) against the PTX layout
// written out element by element. The same file builds
// with nvcc for a GPU, where the emulation's fragment layout meets the hardware's.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kvc_cuda_compat.h"
#include "kernels/cp_async.cuh"
#include "kernels/ldmatrix.cuh"
#include "kernels/mma_f16.cuh"

#define FULL 0xffffffffu

__global__ void lanes(int *out)
{
    const unsigned t = threadIdx.x, lane = t % 32u;
    const int v = (int)(t * 7u + 3u);
    int *o = out + t * 12;
    o[0] = __shfl_sync(FULL, v, 5);
    o[1] = __shfl_up_sync(FULL, v, 3);
    o[2] = __shfl_down_sync(FULL, v, 3);
    o[3] = __shfl_xor_sync(FULL, v, 9);
    o[4] = __shfl_sync(FULL, v, 5, 16);
    o[5] = __shfl_up_sync(FULL, v, 3, 16);
    o[6] = __shfl_down_sync(FULL, v, 3, 16);
    o[7] = __shfl_xor_sync(FULL, v, 9, 16);
    o[8] = (int)__ballot_sync(FULL, lane % 3u == 0u);
    o[9] = __any_sync(FULL, lane == 7u) + 2 * __all_sync(FULL, lane < 32u);
    // only warp 1 shuffles: legal, and the other warps must not wait for it
    int d = v;
    if (t / 32u == 1u) d = __shfl_xor_sync(FULL, v, 1);
    o[10] = d;
    // a different trip count in every warp
    int s = 0;
    for (unsigned i = 0; i <= t / 32u; i++) s += __shfl_down_sync(FULL, v, 1);
    o[11] = s;
}

static int expect_lanes(const int *o, unsigned nt)
{
    int bad = 0;
    for (unsigned t = 0; t < nt; t++) {
        const unsigned lane = t % 32u, base = t - lane;
        auto v = [&](unsigned l) { return (int)((base + l) * 7u + 3u); };
        const unsigned seg = lane & ~15u, in = lane & 15u;
        int want[12];
        want[0] = v(5);
        want[1] = lane >= 3 ? v(lane - 3) : v(lane);
        want[2] = lane + 3 < 32 ? v(lane + 3) : v(lane);
        want[3] = v(lane ^ 9u);
        want[4] = v(seg + 5);
        want[5] = in >= 3 ? v(lane - 3) : v(lane);
        want[6] = in + 3 < 16 ? v(lane + 3) : v(lane);
        want[7] = ((lane ^ 9u) & ~15u) == seg ? v(lane ^ 9u) : v(lane);
        unsigned ballot = 0;
        for (unsigned l = 0; l < 32; l++) ballot |= (l % 3u == 0u ? 1u : 0u) << l;
        want[8] = (int)ballot;
        want[9] = 1 + 2;
        want[10] = t / 32u == 1u ? v(lane ^ 1u) : v(lane);
        const int down = lane + 1 < 32 ? v(lane + 1) : v(lane);
        want[11] = down * (int)(t / 32u + 1u);
        for (int k = 0; k < 12; k++)
            if (o[t * 12 + k] != want[k]) {
                if (bad < 10) std::printf("thread %u result %d: %d, want %d\n", t, k, o[t * 12 + k], want[k]);
                bad++;
            }
    }
    return bad;
}

__global__ void block_sum(const float *x, float *sums, unsigned *count, float *smem_seen)
{
    __shared__ float part[32];
    KVC_DYN_SMEM(float, dyn);
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned nt = blockDim.x * blockDim.y * blockDim.z;
    const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (t == 0) smem_seen[b] = dyn[0]; // never written: the poison
    float v = x[b * nt + t];
    for (int o = 16; o > 0; o /= 2) v += __shfl_down_sync(FULL, v, o);
    if (t % 32u == 0u) part[t / 32u] = v;
    __syncthreads();
    if (t < 32u) { // warp 0 reduces the partials
        float w = t < nt / 32u ? part[t] : 0.0f;
        for (int o = 16; o > 0; o /= 2) w += __shfl_down_sync(FULL, w, o);
        if (t == 0) sums[b] = w;
    }
    atomicAdd(count, 1u);
}

// ---- the errors ----
__global__ void divergent_barrier(int *p)
{
    if (threadIdx.x < 32) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    p[threadIdx.x] = 1;
}

__global__ void half_warp_shuffle(int *p)
{
    int v = (int)threadIdx.x;
    if (threadIdx.x % 32u < 16u) v = __shfl_xor_sync(FULL, v, 1);
    p[threadIdx.x] = v;
}

__global__ void deadlock(int *p)
{
    int v = (int)threadIdx.x;
    if (threadIdx.x == 0)
        v = __shfl_sync(0x3u, v, 1);
    else
        __syncthreads();
    p[threadIdx.x] = v;
}

__global__ void mask_without_caller(int *p) { p[threadIdx.x] = __shfl_sync(0x1u, (int)threadIdx.x, 0); }

__global__ void nothing(int *p) { p[0] = 0; }

// a shared-memory race the serial schedule hides: thread 0 writes, the
// others read, and no barrier between (TSan must report it)
__global__ void race_without_barrier(int *p)
{
    __shared__ int flag;
    if (threadIdx.x == 0) flag = 7;
    p[threadIdx.x] = flag;
}

// One warp: A (16x16), B (16x8) and C (16x8) loaded into fragments by the
// layout of kernels/mma_f16.cuh, D stored back the same way.
__global__ void mma_once(const __half *A, const __half *B, const float *C, float *D)
{
    const unsigned lane = threadIdx.x;
    uint32_t a[4], b[2];
    float c[4], d[4];
    for (unsigned r = 0; r < 4u; r++)
        a[r] = kvc_mma_pack(A[kvc_mma_frag_a_row(lane, 2u * r) * 16u + kvc_mma_frag_a_col(lane, 2u * r)],
                            A[kvc_mma_frag_a_row(lane, 2u * r + 1u) * 16u + kvc_mma_frag_a_col(lane, 2u * r + 1u)]);
    for (unsigned r = 0; r < 2u; r++)
        b[r] = kvc_mma_pack(B[kvc_mma_frag_b_row(lane, 2u * r) * 8u + kvc_mma_frag_b_col(lane, 2u * r)],
                            B[kvc_mma_frag_b_row(lane, 2u * r + 1u) * 8u + kvc_mma_frag_b_col(lane, 2u * r + 1u)]);
    for (unsigned e = 0; e < 4u; e++) c[e] = C[kvc_mma_frag_c_row(lane, e) * 8u + kvc_mma_frag_c_col(lane, e)];
    kvc_mma_m16n8k16(d, a, b, c);
    for (unsigned e = 0; e < 4u; e++) D[kvc_mma_frag_c_row(lane, e) * 8u + kvc_mma_frag_c_col(lane, e)] = d[e];
}

/* D = A B + C against a double product of the same f16 values. The f16
 * products are exact in f32 (11 + 11 significant bits), so the only error is
 * the 16 additions and C's: |d - ref| <= 17 u (sum |a b| + |c|) to first
 * order, with u = 2^-23 (one bit more than round-to-nearest allows: tensor
 * cores may truncate the accumulation). */
static int run_mma(void)
{
    __half hA[256], hB[128];
    float hC[128], hD[128];
    unsigned s = 12345u; /* seed 12345, printed */
    auto next = [&s]() {
        s = s * 1664525u + 1013904223u;
        return ((float)(s >> 8) / 16777216.0f) * 4.0f - 2.0f;
    };
    for (int i = 0; i < 256; i++) hA[i] = __float2half_rn(next());
    for (int i = 0; i < 128; i++) hB[i] = __float2half_rn(next());
    for (int i = 0; i < 128; i++) hC[i] = next();
    __half *A, *B;
    float *C, *D;
    cudaMalloc((void **)&A, sizeof hA), cudaMalloc((void **)&B, sizeof hB);
    cudaMalloc((void **)&C, sizeof hC), cudaMalloc((void **)&D, sizeof hD);
    cudaMemcpy(A, hA, sizeof hA, cudaMemcpyHostToDevice), cudaMemcpy(B, hB, sizeof hB, cudaMemcpyHostToDevice);
    cudaMemcpy(C, hC, sizeof hC, cudaMemcpyHostToDevice);
    KVC_LAUNCH(mma_once, 1, 32, 0, 0, A, B, C, D);
    cudaDeviceSynchronize();
    cudaMemcpy(hD, D, sizeof hD, cudaMemcpyDeviceToHost);
    int bad = 0;
    double worst = 0.0;
    for (unsigned m = 0; m < 16u; m++)
        for (unsigned n = 0; n < 8u; n++) {
            double ref = hC[m * 8u + n], mag = std::fabs((double)hC[m * 8u + n]);
            for (unsigned k = 0; k < 16u; k++) {
                const double p = (double)__half2float(hA[m * 16u + k]) * (double)__half2float(hB[k * 8u + n]);
                ref += p, mag += std::fabs(p);
            }
            const double bound = 17.0 * std::ldexp(1.0, -23) * mag, err = std::fabs((double)hD[m * 8u + n] - ref);
            if (err > bound) bad++;
            if (bound > 0 && err / bound > worst) worst = err / bound;
        }
    std::printf("mma m16n8k16 (seed 12345): %d of 128 outputs outside the bound; worst error %.3g of it\n", bad, worst);
    cudaFree(A), cudaFree(B), cudaFree(C), cudaFree(D);
    return bad != 0;
}

// Double buffering's rules: 64 threads each copy 16 bytes of a 256-float
// source into shared memory in two groups (the second to a slot of its own
// further on); after wait(1) the first group is there and (on the SIMT
// runtime) the second still reads as poison; after wait(0) and a barrier
// every thread reads a neighbour's copy.
__global__ void async_tile(const float *src, float *out, unsigned *poison_seen)
{
    KVC_DYN_SMEM(float, tile); // 512 floats
    const unsigned t = threadIdx.x;
    kvc_cp_async(&tile[4u * t], &src[4u * t], 16);
    kvc_cp_async_commit();
    kvc_cp_async(&tile[256u + 4u * t], &src[4u * t], 16);
    kvc_cp_async_commit();
    kvc_cp_async_wait(1);
    unsigned second_before, first_after;
    memcpy(&second_before, &tile[256u + 4u * t], 4);
    memcpy(&first_after, &tile[4u * t], 4);
    kvc_cp_async_wait(0);
    __syncthreads();
    out[t] = tile[(4u * t + 4u) % 256u] + tile[256u + (4u * t + 8u) % 256u];
    poison_seen[2u * t] = second_before, poison_seen[2u * t + 1u] = first_after;
}

__global__ void cp_async_never_waited(int *p)
{
    __shared__ int s[4];
    kvc_cp_async(&s[0], p, 16);
    kvc_cp_async_commit();
}

__global__ void cp_async_misaligned(int *p)
{
    __shared__ int s[8];
    kvc_cp_async(&s[1], p + 1, 16);
    kvc_cp_async_commit();
    kvc_cp_async_wait(0);
}

static int run_cp_async(void)
{
    float hsrc[256], hout[64];
    unsigned hseen[128];
    for (unsigned i = 0; i < 256u; i++) hsrc[i] = (float)i + 0.5f;
    float *src, *out;
    unsigned *seen;
    cudaMalloc((void **)&src, sizeof hsrc), cudaMalloc((void **)&out, sizeof hout);
    cudaMalloc((void **)&seen, sizeof hseen);
    cudaMemcpy(src, hsrc, sizeof hsrc, cudaMemcpyHostToDevice);
    KVC_LAUNCH(async_tile, 1, 64, 512 * sizeof(float), 0, src, out, seen);
    cudaDeviceSynchronize();
    cudaMemcpy(hout, out, sizeof hout, cudaMemcpyDeviceToHost);
    cudaMemcpy(hseen, seen, sizeof hseen, cudaMemcpyDeviceToHost);
    int bad = 0, bad_early = 0, bad_first = 0;
    for (unsigned t = 0; t < 64u; t++) {
        bad += hout[t] != hsrc[(4u * t + 4u) % 256u] + hsrc[(4u * t + 8u) % 256u];
        unsigned first;
        std::memcpy(&first, &hsrc[4u * t], 4);
        bad_first += hseen[2u * t + 1u] != first; // the first group is complete after wait(1)
#if defined(KVC_SIMT_CPU)
        const char *e = std::getenv("SIMT_POISON");
        const unsigned char p = e && *e ? (unsigned char)std::strtoul(e, nullptr, 0) : 0xFFu;
        const unsigned poison = p * 0x01010101u;
        bad_early += hseen[2u * t] != poison; // the second is not: it reads as poison
#endif
    }
    std::printf("cp.async: %d wrong of 64 after the wait; first group incomplete after wait(1) in %d threads; "
                "second group readable before its wait in %d threads\n",
                bad, bad_first, bad_early);
    cudaFree(src), cudaFree(out), cudaFree(seen);
    return bad || bad_first || bad_early;
}

/* ldmatrix.x4 (.trans): 4 tiles of 8 x 8 16-bit elements in shared memory,
 * tile j's row r at a scattered, 16-byte aligned place (row slot 13 (4 r + j)
 * % 32 of a 32-slot buffer, as a swizzle scatters them); each element's bits
 * say where it is (j << 8 | r << 4 | c). Every lane's four registers must be
 * what the PTX ISA's layout names: plain {T_j[g][2t], T_j[g][2t+1]},
 * .trans {T_j[2t][g], T_j[2t+1][g]}, g = lane / 4, t = lane % 4. */
__global__ void ldmatrix_once(unsigned *out)
{
    __shared__ __align__(16) unsigned short tile[32 * 8];
    const unsigned lane = threadIdx.x % 32u;
    for (unsigned i = lane; i < 32u * 8u; i += 32u) {
        const unsigned slot = i / 8u, c = i % 8u;
        unsigned j = 0, r = 0; // the tile and row stored at this slot
        for (unsigned jj = 0; jj < 4u; jj++)
            for (unsigned rr = 0; rr < 8u; rr++)
                if ((13u * (4u * rr + jj)) % 32u == slot) j = jj, r = rr;
        tile[i] = (unsigned short)(j << 8 | r << 4 | c);
    }
    __syncwarp();
    const unsigned my_j = lane / 8u, my_r = lane % 8u;
    const void *row = tile + 8u * ((13u * (4u * my_r + my_j)) % 32u);
    uint32_t a[4], b[4];
    kvc_ldmatrix_x4(a, row);
    kvc_ldmatrix_x4_trans(b, row);
    for (unsigned j = 0; j < 4u; j++) out[lane * 8u + j] = a[j], out[lane * 8u + 4u + j] = b[j];
}

static int run_ldmatrix(void)
{
    unsigned *d_out = nullptr, out[32 * 8];
    cudaMalloc((void **)&d_out, sizeof out);
    KVC_LAUNCH(ldmatrix_once, 1, 32, 0, 0, d_out);
    cudaDeviceSynchronize();
    cudaMemcpy(out, d_out, sizeof out, cudaMemcpyDeviceToHost);
    cudaFree(d_out);
    int bad = 0;
    auto el = [](unsigned j, unsigned r, unsigned c) { return j << 8 | r << 4 | c; };
    for (unsigned lane = 0; lane < 32u; lane++) {
        const unsigned g = lane / 4u, t = lane % 4u;
        for (unsigned j = 0; j < 4u; j++) {
            const unsigned plain = el(j, g, 2u * t) | el(j, g, 2u * t + 1u) << 16;
            const unsigned trans = el(j, 2u * t, g) | el(j, 2u * t + 1u, g) << 16;
            bad += out[lane * 8u + j] != plain;
            bad += out[lane * 8u + 4u + j] != trans;
        }
    }
    std::printf("ldmatrix x4 and x4.trans: %d of 256 registers off the PTX layout\n", bad);
    return bad != 0;
}

static int run_good(void)
{
    const unsigned nt = 128;
    int *o = nullptr;
    cudaMalloc((void **)&o, nt * 12 * sizeof(int));
    KVC_LAUNCH(lanes, 1, nt, 0, 0, o);
    cudaDeviceSynchronize();
    int *h = (int *)std::malloc(nt * 12 * sizeof(int));
    cudaMemcpy(h, o, nt * 12 * sizeof(int), cudaMemcpyDeviceToHost);
    int bad = expect_lanes(h, nt);
    std::printf("lanes: %d wrong of %u\n", bad, nt * 12);
    std::free(h);
    cudaFree(o);
    // block sums over a 3-D grid of 3-D blocks (4 x 2 x 2 = 16 blocks of 8 x 4 x 2 = 64 threads)
    const dim3 grid(4, 2, 2), block(8, 4, 2);
    const unsigned nb = 16, per = 64;
    float *hx = (float *)std::malloc(nb * per * sizeof(float));
    for (unsigned i = 0; i < nb * per; i++) hx[i] = (float)(i % 97u) * 0.25f;
    float *x, *sums, *seen;
    unsigned *count;
    cudaMalloc((void **)&x, nb * per * sizeof(float));
    cudaMalloc((void **)&sums, nb * sizeof(float));
    cudaMalloc((void **)&seen, nb * sizeof(float));
    cudaMalloc((void **)&count, sizeof(unsigned));
    cudaMemcpy(x, hx, nb * per * sizeof(float), cudaMemcpyHostToDevice);
    cudaMemset(count, 0, sizeof(unsigned));
    KVC_LAUNCH(block_sum, grid, block, 16 * sizeof(float), 0, x, sums, count, seen);
    cudaDeviceSynchronize();
    float hs[16], hseen[16];
    unsigned hc = 0;
    cudaMemcpy(hs, sums, sizeof hs, cudaMemcpyDeviceToHost);
    cudaMemcpy(hseen, seen, sizeof hseen, cudaMemcpyDeviceToHost);
    cudaMemcpy(&hc, count, sizeof hc, cudaMemcpyDeviceToHost);
    int bad_sum = 0, bad_seen = 0;
    for (unsigned b = 0; b < nb; b++) {
        float want = 0.0f; // the values are multiples of 1/4 below 25: every partial sum is exact
        for (unsigned t = 0; t < per; t++) want += hx[b * per + t];
        bad_sum += hs[b] != want;
#if defined(KVC_SIMT_CPU)
        unsigned char pb[4];
        std::memcpy(pb, &hseen[b], 4);
        const char *e = std::getenv("SIMT_POISON");
        const unsigned char p = e && *e ? (unsigned char)std::strtoul(e, nullptr, 0) : 0xFFu;
        bad_seen += pb[0] != p || pb[1] != p || pb[2] != p || pb[3] != p;
#endif
    }
    std::printf("block sums: %d wrong of %u; threads counted %u of %u; unwritten shared memory not poisoned in %d "
                "blocks\n",
                bad_sum, nb, hc, nb * per, bad_seen);
    cudaFree(x), cudaFree(sums), cudaFree(seen), cudaFree(count);
    std::free(hx);
    return bad || bad_sum || bad_seen || hc != nb * per;
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "good";
#if !defined(KVC_SIMT_CPU)
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        std::printf("no CUDA device: skipped\n");
        return 77;
    }
#endif
    int *p = nullptr;
    cudaMalloc((void **)&p, 1024 * sizeof(int));
    int rc = 0;
    if (!std::strcmp(what, "good"))
        rc = run_good() | run_mma() | run_ldmatrix() | run_cp_async();
    else if (!std::strcmp(what, "divergent_barrier"))
        KVC_LAUNCH(divergent_barrier, 1, 64, 0, 0, p);
    else if (!std::strcmp(what, "half_warp_shuffle"))
        KVC_LAUNCH(half_warp_shuffle, 1, 64, 0, 0, p);
    else if (!std::strcmp(what, "deadlock"))
        KVC_LAUNCH(deadlock, 1, 32, 0, 0, p);
    else if (!std::strcmp(what, "mask_without_caller"))
        KVC_LAUNCH(mask_without_caller, 1, 32, 0, 0, p);
    else if (!std::strcmp(what, "cp_async_never_waited"))
        KVC_LAUNCH(cp_async_never_waited, 1, 1, 0, 0, p);
    else if (!std::strcmp(what, "cp_async_misaligned"))
        KVC_LAUNCH(cp_async_misaligned, 1, 1, 0, 0, p);
    else if (!std::strcmp(what, "bad_launch"))
        KVC_LAUNCH(nothing, 1, 2048, 0, 0, p);
    else if (!std::strcmp(what, "race_without_barrier"))
        KVC_LAUNCH(race_without_barrier, 1, 64, 0, 0, p);
    else {
        std::printf("unknown case %s\n", what);
        rc = 2;
    }
    cudaDeviceSynchronize();
    cudaFree(p);
    std::printf("%s\n", rc == 0 ? "1 passed, 0 failed" : "0 passed, 1 failed");
    return rc;
}
