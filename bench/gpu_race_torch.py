#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the shapes of batch_race
(accel/cuda/bench/batch_race.cu), f16, with the flash and cuDNN backends, for
bench/gpu_race.sh. A decode step's GQA group is given to SDPA as the group's
query heads stacked as query positions of one kv head (q [B, Hkv, G, d],
k/v [B, Hkv, n, d], no mask): K and V are read once per kv head, as a decode
kernel reads them, and no expanded copy is made.

Timed as batch_race times kvcompress: L2 flushed before every call, each call
a CUDA graph replay between events, the median.

usage: gpu_race_torch.py READ_TB_PER_S [quick]   CSV on stdout (batch_race's columns)."""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

read_bw = float(sys.argv[1]) * 1e12
quick = len(sys.argv) > 2 and sys.argv[2] == "quick"
d = 128
backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]


L2 = torch.cuda.get_device_properties(0).L2_cache_size or (64 << 20)
flush = torch.empty(2 * L2, dtype=torch.uint8, device="cuda")


def time_us(fn):
    """Median microseconds of one call as a cold decode step sees it, as
    batch_race times kvcompress: the L2 flushed (a write of twice its size)
    before every call, the call a CUDA graph replay between two events
    (plain launches where the capture fails); 5..200 calls, about 50 ms."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    how = "graph"
    try:
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            fn()
        call = g.replay
    except Exception:  # a backend whose kernels cannot be captured
        how, call = "stream", fn
        torch.cuda.synchronize()
    reps, ms = 5, []
    for rnd in range(2):
        ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
        for i, (a, b) in enumerate(ev):
            flush.fill_(i & 0xFF)
            a.record()
            call()
            b.record()
        torch.cuda.synchronize()
        ms = sorted(a.elapsed_time(b) for a, b in ev)
        if rnd == 0:
            reps = max(5, min(200, int(50.0 / max(sum(ms) / len(ms), 1e-3))))
    return 1e3 * ms[len(ms) // 2], how


def run(name, B, n, hq, hkv):
    g = hq // hkv
    q = torch.randn(B, hkv, g, d, device="cuda", dtype=torch.float16)
    k = torch.randn(B, hkv, n, d, device="cuda", dtype=torch.float16)
    v = torch.randn(B, hkv, n, d, device="cuda", dtype=torch.float16)
    nbytes = 2.0 * B * hkv * n * d * 2
    for label, be in backends:
        try:
            with sdpa_kernel(be):
                us, how = time_us(lambda: F.scaled_dot_product_attention(q, k, v))
            print(f"torch,{name},f16-{label},{B},{n},{hq},{hkv},{us:.2f},{nbytes:.0f},{nbytes:.0f},"
                  f"{nbytes / (us * 1e-6) / 1e12:.4f},{nbytes / (us * 1e-6) / read_bw:.4f},-,-,-,-,{how}", flush=True)
        except Exception as e:  # a backend that refuses the shape: say so
            print(f"torch,{name},f16-{label},{B},{n},{hq},{hkv},n/a,{nbytes:.0f},{nbytes:.0f},n/a,n/a,-,"
                  f"{type(e).__name__},-,-,-", flush=True)
    del q, k, v
    torch.cuda.empty_cache()


print(f"# torch {torch.__version__}, {torch.cuda.get_device_name(0)}", flush=True)
for n in (1 << 20, 1 << 24):
    for hq in (1, 8):
        if quick and n > (1 << 20):
            continue
        run("single", 1, n, hq, 1)
for B in (1, 16, 64):
    for n in (4096, 32768, 131072):
        if quick and (B > 16 or n > 32768):
            continue
        run("llama3-8b", B, n, 32, 8)
