// The CPU SIMT runtime (simt_cpu.h): fibers (ucontext), the block
// scheduler, barriers, warp rendezvous, launches, and the host memory API.
//
// A fiber is made and first entered with ucontext; after that, without a
// sanitizer, fibers and the scheduler switch with _setjmp/_longjmp, which
// save no signal mask: glibc's swapcontext makes an rt_sigprocmask system call
// on every switch, most of the runtime's time (perf: about 75% of a long
// Python device test). The sanitizer builds keep swapcontext, whose switches
// their fiber annotations are written for. _FORTIFY_SOURCE would turn
// _longjmp into __longjmp_chk, which refuses a jump to another stack.
#undef _FORTIFY_SOURCE
#include "simt_cpu.h"

#include <ucontext.h>

#include <csetjmp>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define SIMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIMT_ASAN 1
#endif
#endif
#ifdef SIMT_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(__SANITIZE_THREAD__)
#define SIMT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SIMT_TSAN 1
#endif
#endif
#ifdef SIMT_TSAN
// Under TSan every CUDA thread is a TSan fiber, switched without
// synchronisation: the only happens-before edges are those CUDA gives
// (barriers, warp operations, the launch's start and end, and, as a limit,
// consecutive blocks on one OS thread), so unsynchronised accesses between
// the threads of a block are reported even when the serial schedule hides
// them. The runtime's own bookkeeping is not instrumented (SIMT_NO_TSAN).
#include <sanitizer/tsan_interface.h>
#define SIMT_NO_TSAN __attribute__((no_sanitize("thread")))
#else
#define SIMT_NO_TSAN
#endif
#if !defined(SIMT_ASAN) && !defined(SIMT_TSAN)
#define SIMT_FAST_SWITCH 1
#endif

