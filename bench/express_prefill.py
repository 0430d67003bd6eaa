#!/usr/bin/env python3
"""Thinformer Express at its headline, the CPU form of its Figure 1(b): a
whole prompt's causal attention through an Express cache against exact
attention, speed-up against length with the error beside it (issue 54,
docs/quality.md).

Each query attends right after its own token is appended (kvcompress.Cache
.extend with queries: one C call for the prompt), so Express's prefill costs
O(n * budget) against exact's O(n^2). Peers, all on one thread:
- kvc exact: the same call through an exact cache (the library's best table);
- PyTorch SDPA: scaled_dot_product_attention(is_causal=True), float32.
Beside Express, a uniform reservoir of the same budget (sinks and window
included, as every method's) is the yardstick of its error. Two errors:
||O - O_sdpa|| / ||O_sdpa|| over every position and head, and the RMS of
O - O_sdpa over the RMS of the values (the first grows with n when attention
is diffuse, since ||O_sdpa|| shrinks like an average of n values does).

One layer of SmolLM2-135M's shape (9 query heads, 3 kv heads, d = 64);
keys, values and queries are Gaussian (seeded), keys sharing one mean
direction as an LLM's do (a shift of `--key-mean` along a random unit
vector). Rows are appended to the CSV as they finish; a rerun skips the
(method, length, budget) rows already there.

    python bench/express_prefill.py --csv docs/data/express-prefill.csv
        [--lengths 4096,8192,16384,32768,65536,131072] [--budgets 1024,4096]
        [--exact-max 32768] [--seed 54]
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resumable_csv import ResumableCsv  # noqa: E402

HQ, HKV, D = 9, 3, 64


def data(n, seed, key_mean):
    rng = np.random.default_rng([seed, n])
    q = rng.standard_normal((n, HQ, D), dtype=np.float32)
    k = rng.standard_normal((n, HKV, D), dtype=np.float32)
    v = rng.standard_normal((n, HKV, D), dtype=np.float32)
    u = rng.standard_normal(D)
    k += (key_mean * u / np.linalg.norm(u)).astype(np.float32)
    return q, k, v


def sdpa(q, k, v):
    import torch

    tq = torch.from_numpy(q).permute(1, 0, 2)[None]
    tk = torch.from_numpy(k).permute(1, 0, 2)[None].repeat_interleave(HQ // HKV, dim=1)
    tv = torch.from_numpy(v).permute(1, 0, 2)[None].repeat_interleave(HQ // HKV, dim=1)
    t0 = time.perf_counter()
    with torch.no_grad():
        o = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    sec = time.perf_counter() - t0
    return o[0].permute(1, 0, 2).contiguous().numpy(), sec


def kvc(method, budget, q, k, v, seed):
    import kvcompress

    n = q.shape[0]
    c = kvcompress.Cache(1, HQ, HKV, D, method=method, budget=budget, dtype="f32", context=n, seed=seed)
    t0 = time.perf_counter()
    o = c.extend(0, k, v, q)
    return o, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--csv", required=True)
    ap.add_argument("--lengths", default="4096,8192,16384,32768,65536,131072")
    ap.add_argument("--budgets", default="1024,4096")
    ap.add_argument("--exact-max", type=int, default=32768, help="longest prompt kvc exact runs (O(n^2))")
    ap.add_argument("--sdpa-max", type=int, default=131072, help="longest prompt SDPA runs")
    ap.add_argument("--seed", type=int, default=54)
    ap.add_argument("--key-mean", type=float, default=4.0)
    a = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    out = ResumableCsv(a.csv, ["method", "n", "budget", "seconds", "sdpa_seconds", "speedup_vs_sdpa", "rel_error",
                               "error_over_value_rms", "seed"],
                       key=["method", "n", "budget"])
    print(f"express_prefill: seed {a.seed}, shape {HQ}/{HKV} heads, d {D}, key mean {a.key_mean}, one thread, "
          f"torch {torch.__version__}", flush=True)
    for n in [int(x) for x in a.lengths.split(",")]:
        runs = [("exact", n)] if n <= a.exact_max else []
        runs += [(m, int(b)) for b in a.budgets.split(",") for m in ("express", "uniform")]
        if all(out.has(m, n, b) for m, b in runs) or n > a.sdpa_max:
            continue
        q, k, v = data(n, a.seed, a.key_mean)
        ref, ref_sec = sdpa(q, k, v)
        norm = float(np.linalg.norm(ref))
        value_rms = float(np.sqrt(np.mean(v.astype(np.float64) ** 2)))
        print(f"n={n}: SDPA {ref_sec:.2f} s", flush=True)
        for method, budget in runs:
            if out.has(method, n, budget):
                continue
            o, sec = kvc(method, budget, q, k, v, a.seed)
            err = float(np.linalg.norm(o - ref)) / norm
            err_v = float(np.sqrt(np.mean((o.astype(np.float64) - ref) ** 2))) / value_rms
            out.write([method, n, budget, f"{sec:.3f}", f"{ref_sec:.3f}", f"{ref_sec / sec:.3f}", f"{err:.3e}",
                       f"{err_v:.3e}", a.seed])
            print(f"  {method} budget {budget}: {sec:.2f} s ({ref_sec / sec:.2f}x SDPA), error {err:.2e} "
                  f"({err_v:.2e} of the values' RMS)", flush=True)
    out.close()


if __name__ == "__main__":
    main()
