#!/usr/bin/env python3
"""The recall grid's table (bench/grid_report.sh writes OUT/recall-STEP.csv,
STEP = CONTEXT-DTYPE[-sSEED[-dDEPTHS]]; the steps of one context and type add up).

Prints a markdown table: one row per method and budget, one column per storage
type, each cell correct/trials over every context in the files with its 95%
Wilson interval, then the configurations ranked by correct answers (ties: fewer
bytes first), the exact reference's score per context and what each n/a cell
says. With --by-context: one row per configuration (method, budget, type), one
column per context and one for all, each with its Wilson interval.
Usage: bench/grid_table.py OUT [--top N] [--by-context]
"""
import csv
import glob
import math
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kvpress_race_table import wilson  # noqa: E402  (the one Wilson interval of bench/)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    top = int(sys.argv[sys.argv.index("--top") + 1]) if "--top" in sys.argv else 3
    cells = defaultdict(lambda: [0, 0, 0])  # (method, pct, dtype) -> correct, trials, bytes
    per_ctx = defaultdict(lambda: [0, 0])  # (method, pct, dtype, context) -> correct, trials
    exact = defaultdict(lambda: [0, 0])  # context -> correct, trials
    na = {}
    dtypes, contexts = [], set()
    for path in sorted(glob.glob(os.path.join(out, "recall-*.csv"))):
        m = re.match(r"recall-(\d+)-([a-z0-9]+)(?:-s\d+(?:-d[\d.]+)?)?\.csv", os.path.basename(path))
        if not m:
            continue
        dtype = m.group(2)
        if dtype not in dtypes:
            dtypes.append(dtype)
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                contexts.add(int(r["context"]))
                if r["method"] == "exact" and r["budget_pct"] == "100":
                    if r["correct"] in ("0", "1"):
                        exact[(int(r["context"]), dtype)][0] += int(r["correct"])
                        exact[(int(r["context"]), dtype)][1] += 1
                    continue
                key = (r["method"], float(r["budget_pct"]), dtype)
                if r["correct"] not in ("0", "1"):
                    na[key] = r["correct"]
                    continue
                c = cells[key]
                per_ctx[key + (int(r["context"]),)][0] += int(r["correct"])
                per_ctx[key + (int(r["context"]),)][1] += 1
                c[0] += int(r["correct"])
                c[1] += 1
                c[2] = max(c[2], int(r["cache_peak_bytes"] or 0))
    order = ["f16", "int8", "kivi4", "int4", "f32"]
    dtypes.sort(key=lambda t: order.index(t) if t in order else 99)
    methods = []
    for (m, p, t) in list(cells) + list(na):
        if (m, p) not in methods:
            methods.append((m, p))
    if "--by-context" in sys.argv:
        by_context(cells, per_ctx, exact, sorted(contexts))
        return
    print(f"contexts {sorted(contexts)}; cells: correct/trials [95% Wilson, %]\n")
    print("| method | budget (% of f16 bytes) | " + " | ".join(dtypes) + " |")
    print("|---|---|" + "---|" * len(dtypes))
    for (m, p) in methods:
        row = []
        for t in dtypes:
            if (m, p, t) in cells:
                k, n, _ = cells[(m, p, t)]
                lo, hi = wilson(k, n)
                row.append(f"{k}/{n} [{lo * 100:.0f}, {hi * 100:.0f}]")
            else:
                row.append("n/a" if (m, p, t) in na else "—")
        print(f"| {m} | {p:g} | " + " | ".join(row) + " |")
    print("\nexact (f32 reference), per context and storage run:",
          ", ".join(f"{c} ({t}) {k}/{n}" for (c, t), (k, n) in sorted(exact.items())))
    ranked = sorted(cells.items(), key=lambda kv: (-kv[1][0] / max(kv[1][1], 1), kv[0][1], kv[1][2]))
    print(f"\nranked (recall, then the smaller budget):")
    for (m, p, t), (k, n, b) in ranked[: max(top, 10)]:
        print(f"  {m} {p:g}%f16 {t}: {k}/{n}")


def cell(k, n):
    lo, hi = wilson(k, n)
    return f"{k}/{n} [{lo * 100:.0f}, {hi * 100:.0f}]"


def by_context(cells, per_ctx, exact, contexts):
    print("| configuration | " + " | ".join(str(c) for c in contexts) + " | all |")
    print("|---|" + "---|" * (len(contexts) + 1))
    ex = {c: [0, 0] for c in contexts}
    for (c, _t), (k, n) in exact.items():
        ex[c][0] += k
        ex[c][1] += n
    print("| exact (f32) | " + " | ".join(cell(*ex[c]) for c in contexts) + " | "
          + cell(sum(v[0] for v in ex.values()), sum(v[1] for v in ex.values())) + " |")
    for (m, p, t), (k, n, _b) in sorted(cells.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        row = [cell(*per_ctx[(m, p, t, c)]) if per_ctx[(m, p, t, c)][1] else "—" for c in contexts]
        print(f"| {m} {t} {p:g}% | " + " | ".join(row) + f" | {cell(k, n)} |")


if __name__ == "__main__":
    main()