namespace simt
{

namespace
{

constexpr size_t kStackBytes = 64u * 1024u;
constexpr unsigned kWarp = 32u;

enum state { READY, AT_BARRIER, AT_WARP, DONE };

struct fiber {
    ucontext_t ctx; // its first entry
#ifdef SIMT_FAST_SWITCH
    jmp_buf jb; // where it waits (in yield_to_scheduler)
#endif
    unsigned char *stack = nullptr; // kStackBytes from the launching thread's pool
    unsigned linear = 0;            // threadIdx.x + blockDim.x (threadIdx.y + blockDim.y threadIdx.z)
    uint3 idx{};
    state st = READY;
    const char *file = nullptr; // where it waits
    int line = 0;
    // its part of a warp operation
    warp_op_kind op = OP_SHFL;
    unsigned mask = 0;
    uint64_t value = 0, result = 0;
    int arg = 0, width = 32;
    bool started = false;
    // cp.async copies issued and not yet waited for (group = commit count when issued)
    struct async_copy {
        void *dst;
        const void *src;
        size_t bytes;
        unsigned group;
        const char *file;
        int line;
    };
    std::vector<async_copy> pending;
    unsigned committed = 0; // groups closed by cp.async.commit_group
#ifdef SIMT_ASAN
    void *fake_stack = nullptr;
#endif
#ifdef SIMT_TSAN
    void *tsan = nullptr;
#endif
};

struct block_run {
    std::vector<fiber> threads;
    ucontext_t scheduler;
#ifdef SIMT_FAST_SWITCH
    jmp_buf sched_jb; // the scheduler inside resume()
#endif
    dim3 bdim, gdim;
    uint3 bidx{};
    const std::function<void()> *body = nullptr;
    std::vector<unsigned char> smem;
    fiber *current = nullptr;
#ifdef SIMT_ASAN
    const void *sched_bottom = nullptr;
    size_t sched_size = 0;
    void *sched_fake = nullptr;
#endif
#ifdef SIMT_TSAN
    void *sched_tsan = nullptr;
    char barrier_sync = 0;             // the addresses TSan's edges use: barriers,
    char warp_sync[32] = {};           // warp operations (one per warp),
    char start_sync = 0, end_sync = 0; // a block's start and end
#endif
};

thread_local block_run *g_run = nullptr;

// Fiber stacks, kept for the next launch on this OS thread (allocating and
// clearing 64 KiB per CUDA thread at every launch dominated small launches).
thread_local std::vector<std::unique_ptr<unsigned char[]>> g_stacks;

unsigned char poison_byte()
{
    const char *e = std::getenv("SIMT_POISON");
    return e && *e ? (unsigned char)std::strtoul(e, nullptr, 0) : 0xFFu;
}

bool reversed()
{
    const char *e = std::getenv("SIMT_SCHEDULE");
    return e && std::strcmp(e, "reverse") == 0;
}

SIMT_NO_TSAN fiber &me()
{
    if (g_run == nullptr || g_run->current == nullptr) fail("a device function was called outside a kernel launch");
    return *g_run->current;
}

// Back to the scheduler; returns when the scheduler resumes this fiber.
SIMT_NO_TSAN void yield_to_scheduler(bool exiting)
{
    block_run &r = *g_run;
    fiber &f = *r.current;
#ifdef SIMT_TSAN
    if (exiting) __tsan_release(&r.end_sync); // a thread's end happens before its block's end
    __tsan_switch_to_fiber(r.sched_tsan, __tsan_switch_to_fiber_no_sync);
#endif
#ifdef SIMT_ASAN
    __sanitizer_start_switch_fiber(exiting ? nullptr : &f.fake_stack, r.sched_bottom, r.sched_size);
#else
    (void)exiting;
#endif
#ifdef SIMT_FAST_SWITCH
    if (_setjmp(f.jb) == 0) _longjmp(r.sched_jb, 1);
#else
    swapcontext(&f.ctx, &r.scheduler);
#endif
#ifdef SIMT_ASAN
    __sanitizer_finish_switch_fiber(f.fake_stack, &r.sched_bottom, &r.sched_size);
#endif
}

SIMT_NO_TSAN void fiber_main()
{
#ifdef SIMT_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &g_run->sched_bottom, &g_run->sched_size);
#endif
#ifdef SIMT_TSAN
    __tsan_acquire(&g_run->start_sync); // the block's start happens before each of its threads
#endif
    (*g_run->body)();
    if (!g_run->current->pending.empty()) {
        const fiber &f = *g_run->current;
        fail("thread (%u,%u,%u) ended with %zu cp.async copies never waited for (the first issued at %s:%d)", f.idx.x,
             f.idx.y, f.idx.z, f.pending.size(), f.pending[0].file, f.pending[0].line);
    }
    g_run->current->st = DONE;
    yield_to_scheduler(true);
    fail("a finished thread was resumed"); // never: the scheduler does not resume DONE fibers
}

SIMT_NO_TSAN void resume(block_run &r, fiber &f, bool first)
{
    r.current = &f;
    (void)first;
#ifdef SIMT_TSAN
    __tsan_switch_to_fiber(f.tsan, __tsan_switch_to_fiber_no_sync);
#endif
#ifdef SIMT_ASAN
    __sanitizer_start_switch_fiber(&r.sched_fake, f.stack, kStackBytes);
#endif
#ifdef SIMT_FAST_SWITCH
    // the fiber comes back with _longjmp(r.sched_jb): a first entry's ucontext is left behind
    if (_setjmp(r.sched_jb) == 0) {
        if (first)
            swapcontext(&r.scheduler, &f.ctx);
        else
            _longjmp(f.jb, 1);
    }
#else
    swapcontext(&r.scheduler, &f.ctx);
#endif
#ifdef SIMT_ASAN
    __sanitizer_finish_switch_fiber(r.sched_fake, nullptr, nullptr);
#endif
    r.current = nullptr;
}

// The source lane of lane `lane` for a shuffle, or -1 when it keeps its own value.
int shuffle_source(const fiber &f, unsigned lane)
{
    const unsigned w = (unsigned)f.width, base = lane & ~(w - 1u), in = lane & (w - 1u);
    switch (f.op) {
    case OP_SHFL: return (int)(base + ((unsigned)f.arg & (w - 1u)));
    case OP_SHFL_UP: return in >= (unsigned)f.arg ? (int)(lane - (unsigned)f.arg) : -1;
    case OP_SHFL_DOWN: return in + (unsigned)f.arg < w ? (int)(lane + (unsigned)f.arg) : -1;
    case OP_SHFL_XOR: {
        const unsigned s = lane ^ (unsigned)f.arg;
        return (s & ~(w - 1u)) == base ? (int)s : -1;
    }
    default: return -1;
    }
}

const char *op_name(warp_op_kind op)
{
    static const char *const names[] = {"__shfl_sync",   "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync",
                                        "__ballot_sync", "__any_sync",     "__all_sync",       "__syncwarp"};
    return names[op];
}

// Completes every warp operation whose lanes have all arrived; returns how many.
SIMT_NO_TSAN int resolve_warps(block_run &r)
{
    int done = 0;
    const unsigned n = (unsigned)r.threads.size();
    for (unsigned w0 = 0; w0 < n; w0 += kWarp) {
        for (unsigned l = 0; l < kWarp && w0 + l < n; l++) {
            fiber &lead = r.threads[w0 + l];
            if (lead.st != AT_WARP) continue;
            bool all_here = true;
            for (unsigned j = 0; j < kWarp; j++) {
                if (!(lead.mask >> j & 1u)) continue;
                if (w0 + j >= n)
                    fail("%s at %s:%d names lane %u, which this block does not have", op_name(lead.op), lead.file,
                         lead.line, j);
                const fiber &o = r.threads[w0 + j];
                if (o.st == DONE)
                    fail("%s at %s:%d waits for lane %u of warp %u, which has exited", op_name(lead.op), lead.file,
                         lead.line, j, w0 / kWarp);
                if (o.st != AT_WARP) {
                    all_here = false;
                    continue;
                }
                if (o.op != lead.op || o.mask != lead.mask || o.width != lead.width)
                    fail("divergent warp operations in warp %u: lane %u at %s %s:%d (mask %08x), lane %u at %s %s:%d "
                         "(mask %08x)",
                         w0 / kWarp, l, op_name(lead.op), lead.file, lead.line, lead.mask, j, op_name(o.op), o.file,
                         o.line, o.mask);
            }
            if (!all_here) continue;
            uint64_t ballot = 0;
            for (unsigned j = 0; j < kWarp; j++)
                if (lead.mask >> j & 1u) ballot |= (r.threads[w0 + j].value != 0 ? 1ull : 0ull) << j;
            for (unsigned j = 0; j < kWarp; j++) {
                if (!(lead.mask >> j & 1u)) continue;
                fiber &o = r.threads[w0 + j];
                switch (o.op) {
                case OP_BALLOT: o.result = ballot; break;
                case OP_ANY: o.result = ballot != 0; break;
                case OP_ALL: o.result = ballot == (uint64_t)lead.mask; break;
                case OP_SYNCWARP: o.result = 0; break;
                default: {
                    const int s = shuffle_source(o, j);
                    if (s >= 0 && !(lead.mask >> s & 1u))
                        fail("%s at %s:%d: lane %u reads lane %d, outside the mask %08x", op_name(o.op), o.file, o.line,
                             j, s, lead.mask);
                    o.result = s < 0 ? o.value : r.threads[w0 + (unsigned)s].value;
                }
                }
            }
            for (unsigned j = 0; j < kWarp; j++)
                if (lead.mask >> j & 1u) r.threads[w0 + j].st = READY;
            done++;
        }
    }
    return done;
}

SIMT_NO_TSAN void run_block(block_run &r)
{
    const bool rev = reversed();
    const size_t n = r.threads.size();
    for (size_t i = 0; i < n; i++) {
        fiber &f = r.threads[i];
        f.st = READY, f.started = false;
        getcontext(&f.ctx);
        f.ctx.uc_stack.ss_sp = f.stack;
        f.ctx.uc_stack.ss_size = kStackBytes;
        f.ctx.uc_link = nullptr;
        makecontext(&f.ctx, fiber_main, 0);
    }
#ifdef SIMT_TSAN
    __tsan_release(&r.start_sync); // after the launch's host work and this block's shared-memory poison
#endif
    for (;;) {
        for (size_t k = 0; k < n; k++) {
            fiber &f = r.threads[rev ? n - 1 - k : k];
            if (f.st == READY) resume(r, f, !f.started), f.started = true;
        }
        // every thread now waits or is done
        size_t done = 0, at_barrier = 0;
        for (const fiber &f : r.threads) done += f.st == DONE, at_barrier += f.st == AT_BARRIER;
        if (done == n) {
#ifdef SIMT_TSAN
            __tsan_acquire(&r.end_sync);
#endif
            return;
        }
        if (resolve_warps(r) > 0) continue;
        if (at_barrier > 0 && at_barrier + done == n) {
            const fiber *first = nullptr;
            for (const fiber &f : r.threads) {
                if (f.st != AT_BARRIER) continue;
                if (first == nullptr)
                    first = &f;
                else if (f.file != first->file || f.line != first->line)
                    fail("divergent __syncthreads in block (%u,%u,%u): thread %u waits at %s:%d, thread %u at %s:%d",
                         r.bidx.x, r.bidx.y, r.bidx.z, first->linear, first->file, first->line, f.linear, f.file,
                         f.line);
            }
            if (done > 0)
                fail("__syncthreads at %s:%d in block (%u,%u,%u): %zu of %zu threads have exited instead of "
                     "arriving",
                     first->file, first->line, r.bidx.x, r.bidx.y, r.bidx.z, done, n);
            for (fiber &f : r.threads) f.st = READY;
            continue;
        }
        std::fprintf(stderr, "simt: error: deadlock in block (%u,%u,%u):\n", r.bidx.x, r.bidx.y, r.bidx.z);
        for (const fiber &f : r.threads)
            if (f.st != DONE)
                std::fprintf(stderr, "  thread %u waits at %s %s:%d\n", f.linear,
                             f.st == AT_BARRIER ? "__syncthreads" : op_name(f.op), f.file, f.line);
        std::exit(3);
    }
}

} // namespace

void fail(const char *fmt, ...)
{
    std::va_list ap;
    va_start(ap, fmt);
    std::fputs("simt: error: ", stderr);
    std::vfprintf(stderr, fmt, ap);
    std::fputc('\n', stderr);
    va_end(ap);
    std::exit(3);
}

uint3 thread_idx() { return me().idx; }
uint3 block_idx()
{
    me();
    return g_run->bidx;
}
dim3 block_dim()
{
    me();
    return g_run->bdim;
}
dim3 grid_dim()
{
    me();
    return g_run->gdim;
}
void *dynamic_smem()
{
    me();
    return g_run->smem.empty() ? nullptr : g_run->smem.data();
}

// cp.async: the destination holds poison from the issue until the wait that
// completes the copy (a GPU gives no guarantee what a read in between sees),
// and the copy is made at that wait, from the source as it is then.
void cp_async(void *dst, const void *src, size_t bytes, const char *file, int line)
{
    fiber &f = me();
    if (bytes != 4 && bytes != 8 && bytes != 16) fail("%s:%d: cp.async of %zu bytes (4, 8 or 16)", file, line, bytes);
    if ((uintptr_t)dst % bytes || (uintptr_t)src % bytes)
        fail("%s:%d: cp.async of %zu bytes from %p to %p: both must be aligned to the size", file, line, bytes, src,
             dst);
    std::memset(dst, poison_byte(), bytes);
    f.pending.push_back({dst, src, bytes, f.committed, file, line});
}

void cp_async_commit() { me().committed++; }

void cp_async_wait(unsigned newest_pending, const char *file, int line)
{
    fiber &f = me();
    (void)file, (void)line;
    // every committed group but the newest `newest_pending` completes, and the open one never does
    std::vector<fiber::async_copy> keep;
    for (const fiber::async_copy &c : f.pending) {
        const bool done = c.group < f.committed && f.committed - c.group > newest_pending;
        if (done)
            std::memcpy(c.dst, c.src, c.bytes);
        else
            keep.push_back(c);
    }
    f.pending.swap(keep);
}

SIMT_NO_TSAN void syncthreads(const char *file, int line)
{
    fiber &f = me();
    f.st = AT_BARRIER, f.file = file, f.line = line;
#ifdef SIMT_TSAN
    __tsan_release(&g_run->barrier_sync);
#endif
    yield_to_scheduler(false);
#ifdef SIMT_TSAN
    __tsan_acquire(&g_run->barrier_sync);
#endif
}

SIMT_NO_TSAN uint64_t warp_op(warp_op_kind op, unsigned mask, uint64_t value, int arg, int width, const char *file,
                              int line)
{
    fiber &f = me();
    const unsigned lane = f.linear % kWarp;
    if (!(mask >> lane & 1u))
        fail("%s at %s:%d: lane %u of warp %u calls it with mask %08x, which does not name it", op_name(op), file, line,
             lane, f.linear / kWarp, mask);
    if (width < 1 || width > 32 || (width & (width - 1)) != 0)
        fail("%s at %s:%d: width %d is not a power of two in 1..32", op_name(op), file, line, width);
    f.st = AT_WARP, f.op = op, f.mask = mask, f.value = value, f.arg = arg, f.width = width, f.file = file,
    f.line = line;
#ifdef SIMT_TSAN
    char *sync = &g_run->warp_sync[f.linear / kWarp];
    __tsan_release(sync);
#endif
    yield_to_scheduler(false);
#ifdef SIMT_TSAN
    __tsan_acquire(sync);
#endif
    return f.result;
}

// Dynamic shared memory past 48 KiB, as CUDA allows it: per kernel and per
// device (the current one at the call), after cudaFuncSetAttribute(kernel,
// cudaFuncAttributeMaxDynamicSharedMemorySize, n) with n up to an sm_90's
// 227 KiB. The current device is per host thread, as CUDA's is.
std::mutex g_optin_lock;
std::map<std::pair<int, const void *>, size_t> g_optin;
thread_local int g_device = 0;

size_t dyn_smem_limit(const void *kernel)
{
    std::lock_guard<std::mutex> hold(g_optin_lock);
    const auto it = g_optin.find({g_device, kernel});
    return it == g_optin.end() ? 48u * 1024u : it->second;
}

// The devices this runtime pretends to have (SIMT_DEVICES, 1..16, default 1)
// and their multiprocessors (SIMT_SMS, 1..1024, default 2): blocks run one
// after another here, so both only shape the host plans that ask for them.
int env_int(const char *name, int lo, int hi, int fallback)
{
    const char *e = std::getenv(name);
    if (e == nullptr || *e == 0) return fallback;
    const long v = std::strtol(e, nullptr, 10);
    return v < lo || v > hi ? fallback : (int)v;
}
int device_count() { return env_int("SIMT_DEVICES", 1, 16, 1); }

SIMT_NO_TSAN void launch(dim3 grid, dim3 block, size_t dyn_smem, const std::function<void()> &body, const char *file,
                         int line, const void *kernel)
{
    const unsigned long long nt = (unsigned long long)block.x * block.y * block.z;
    if (nt == 0 || nt > 1024 || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 ||
        grid.z > 65535 || dyn_smem > dyn_smem_limit(kernel))
        fail("launch at %s:%d: grid (%u,%u,%u), block (%u,%u,%u) and %zu B of dynamic shared memory are not a valid "
             "launch",
             file, line, grid.x, grid.y, grid.z, block.x, block.y, block.z, dyn_smem);
    if (g_run != nullptr) fail("launch at %s:%d from inside a kernel", file, line);
    block_run r;
    r.bdim = block, r.gdim = grid, r.body = &body;
    r.threads.resize((size_t)nt);
    for (size_t i = 0; i < (size_t)nt; i++) {
        fiber &f = r.threads[i];
        if (g_stacks.size() <= i) g_stacks.emplace_back(new unsigned char[kStackBytes]);
        f.stack = g_stacks[i].get();
        f.linear = (unsigned)i;
        f.idx.x = (unsigned)(i % block.x), f.idx.y = (unsigned)(i / block.x % block.y),
        f.idx.z = (unsigned)(i / ((size_t)block.x * block.y));
    }
    const unsigned char poison = poison_byte();
    const unsigned long long nb = (unsigned long long)grid.x * grid.y * grid.z;
    const bool rev = reversed();
#ifdef SIMT_TSAN
    r.sched_tsan = __tsan_get_current_fiber();
    for (fiber &f : r.threads) f.tsan = __tsan_create_fiber(0);
#endif
    g_run = &r;
    for (unsigned long long k = 0; k < nb; k++) {
        const unsigned long long b = rev ? nb - 1 - k : k;
        r.bidx.x = (unsigned)(b % grid.x), r.bidx.y = (unsigned)(b / grid.x % grid.y),
        r.bidx.z = (unsigned)(b / ((unsigned long long)grid.x * grid.y));
        r.smem.assign(dyn_smem, poison);
        run_block(r);
    }
    g_run = nullptr;
#ifdef SIMT_TSAN
    for (fiber &f : r.threads) __tsan_destroy_fiber(f.tsan);
#endif
}

} // namespace simt

