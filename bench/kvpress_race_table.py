#!/usr/bin/env python3
"""The kvpress race's table (docs/kvpress-race.md) from bench/kvpress_race.py's
CSV: per task and budget, each press's correct answers out of its prompts with
a Wilson 95% interval; exact once per task.

usage: kvpress_race_table.py RACE.csv
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


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    cells = defaultdict(lambda: [0, 0])
    presses, budgets, tasks = [], set(), []
    for r in rows:
        key = (r["task"], r["budget_pct"], r["press"])
        cells[key][0] += int(r["correct"])
        cells[key][1] += 1
        if r["press"] not in presses:
            presses.append(r["press"])
        if r["task"] not in tasks:
            tasks.append(r["task"])
        if r["press"] != "exact":
            budgets.add(r["budget_pct"])
    budgets = sorted(budgets, key=float)
    contexts = sorted({int(r["context"]) for r in rows})
    print(f"contexts {', '.join(map(str, contexts))} tokens; correct / prompts [Wilson 95%]\n")
    head = "| press | " + " | ".join(f"{t}, {b}% of f16 bytes" for t in tasks for b in budgets)
    print(head + " |")
    print("|---" * (1 + len(tasks) * len(budgets)) + "|")
    for p in presses:
        cols = []
        for t in tasks:
            for b in budgets:
                k, n = cells[(t, "100" if p == "exact" else b, p)]
                lo, hi = wilson(k, n)
                cols.append(f"{k}/{n} [{100 * lo:.0f}, {100 * hi:.0f}]%" if n else "–")
        label = "exact (every token, f16: the same prompts in each column)" if p == "exact" else p
        print(f"| {label} | " + " | ".join(cols) + " |")


if __name__ == "__main__":
    main()
