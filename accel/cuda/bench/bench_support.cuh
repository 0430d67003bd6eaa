// What the GPU benchmarks of accel/cuda share: a CUDA error check that
// exits, the device's nominal HBM bandwidth by name, and a plain streaming
// read (float4 loads, sum): the bandwidth a read-only pass gets on this GPU,
// the peer every kernel's bytes per second are divided by.
#ifndef KVC_CUDA_BENCH_SUPPORT_CUH
#define KVC_CUDA_BENCH_SUPPORT_CUH

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#define CK(x)                                                                                                          \
    do {                                                                                                               \
        cudaError_t e_ = (x);                                                                                          \
        if (e_ != cudaSuccess) {                                                                                       \
            std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__);                       \
            std::exit(1);                                                                                              \
        }                                                                                                              \
    } while (0)

__global__ void bench_read_sum(const float4 *x, size_t n4, float *out)
{
    float s = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n4; i += (size_t)gridDim.x * blockDim.x) {
        const float4 v = x[i];
        s += v.x + v.y + v.z + v.w;
    }
    if (s == 12345.678f) *out = s; // keeps the loads
}

// Bytes per second of bench_read_sum over `bytes` of device memory, `reps`
// back-to-back passes after one warm-up, grid_per_sm blocks of 512 per multiprocessor.
inline double read_kernel_bandwidth(size_t bytes, int reps, int grid_per_sm)
{
    void *buf = nullptr;
    float *sink = nullptr;
    CK(cudaMalloc(&buf, bytes));
    CK(cudaMalloc(reinterpret_cast<void **>(&sink), sizeof(float)));
    CK(cudaMemset(buf, 0, bytes));
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const unsigned grid = (unsigned)(sms * grid_per_sm);
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    bench_read_sum<<<grid, 512>>>(static_cast<const float4 *>(buf), bytes / 16, sink);
    CK(cudaEventRecord(e0));
    for (int i = 0; i < reps; i++) bench_read_sum<<<grid, 512>>>(static_cast<const float4 *>(buf), bytes / 16, sink);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    CK(cudaFree(buf));
    CK(cudaFree(sink));
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return (double)bytes * reps / (ms * 1e-3);
}

// Microseconds of one call of fn (enqueued on a stream) as a cold step of a
// decoder sees it: before every timed call the L2 is flushed (a write of
// twice its size), and the call itself is a CUDA graph replay between two
// events, so neither the last call's lines in L2 nor the host's launch
// overhead count (a kernel of 20 us is timed as a kernel, not as a launch).
// Reps: about 50 ms of calls, 5 to 200; the median of the per-call times.
// `how` says "graph" or "stream" (where the capture failed: plain launches).
struct flushed_timer {
    void *flush = nullptr;
    size_t flush_bytes = 0;
    cudaStream_t st = nullptr;
    flushed_timer()
    {
        int l2 = 0;
        CK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0));
        flush_bytes = 2u * (size_t)(l2 > 0 ? l2 : (64 << 20));
        CK(cudaMalloc(&flush, flush_bytes));
        CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    }
    ~flushed_timer()
    {
        cudaFree(flush);
        cudaStreamDestroy(st);
    }
    double time_us(const std::function<void(cudaStream_t)> &fn, const char **how)
    {
        fn(st); // warm-up (and the first call's one-time work)
        CK(cudaStreamSynchronize(st));
        cudaGraph_t graph = nullptr;
        cudaGraphExec_t exec = nullptr;
        bool graphed = cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
        if (graphed) {
            fn(st);
            graphed = cudaStreamEndCapture(st, &graph) == cudaSuccess && graph != nullptr &&
                      cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
        }
        (void)cudaGetLastError(); // a refused capture is not this benchmark's error
        *how = graphed ? "graph" : "stream";
        auto call = [&] {
            if (graphed)
                CK(cudaGraphLaunch(exec, st));
            else
                fn(st);
        };
        std::vector<cudaEvent_t> ev(400);
        for (cudaEvent_t &e : ev) CK(cudaEventCreate(&e));
        std::vector<float> ms;
        int reps = 5;
        for (int round = 0; round < 2; round++) { // a probe round sizes the second
            ms.clear();
            for (int i = 0; i < reps; i++) {
                CK(cudaMemsetAsync(flush, i & 0xff, flush_bytes, st));
                CK(cudaEventRecord(ev[2 * i], st));
                call();
                CK(cudaEventRecord(ev[2 * i + 1], st));
            }
            CK(cudaStreamSynchronize(st));
            double total = 0;
            for (int i = 0; i < reps; i++) {
                float t = 0;
                CK(cudaEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
                ms.push_back(t), total += t;
            }
            if (round == 0) {
                const double each = total / reps;
                reps = (int)(50.0 / (each > 1e-3 ? each : 1e-3));
                reps = reps < 5 ? 5 : reps > 200 ? 200 : reps;
            }
        }
        for (cudaEvent_t e : ev) cudaEventDestroy(e);
        if (exec) cudaGraphExecDestroy(exec);
        if (graph) cudaGraphDestroy(graph);
        std::sort(ms.begin(), ms.end());
        return 1e3 * ms[ms.size() / 2];
    }
};

// False (and says so) where no CUDA device can be used: the benchmark exits 77.
inline bool bench_has_gpu()
{
    int n_dev = 0;
    if (cudaGetDeviceCount(&n_dev) == cudaSuccess && n_dev > 0) return true;
    std::printf("no CUDA device: skipped\n");
    return false;
}

// Nominal HBM bandwidth of the GPUs this project has been lent (0: unknown).
inline double nominal_bandwidth(const char *name)
{
    const std::string n = name;
    if (n.find("H200") != std::string::npos) return 4.8e12;
    if (n.find("H100") != std::string::npos) return n.find("PCIe") != std::string::npos ? 2.0e12 : 3.35e12;
    if (n.find("A100") != std::string::npos) return n.find("80GB") != std::string::npos ? 2.039e12 : 1.555e12;
    return 0.0;
}

#endif