// ---- the host API the kernels' drivers use (declared by the toolkit's cuda_runtime_api.h) ----
#include <cuda_runtime_api.h>

extern "C" {

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    if (p == nullptr) return cudaErrorInvalidValue;
    // 256-byte aligned like cudaMalloc's, and exactly `bytes` long, so that
    // AddressSanitizer sees a read one element past the end
    *p = nullptr;
    if (posix_memalign(p, 256, bytes ? bytes : 1) != 0 || *p == nullptr) return cudaErrorMemoryAllocation;
    std::memset(*p, simt::poison_byte(), bytes); // fresh device memory is garbage on a GPU
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    std::free(p);
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind)
{
    if (bytes && (dst == nullptr || src == nullptr)) return cudaErrorInvalidValue;
    std::memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t bytes)
{
    if (bytes && p == nullptr) return cudaErrorInvalidValue;
    std::memset(p, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaMallocManaged(void **p, size_t bytes, unsigned int)
{
    return cudaMalloc(p, bytes); // host memory is what both sides read here
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t)
{
    return cudaMemcpy(dst, src, bytes, kind); // launches run to completion: every stream is in order
}

cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t) { return cudaMemset(p, value, bytes); }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

cudaError_t cudaGetDeviceCount(int *n)
{
    if (n == nullptr) return cudaErrorInvalidValue;
    *n = simt::device_count();
    return cudaSuccess;
}

cudaError_t cudaGetDevice(int *dev)
{
    if (dev == nullptr) return cudaErrorInvalidValue;
    *dev = simt::g_device;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int dev)
{
    if (dev < 0 || dev >= simt::device_count()) return cudaErrorInvalidDevice;
    simt::g_device = dev;
    return cudaSuccess;
}

// The attributes the library asks for: multiprocessors (SIMT_SMS) and an
// sm_90's compute capability and shared memory per multiprocessor.
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int dev)
{
    if (value == nullptr || dev < 0 || dev >= simt::device_count()) return cudaErrorInvalidValue;
    switch (attr) {
    case cudaDevAttrMultiProcessorCount: *value = simt::env_int("SIMT_SMS", 1, 1024, 2); return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor: *value = 9; return cudaSuccess;
    case cudaDevAttrComputeCapabilityMinor: *value = 0; return cudaSuccess;
    case cudaDevAttrMaxSharedMemoryPerMultiprocessor: *value = 228 * 1024; return cudaSuccess;
    default: return cudaErrorInvalidValue;
    }
}

