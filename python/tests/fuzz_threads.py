"""The Python API fuzzer with threads (issue 49): two or three threads call
random methods of the SAME Cache (append, extend with and without queries,
attend with good and bad ``out=``, prefill_queries, mark, restore, to_bytes,
usage, checksum) with random shapes, dtypes, layouts and values (NaN, huge,
tiny), under faulthandler. It fails on a crash (the interpreter dies: the
pytest wrapper runs it in a child process and checks the exit status), on an
exception outside the documented ones (KvcError, TypeError, ValueError), and
on a silent loss: on an exact cache, every append or extend that returned
without an error must be held at the end (appended tokens, counted per
layer, equal the cache's tokens seen), restores aside.

    python fuzz_threads.py SECONDS SEED      (prints calls made and the seed)
"""
import faulthandler
import sys
import threading
import time

import numpy as np

import kvcompress as kc

faulthandler.enable()
DOCUMENTED = (kc.KvcError, TypeError, ValueError)
L, H, KV, D = 2, 4, 2, 16


def random_rows(rng, n, heads):
    kind = rng.integers(0, 12)
    shape = (n, heads, D) if n is not None else (heads, D)
    x = rng.standard_normal(shape).astype(np.float32)
    if kind == 0:
        x.flat[rng.integers(0, x.size)] = np.nan
    elif kind == 1:
        x *= np.float32(1e30)
    elif kind == 2:
        x *= np.float32(1e-30)
    elif kind == 3:
        x = x.astype(np.float64)
    elif kind == 4:
        x = np.asfortranarray(x)
    elif kind == 5 and x.ndim == 2:
        x = x[:, : D - 1]
    return x


def random_out(rng, shape):
    kind = rng.integers(0, 8)
    if kind == 0:
        return np.zeros(shape, np.float64)
    if kind == 1:
        return np.zeros(shape, np.float16)
    if kind == 2:
        return np.asfortranarray(np.zeros(shape, np.float32))
    if kind == 3:
        return np.zeros(shape[:-1] + (2 * shape[-1],), np.float32)[..., ::2]
    if kind == 4:
        o = np.zeros(shape, np.float32)
        o.flags.writeable = False
        return o
    return np.zeros(shape, np.float32)


def worker(cache, snap, seed, deadline, counts, appended, lock, exact):
    rng = np.random.default_rng(seed)
    while time.monotonic() < deadline:
        op = rng.integers(0, 11)
        layer = int(rng.integers(0, L + 1)) if rng.random() < 0.1 else int(rng.integers(0, L))
        try:
            if op == 0:
                k, v = random_rows(rng, None, KV), random_rows(rng, None, KV)
                cache.append(layer, k, v)
                with lock:
                    appended[layer] += 1
            elif op == 1:
                n = int(rng.integers(1, 40))
                k, v = random_rows(rng, n, KV), random_rows(rng, n, KV)
                cache.extend(layer, k, v)
                with lock:
                    appended[layer] += n
            elif op == 2:
                n = int(rng.integers(1, 20))
                k, v, q = random_rows(rng, n, KV), random_rows(rng, n, KV), random_rows(rng, n, H)
                out = random_out(rng, (n, H, D)) if rng.random() < 0.5 else None
                try:
                    cache.extend(layer, k, v, q, out)
                    with lock:
                        appended[layer] += n
                except kc.KvcError as e:
                    if e.code != -4 and e.code != -1:  # mid-way refusals append a prefix: not counted here
                        with lock:
                            counts["partial"] += 1
                    raise
            elif op == 3:
                q = random_rows(rng, None, H)
                out = random_out(rng, (H, D)) if rng.random() < 0.5 else None
                r = cache.attend(layer, q, out)
                if out is not None and r is not out:
                    raise AssertionError("attend returned another array than out")
            elif op == 4:
                cache.prefill_queries(layer, random_rows(rng, int(rng.integers(1, 8)), H))
            elif op == 5:
                cache.mark(layer, int(rng.integers(0, KV)), int(rng.integers(0, 300)), bool(rng.integers(0, 2)))
            elif op == 6 and not exact:
                cache.restore(snap if rng.random() < 0.9 else snap[:-1] + b"\x01")
            elif op == 7:
                kc.Cache.from_bytes(cache.to_bytes())
            elif op == 8:
                cache.usage(), cache.checksum(), cache.nbytes, cache.observes
            elif op == 9:
                cache.append(True, np.zeros((KV, D), np.float32), np.zeros((KV, D), np.float32))
            else:
                cache.attend(layer, np.zeros((H, D), np.float32), np.zeros((H, D), np.float32)[:, :])
            with lock:
                counts["ok"] += 1
        except DOCUMENTED:
            with lock:
                counts["refused"] += 1
        with lock:
            counts["calls"] += 1


def run(seconds, seed):
    rng = np.random.default_rng(seed)
    methods = [m["name"] for m in kc.methods()]
    total = {"calls": 0, "ok": 0, "refused": 0, "partial": 0}
    deadline_all = time.monotonic() + seconds
    rounds = 0
    while time.monotonic() < deadline_all:
        method = methods[rounds % len(methods)]
        dtype = ["f32", "f16", "int8", "kivi4", "int4"][int(rng.integers(0, 5))]
        exact = method == "exact"
        try:
            cache = kc.Cache(L, H, KV, D, method=method, budget=1 << 20 if exact else 160, dtype=dtype,
                             seed=int(rng.integers(1, 1000)), window=32, sink=4, prefix_len=64)
        except DOCUMENTED:
            rounds += 1
            continue
        snap = cache.to_bytes()
        counts = {"calls": 0, "ok": 0, "refused": 0, "partial": 0}
        appended = [0] * L
        lock = threading.Lock()
        deadline = min(deadline_all, time.monotonic() + 0.5)
        ts = [threading.Thread(target=worker, args=(cache, snap, int(rng.integers(0, 2**32)), deadline, counts,
                                                     appended, lock, exact)) for _ in range(3)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if exact and counts["partial"] == 0:
            held = cache.usage()["elements"] // (KV * 2 * D)
            if held != sum(appended):
                raise AssertionError(f"exact {dtype}: {sum(appended)} tokens appended without error, {held} held")
        for key in total:
            total[key] += counts[key]
        rounds += 1
    print(f"seed {seed}: {total['calls']} calls on {rounds} caches in {seconds} s, {total['ok']} answered, "
          f"{total['refused']} refused with a documented exception; no crash, nothing lost")
    return total


if __name__ == "__main__":
    run(float(sys.argv[1]) if len(sys.argv) > 1 else 20.0, int(sys.argv[2]) if len(sys.argv) > 2 else 49)
