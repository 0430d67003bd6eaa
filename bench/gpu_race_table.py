#!/usr/bin/env python3
"""Joins batch_race's and gpu_race_torch.py's CSV rows into one markdown
table: per shape, microseconds per attend (L2 flushed, graph-timed on both
sides), the ratio to PyTorch SDPA's f16 cuDNN backend and to its flash
backend separately (< 1: kvcompress is faster; the goals are stated against
cuDNN), and the fraction of the read kernel's bandwidth over the bytes the
kernel actually reads (pages with their weights and roles). Rows of either
side may be missing (a step that failed): their cells say n/a.
usage: gpu_race_table.py KVC_CSV TORCH_CSV"""
import csv
import sys


def rows(path):
    try:
        with open(path) as f:
            return [r for r in csv.reader(line for line in f if not line.startswith("#"))
                    if r and r[0] in ("kvc", "torch", "read")]
    except OSError:
        return []


kvc, torch_rows = rows(sys.argv[1]), rows(sys.argv[2])
read = [r for r in kvc if r[0] == "read"]
if read:
    print(f"read kernel: {float(read[0][10]):.3f} TB/s\n")
peer = {}
for r in torch_rows:
    if r[7] != "n/a":
        peer.setdefault(tuple(r[1:2] + r[3:7]), {})[r[2]] = float(r[7])
cols = ["f16", "int8", "int4", "int4-row", "sink-window-int8-25pct"]
print("| shape | B | n | q/kv heads | SDPA flash µs | SDPA cuDNN µs | "
      + " | ".join(f"kvc {c} µs (× cuDNN, × flash, % read)" for c in cols) + " | max rel. error |")
print("|" + "---|" * (6 + len(cols) + 1))
shapes = []
for r in kvc:
    if r[0] == "kvc":
        key = tuple(r[1:2] + r[3:7])
        if key not in shapes:
            shapes.append(key)


def ratio(us, p, name):
    return f"{us / p[name]:.2f}×" if name in p else "n/a"


for key in shapes:
    p = peer.get(key, {})
    cells, errs = [], []
    for c in cols:
        m = [r for r in kvc if r[0] == "kvc" and tuple(r[1:2] + r[3:7]) == key and r[2] == c]
        if not m:
            cells.append("–")
            continue
        if m[0][7] in ("nan", "n/a"):
            cells.append("untimed")
        else:
            us = float(m[0][7])
            cells.append(f"{us:.1f} ({ratio(us, p, 'f16-cudnn')}, {ratio(us, p, 'f16-flash')}, "
                         f"{100 * float(m[0][11]):.0f}%)")
        if m[0][13] not in ("nan", "-"):
            errs.append(f"{c} {float(m[0][13]):.2g}")
    fl = f"{p['f16-flash']:.1f}" if "f16-flash" in p else "n/a"
    cu = f"{p['f16-cudnn']:.1f}" if "f16-cudnn" in p else "n/a"
    print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]}/{key[4]} | {fl} | {cu} | " + " | ".join(cells)
          + f" | {', '.join(errs) or '–'} |")
