#!/usr/bin/env python3
"""Regenerate the seed corpus of the core API fuzz target (tests/fuzz/corpus/api).

    python3 tests/fuzz/make_api_corpus.py [OUTPUT_DIR]

Deterministic (fixed seed). Each file is a configuration followed by an
operation sequence in the byte format fuzz_api.c reads: method index, d, dv,
budget (2 bytes), seed, n_sink, n_window, dtype and beta selectors, prompt
length (2 bytes), a parameter-group mask with its groups, then op codes with
their operands. Files valid_m<k>_* use method index k with sane parameters
and long sequences (appends, attends, snapshots, corruptions, bad calls);
bad_* carry out-of-range configurations.
"""
import os
import random
import sys

N_METHODS = 8  # registry positions 0..7 at the time of writing; 63 = an unknown method


def config(r, method, d, dv, budget, sink, window, prompt, mask=0, groups=b""):
    return bytes([method, d - 1, dv - 1, budget & 255, budget >> 8, r.randrange(256), sink, window,
                  1, 1, prompt & 255, prompt >> 8, mask]) + groups


def ops(r, d, dv, n):
    out = bytearray()
    for _ in range(n):
        x = r.random()
        if x < 0.55:
            out += bytes([0]) + bytes(r.randrange(256) for _ in range(d + dv))
        elif x < 0.6:
            out += bytes([2]) + bytes(r.choice([r.randrange(200), 200 + r.randrange(16)]) for _ in range(d + dv))
        elif x < 0.85:
            nq = r.randrange(3)
            out += bytes([3, nq]) + bytes(r.randrange(200) for _ in range((nq + 1) * d))
        elif x < 0.9:
            out += bytes([4])
        elif x < 0.93:
            out += bytes([5])
        elif x < 0.98:
            out += bytes([6, r.randrange(256), r.randrange(256), r.randrange(256)]) + bytes(
                r.randrange(256) for _ in range(16))
        else:
            out += bytes([7])
    return bytes(out)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "api")
    os.makedirs(out_dir, exist_ok=True)
    r = random.Random(20261123)
    files = {}
    for m in range(N_METHODS):
        for j, (d, dv, budget, sink, window, prompt) in enumerate([(4, 4, 64, 4, 4, 100), (8, 6, 200, 8, 8, 300)]):
            files["valid_m%d_%d.bin" % (m, j)] = config(r, m, d, dv, budget, sink, window, prompt) + ops(r, d, dv, 380)
    # explicit parameter groups (subgen | balancekv | express), some out of range
    files["valid_params_subgen.bin"] = config(r, 3, 4, 4, 120, 4, 4, 0, 1, bytes([3, 20, 4, 0])) + ops(r, 4, 4, 200)
    files["valid_params_bkv.bin"] = config(r, 4, 4, 4, 300, 4, 4, 0, 2, bytes([16, 2, 2, 1, 0, 0, 0, 0, 0])) + ops(r, 4, 4, 300)
    files["valid_params_express.bin"] = config(r, 6, 4, 4, 200, 4, 4, 0, 4, bytes([3, 1, 2, 2, 0, 0, 1])) + ops(r, 4, 4, 300)
    files["bad_unknown_method.bin"] = config(r, 63, 4, 4, 64, 4, 4, 10)
    files["bad_budget_too_small.bin"] = config(r, 3, 4, 4, 9, 4, 4, 10)
    files["bad_params.bin"] = config(r, 4, 4, 4, 300, 4, 4, 10, 7, bytes([7, 21, 200, 9, 7, 8, 9, 10, 9, 3, 9, 9, 9, 9, 9, 9]))
    files["bad_dtype.bin"] = config(r, 0, 4, 4, 64, 4, 4, 10)[:8] + bytes([0, 2, 1]) + config(r, 0, 4, 4, 64, 4, 4, 10)[9:]
    # issue 27: exact attention over eight values of 1e38 (palette byte 203): the f32 sums of the
    # SIMD, single and CUDA tables overflowed to KVC_E_RANGE where the reference answers; attends
    # on every table (op 3), on the CUDA one too (op 11: bit 3), then the batched pass (op 4)
    huge = config(r, 0, 4, 4, 64, 0, 0, 0)
    for _ in range(8):
        huge += bytes([2]) + bytes([100] * 4) + bytes([203] * 4)
    files["regress_exact_huge_values_tables.bin"] = huge + bytes([3, 1] + [110] * 8 + [11, 0] + [90] * 4 + [4])
    for name, data in sorted(files.items()):
        with open(os.path.join(out_dir, name), "wb") as f:
            f.write(data)
    print("wrote %d files to %s" % (len(files), out_dir))


if __name__ == "__main__":
    main()
