#!/usr/bin/env python3
"""The kvpress race's table (docs/kvpress-race.md) from bench/kvpress_race.py's
CSV: per task and budget, each press's correct answers out of its prompts with
a Wilson 95% interval; exact once per task.

usage: kvpress_race_table.py RACE.csv [--presses NAME,...]   (only these, in this order)
       kvpress_race_table.py RACE.csv --paired A,B,PCT         (B's seconds over A's, same prompts)
"""
import csv
import math
import sys
from collections import defaultdict


def wilson(k, n, z=1.96):
    if n == 0:
        return (0.0, 0.0)
    p = k / n
    c = (p + z * z / (2 * n)) / (1 + z * z / n)
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, c - h), min(1.0, c + h))


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else 0.5 * (xs[len(xs) // 2 - 1] + xs[len(xs) // 2])


def paired(path, a, b, pct):
    """Per context: the median seconds of A and B over the prompts both ran
    at PCT, and the median of the per-prompt ratios B / A."""
    by = defaultdict(dict)
    for r in csv.DictReader(open(path)):
        if r["budget_pct"] == pct and r["press"] in (a, b):
            by[(r["task"], int(r["context"]), r["trial"])][r["press"]] = float(r["seconds"])
    print(f"| context | prompts | {a} s | {b} s | median of {b} / {a} |")
    print("|---|---|---|---|---|")
    for c in sorted({k[1] for k in by}):
        both = [v for k, v in by.items() if k[1] == c and len(v) == 2]
        if both:
            print(f"| {c} | {len(both)} | {median([v[a] for v in both]):.1f} | {median([v[b] for v in both]):.1f} | "
                  f"{median([v[b] / v[a] for v in both]):.2f} |")


def main():
    if len(sys.argv) == 4 and sys.argv[2] == "--paired":
        a, b, pct = sys.argv[3].split(",")
        return paired(sys.argv[1], a, b, pct)
    only = sys.argv[3].split(",") if len(sys.argv) > 3 and sys.argv[2] == "--presses" else None
    rows = [r for r in csv.DictReader(open(sys.argv[1])) if only is None or r["press"] in only]
    cells = defaultdict(lambda: [0, 0])
    seconds = defaultdict(list)
    presses, tasks = [], []
    budgets = defaultdict(set)
    for r in rows:
        key = (r["task"], r["budget_pct"], r["press"])
        cells[key][0] += int(r["correct"])
        cells[key][1] += 1
        seconds[(r["press"], r["context"])].append(float(r["seconds"]))
        if r["press"] not in presses:
            presses.append(r["press"])
        if r["task"] not in tasks:
            tasks.append(r["task"])
        if r["press"] != "exact":
            budgets[r["task"]].add(r["budget_pct"])
    if only is not None:
        presses = [p for p in only if p in presses]
    contexts = sorted({int(r["context"]) for r in rows})
    print(f"contexts {', '.join(map(str, contexts))} tokens; correct / prompts [Wilson 95%]")
    for t in tasks:  # one table per task: a press per row, a budget per column
        bs = sorted(budgets[t], key=float, reverse=True)
        print(f"\n{t}:\n")
        print("| press | " + " | ".join(f"{b}% of f16 bytes" for b in bs) + " |")
        print("|---" * (1 + len(bs)) + "|")
        for p in presses:
            cols = []
            for b in bs:
                k, n = cells[(t, "100" if p == "exact" else b, p)]
                lo, hi = wilson(k, n)
                cols.append(f"{k}/{n} [{100 * lo:.0f}, {100 * hi:.0f}]%" if n else "–")
            if all(c == "–" for c in cols):
                continue
            label = "exact (every token, f16: the same prompts in each column)" if p == "exact" else p
            print(f"| {label} | " + " | ".join(cols) + " |")
    print("\nmedian seconds per run (prefill with the press, question, 8-token answer), every task and budget:\n")
    print("| press | " + " | ".join(f"{c} tokens" for c in contexts) + " |")
    print("|---" * (1 + len(contexts)) + "|")
    for p in presses:
        print(f"| {p} | " + " | ".join(f"{median(seconds[(p, str(c))]):.1f}" if seconds[(p, str(c))] else "–"
                                       for c in contexts) + " |")


if __name__ == "__main__":
    main()
