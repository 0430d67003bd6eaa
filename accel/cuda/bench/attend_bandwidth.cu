// The attend kernel's memory bandwidth at long context on a GPU: one kv
// head of n cached rows (d = dv = 128), 8 query heads of its group, through
// kvc_cuda_attend_device (queries, outputs and scratch on the device), timed
// with CUDA events over back-to-back calls. Reported in the same run:
//   - bytes of K and V rows read per second;
//   - the ratio to the device's nominal HBM bandwidth (by name; 0 = unknown);
//   - the ratio to a plain streaming-read kernel (float4 loads, sum) over a
//     buffer of the same size: what this GPU gives a read-only pass;
//   - the largest error against the library's reference kernel (double, on
//     the CPU) at the long-context size, with the derived tolerance.
// usage: attend_bandwidth [n,n,...] [reps] [query heads,...]   (default 16384,131072,1048576,4194304; 20; 1,4,8)
// Prints CSV lines "bw,<type>,<n>,..." for bench/ scripts. Exits 77 without a GPU.
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kvc/kvc.h"
#include "kvc/kvc_cuda.h"
#include "bench_support.cuh"
#include "kvc_cuda_compat.h"

namespace
{

constexpr size_t kD = 128;
size_t kQ = 8; // query heads per kv head (GQA group), per run
constexpr double kU = 5.9604644775390625e-08;

__device__ float hash_normal(uint64_t i, uint64_t seed)
{
    uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    // the sum of four uniforms, centred: roughly normal, enough for timing
    float s = 0.0f;
    for (int k = 0; k < 4; k++) s += (float)((z >> (16 * k)) & 0xffffu) * (1.0f / 65536.0f);
    return (s - 2.0f) * 1.7320508f;
}

__global__ void fill_normal(float *x, size_t n, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = hash_normal(i, seed);
}

struct rows {
    unsigned char *k = nullptr, *v = nullptr;
};

rows make_rows(unsigned t, size_t n, uint64_t seed)
{
    rows r;
    const size_t rb = (size_t)kvc_row_bytes(t, kD);
    CK(cudaMalloc(&r.k, n * rb));
    CK(cudaMalloc(&r.v, n * rb));
    const size_t chunk = (size_t)1 << 20;
    float *x = nullptr;
    CK(cudaMalloc(&x, chunk * kD * sizeof(float)));
    for (size_t i0 = 0; i0 < n; i0 += chunk) {
        const size_t m = n - i0 < chunk ? n - i0 : chunk;
        fill_normal<<<1024, 256>>>(x, m * kD, seed + i0);
        if (kvc_cuda_store_rows(t, r.k + i0 * rb, x, m, kD, nullptr) != KVC_OK) std::exit(1);
        fill_normal<<<1024, 256>>>(x, m * kD, seed + i0 + 0x5555);
        if (kvc_cuda_store_rows(t, r.v + i0 * rb, x, m, kD, nullptr) != KVC_OK) std::exit(1);
    }
    CK(cudaDeviceSynchronize());
    CK(cudaFree(x));
    return r;
}

kvc_view make_view(unsigned t, size_t n, const rows &r)
{
    kvc_view v;
    std::memset(&v, 0, sizeof v);
    v.d = v.dv = kD, v.beta = (float)(1.0 / std::sqrt((double)kD)), v.n_seg = 1;
    kvc_segment &g = v.seg[0];
    g.n = n, g.role = KVC_SET_BOTH, g.scale = 1.0, g.dtype = t;
    if (t == KVC_DTYPE_F32)
        g.keys = reinterpret_cast<const float *>(r.k), g.values = reinterpret_cast<const float *>(r.v);
    else
        g.keys_q = r.k, g.values_q = r.v;
    return v;
}

// max |gpu - ref| / tol over the outputs, tol from f32 rounding as in tests/test_cuda_kernels.cu
double check_against_reference(unsigned t, size_t n, const rows &r, const float *q_host, const float *out_gpu,
                               uint32_t n_blocks)
{
    const size_t rb = (size_t)kvc_row_bytes(t, kD);
    std::vector<unsigned char> k(n * rb), v(n * rb);
    CK(cudaMemcpy(k.data(), r.k, n * rb, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(v.data(), r.v, n * rb, cudaMemcpyDeviceToHost));
    rows h{k.data(), v.data()};
    const kvc_view hv = make_view(t, n, h);
    std::vector<float> out_ref(kQ * kD);
    std::vector<double> work(kvc_attend_work_bytes(1, kQ, kD) / sizeof(double) + 1);
    const kvc_attend_batch b = {q_host, 1, kQ, 0, out_ref.data(), nullptr, nullptr};
    if (kvc_kernels_ref()->attend_batch(kvc_kernels_ref(), &hv, &b, work.data(), work.size() * sizeof(double)) !=
        KVC_OK)
        return INFINITY;
    // the score term: beta (d + 3) u max_i sum_c |k_ic q_c| (twice: x and the max), the sums: (n + blocks + 16) u
    const kvc_row_kernels &rk = kvc_kernels_ref()->rows[t];
    std::vector<float> row(kD);
    double sk = 0, vmax = 0;
    for (size_t i = 0; i < n; i++) {
        rk.load(k.data() + i * rb, row.data(), kD);
        for (size_t qi = 0; qi < kQ; qi++) {
            double s = 0;
            for (size_t c = 0; c < kD; c++) s += std::fabs((double)row[c] * q_host[qi * kD + c]);
            sk = std::fmax(sk, s);
        }
        vmax = std::fmax(vmax, rk.absmax(v.data() + i * rb, kD));
    }
    const double beta = 1.0 / std::sqrt((double)kD);
    const double tol =
        (2.0 * (2.0 * beta * (kD + 3.0) * kU * sk + 6.0 * kU) + 2.0 * ((double)n + n_blocks + 16.0) * kU + 2.0 * kU) *
        vmax;
    double worst = 0;
    for (size_t i = 0; i < kQ * kD; i++) worst = std::fmax(worst, std::fabs((double)out_gpu[i] - out_ref[i]) / tol);
    return worst;
}

} // namespace

int main(int argc, char **argv)
{
    if (!bench_has_gpu()) return 77;
    std::vector<size_t> ns = {16384, 131072, 1048576, 4194304};
    if (argc > 1) {
        ns.clear();
        for (char *p = argv[1]; *p;) {
            ns.push_back(std::strtoull(p, &p, 10));
            if (*p == ',') p++;
        }
    }
    const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
    std::vector<size_t> groups = {1, 4, 8};
    if (argc > 3) {
        groups.clear();
        for (char *p = argv[3]; *p;) {
            groups.push_back(std::strtoull(p, &p, 10));
            if (*p == ',') p++;
        }
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    const double nominal = nominal_bandwidth(prop.name);
    std::printf("attend_bandwidth: %s, %d SMs, L2 %d MB, nominal %.2f TB/s; d = dv = %zu, %d reps\n", prop.name,
                prop.multiProcessorCount, prop.l2CacheSize >> 20, nominal / 1e12, kD, reps);

    // what a plain read pass gets: 2 GiB, float4 loads
    const double read_bw = read_kernel_bandwidth((size_t)2 << 30, reps, 8);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::printf("read kernel: %.3f TB/s (%.1f%% of nominal)\n", read_bw / 1e12,
                nominal > 0 ? 100.0 * read_bw / nominal : 0.0);
    std::printf("bw,type,query_heads,n,bytes,us_per_call,TB_per_s,of_nominal,of_read_kernel,blocks,tiles_per_block,err_"
                "over_tol\n");
    for (size_t group : groups) {
        kQ = group;

        std::vector<float> qh(kQ * kD);
        for (size_t i = 0; i < qh.size(); i++) qh[i] = (float)std::sin(0.7 * (double)i + 0.3);
        float *qd = nullptr, *od = nullptr;
        CK(cudaMalloc(&qd, qh.size() * sizeof(float)));
        CK(cudaMalloc(&od, kQ * kD * sizeof(float)));
        CK(cudaMemcpy(qd, qh.data(), qh.size() * sizeof(float), cudaMemcpyHostToDevice));
        const unsigned types[] = {KVC_DTYPE_F16, KVC_DTYPE_I8, KVC_DTYPE_F32};
        for (unsigned t : types) {
            for (size_t n : ns) {
                const size_t row_bytes = 2 * (size_t)kvc_row_bytes(t, kD);
                if ((double)n * row_bytes > 0.6 * (double)prop.totalGlobalMem) continue;
                rows r = make_rows(t, n, 1234 + n);
                const kvc_view v = make_view(t, n, r);
                const size_t sb = kvc_cuda_attend_device_scratch_bytes(&v, 1, kQ, 0);
                void *scratch = nullptr;
                CK(cudaMalloc(&scratch, sb));
                for (int w = 0; w < 3; w++)
                    if (kvc_cuda_attend_device(&v, qd, 1, kQ, 0, od, 0, scratch, sb, nullptr) != KVC_OK) return 1;
                CK(cudaEventRecord(e0));
                for (int i = 0; i < reps; i++) kvc_cuda_attend_device(&v, qd, 1, kQ, 0, od, 0, scratch, sb, nullptr);
                CK(cudaEventRecord(e1));
                CK(cudaEventSynchronize(e1));
                float ms = 0;
                CK(cudaEventElapsedTime(&ms, e0, e1));
                const double sec = ms * 1e-3 / reps, bw = (double)n * row_bytes / sec;
                // the plan kvc_cuda_attend_device used (the host entry point reports it)
                kvc_cuda_attend_info info;
                std::vector<float> out(kQ * kD);
                const kvc_attend_batch b = {qh.data(), 1, kQ, 0, out.data(), nullptr, nullptr};
                if (kvc_cuda_attend(&v, &b, 0, nullptr, &info) != KVC_OK) return 1;
                std::vector<float> out_dev(kQ * kD);
                CK(cudaMemcpy(out_dev.data(), od, out_dev.size() * sizeof(float), cudaMemcpyDeviceToHost));
                const bool same = !std::memcmp(out.data(), out_dev.data(), out.size() * sizeof(float));
                double err = -1;
                if (n == 1048576 || (ns.size() == 1))
                    err = check_against_reference(t, n, r, qh.data(), out_dev.data(), info.n_blocks);
                std::printf("bw,%s,%zu,%zu,%zu,%.1f,%.3f,%.3f,%.3f,%u,%u,%.3g%s\n",
                            t == KVC_DTYPE_F16  ? "f16"
                            : t == KVC_DTYPE_I8 ? "i8"
                                                : "f32",
                            kQ, n, n * row_bytes, sec * 1e6, bw / 1e12, nominal > 0 ? bw / nominal : 0.0, bw / read_bw,
                            info.n_blocks, info.tiles_per_block, err, same ? "" : ",DEVICE_AND_HOST_ENTRY_DIFFER");
                std::fflush(stdout);
                CK(cudaFree(scratch));
                CK(cudaFree(r.k));
                CK(cudaFree(r.v));
            }
        }
        CK(cudaFree(qd));
        CK(cudaFree(od));
    }
    kvc_cuda_release();
    return 0;
}
