#!/usr/bin/env python3
"""What the Python layer costs over the C call (docs/python.md).

One cache of SmolLM2-135M's attention shape (9 query heads, 3 kv heads, head
dim 64, one layer) filled with N random tokens; then, alternating R rounds:
`cache.attend(0, q, out)` from Python (the conversions of kvcompress.Cache
included) against the same attend on the same cache and buffers looped
inside C (_core's c_attend_ns). Prints per-round ns per call and the median
ratio Python / C. Seed fixed and printed.

usage: python_overhead.py [--tokens 8192] [--method exact] [--dtype f16] [--rounds 15] [--iters 200]
"""
import argparse
import statistics
import time

import numpy as np

import kvcompress


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--method", default="exact")
    ap.add_argument("--dtype", default="f16")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    h, hkv, d = 9, 3, 64
    rng = np.random.default_rng(a.seed)
    cache = kvcompress.Cache(1, h, hkv, d, method=a.method, dtype=a.dtype, budget=a.tokens, sink=0, window=0)
    k = rng.standard_normal((a.tokens, hkv, d), dtype=np.float32)
    v = rng.standard_normal((a.tokens, hkv, d), dtype=np.float32)
    cache.extend(0, k, v)
    q = rng.standard_normal((h, d), dtype=np.float32)
    out = np.empty((h, d), dtype=np.float32)
    print(f"python_overhead: seed {a.seed}, {a.method} {a.dtype}, {a.tokens} tokens, {h} heads / {hkv} kv heads, "
          f"d {d}, {a.rounds} rounds of {a.iters} calls")
    ratios = []
    for r in range(a.rounds):
        c_ns = cache._c.c_attend_ns(0, q, out, a.iters)
        t0 = time.perf_counter_ns()
        for _ in range(a.iters):
            cache.attend(0, q, out)
        py_ns = (time.perf_counter_ns() - t0) / a.iters
        ratios.append(py_ns / c_ns)
        print(f"round {r}: C {c_ns / 1e3:.1f} us, Python {py_ns / 1e3:.1f} us, ratio {py_ns / c_ns:.4f}")
    print(f"median ratio Python / C: {statistics.median(ratios):.4f} (min {min(ratios):.4f}, max {max(ratios):.4f})")


if __name__ == "__main__":
    main()
