#!/usr/bin/env python3
"""BalanceKV's Figure 4 as a table, from bench/kvpress_race.py's CSV run over
contexts x depths (issue 54): per press and budget, the share of needles
recalled in each (context, depth) cell, and the mean over the cells.

    python bench/kvpress_heatmap_table.py docs/data/kvpress-heatmap.csv [--task passkey]
"""
import argparse
import csv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csv")
    ap.add_argument("--task", default="passkey")
    a = ap.parse_args()
    rows = [r for r in csv.DictReader(open(a.csv)) if r["task"] == a.task]
    contexts = sorted({int(r["context"]) for r in rows})
    depths = sorted({r["depth"] for r in rows})
    cells = [(c, dp) for c in contexts for dp in depths]
    print("| press | budget | " + " | ".join(f"{c // 1024}k@{dp}" for c, dp in cells) + " | mean | runs |")
    print("|---|---|" + "---|" * len(cells) + "---|---|")
    for press, pct in sorted({(r["press"], r["budget_pct"]) for r in rows}):
        mine = [r for r in rows if r["press"] == press and r["budget_pct"] == pct]
        out = []
        for c, dp in cells:
            hit = [int(r["correct"]) for r in mine if int(r["context"]) == c and r["depth"] == dp]
            out.append(f"{sum(hit)}/{len(hit)}" if hit else "–")
        k = sum(int(r["correct"]) for r in mine)
        print(f"| {press} | {pct}% | " + " | ".join(out) + f" | {k / len(mine):.2f} | {len(mine)} |")


if __name__ == "__main__":
    main()
