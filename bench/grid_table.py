#!/usr/bin/env python3
"""The recall grid's table (bench/grid_report.sh writes OUT/recall-CONTEXT-DTYPE.csv).

Prints a markdown table: one row per method and budget, one column per storage
type, each cell correct/trials over every context in the files with its 95%
Wilson interval, then the configurations ranked by correct answers (ties: fewer
bytes first), the exact reference's score per context and what each n/a cell
says. Usage: bench/grid_table.py OUT [--top N]
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
    exact = defaultdict(lambda: [0, 0])  # context -> correct, trials
    na = {}
    dtypes, contexts = [], set()
    for path in sorted(glob.glob(os.path.join(out, "recall-*.csv"))):
        m = re.match(r"recall-(\d+)-(\w+)\.csv", os.path.basename(path))
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
                c[0] += int(r["correct"])
                c[1] += 1
                c[2] = max(c[2], int(r["cache_peak_bytes"] or 0))
    order = ["f16", "int8", "kivi4", "int4", "f32"]
    dtypes.sort(key=lambda t: order.index(t) if t in order else 99)
    methods = []
    for (m, p, t) in list(cells) + list(na):
        if (m, p) not in methods:
            methods.append((m, p))
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


if __name__ == "__main__":
    main()