cudaError_t cudaFuncSetAttribute(const void *func, enum cudaFuncAttribute attr, int value)
{
    if (func == nullptr || attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || value > 227 * 1024)
        return cudaErrorInvalidValue;
    std::lock_guard<std::mutex> hold(simt::g_optin_lock);
    simt::g_optin[{simt::g_device, func}] = (size_t)value;
    return cudaSuccess;
}

// Resident blocks per multiprocessor by an sm_90's limits that the runtime
// can see: 2,048 threads, 32 blocks, 228 KiB of shared memory with 1 KiB
// reserved per block (registers are the compiler's, unknown here). A block
// whose dynamic shared memory passes its opt-in fits nowhere: 0, as CUDA says.
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *func, int block, size_t dyn_smem)
{
    if (n == nullptr || func == nullptr || block < 1 || block > 1024) return cudaErrorInvalidValue;
    if (dyn_smem > simt::dyn_smem_limit(func)) return *n = 0, cudaSuccess;
    const int by_threads = 2048 / block, by_smem = (int)((228u * 1024u) / (dyn_smem + 1024u));
    *n = by_threads < by_smem ? by_threads : by_smem;
    if (*n > 32) *n = 32;
    return cudaSuccess;
}

// Events: every call ran to completion before it returned, so an event is
// always complete.
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int)
{
    if (e == nullptr) return cudaErrorInvalidValue;
    static char token;
    *e = reinterpret_cast<cudaEvent_t>(&token);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t) { return e ? cudaSuccess : cudaErrorInvalidResourceHandle; }
cudaError_t cudaEventSynchronize(cudaEvent_t e) { return e ? cudaSuccess : cudaErrorInvalidResourceHandle; }
cudaError_t cudaEventDestroy(cudaEvent_t) { return cudaSuccess; }

cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaPeekAtLastError(void) { return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "simt: CUDA runtime error"; }

} // extern "C"
