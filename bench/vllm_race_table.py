#!/usr/bin/env python3
"""The tables of docs/vllm.md from bench/vllm_race.py's CSV.

    python bench/vllm_race_table.py docs/data/vllm-race.csv
"""
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vllm_race import wilson  # noqa: E402


def main() -> None:
    rows = list(csv.DictReader(open(sys.argv[1])))
    pool = {r["engine"]: int(r["pool_tokens"]) for r in rows if r["part"] == "pool"}
    if pool:
        base = pool.get("stock-bf16")
        print("| engine | pool (tokens) | × stock bf16 (f16's bytes) | × stock f32 |\n|---|---|---|---|")
        for name, tokens in pool.items():
            print(f"| {name} | {tokens:,} | {tokens / base:.2f} | {tokens / pool['stock-f32']:.2f} |")
        print()

    recall = [r for r in rows if r["part"] == "recall"]
    if recall:
        cells = sorted({(r["engine"], float(r["budget_pct"])) for r in recall}, key=lambda c: (-c[1], c[0]))
        contexts = sorted({int(r["context"]) for r in recall})
        print("| engine | bytes (share of f16 over the prompt) | correct / prompts [Wilson 95%] | by context (" +
              " / ".join(f"{c // 1024}k" for c in contexts) + ") |\n|---|---|---|---|")
        for name, pct in cells:
            mine = [r for r in recall if r["engine"] == name and float(r["budget_pct"]) == pct]
            k, n = sum(int(r["correct"]) for r in mine), len(mine)
            lo, hi = wilson(k, n)
            by = " / ".join(str(sum(int(r["correct"]) for r in mine if int(r["context"]) == c)) + "/" +
                            str(sum(1 for r in mine if int(r["context"]) == c)) for c in contexts)
            share = "every token, f32" if name == "stock" else f"{pct:g}%"
            print(f"| {name} | {share} | {k}/{n} [{100 * lo:.0f}, {100 * hi:.0f}]% | {by} |")
        print()

    adm = [r for r in rows if r["part"] == "admission"]
    if adm:
        print("| engine | pool in the same bytes (tokens) | requests | most running at once | preempted |\n"
              "|---|---|---|---|---|")
        for r in adm:
            print(f"| {r['engine']} | {int(r['pool_tokens']):,} | {r['requests']} × {int(r['context']):,} tokens | "
                  f"{r['most_running']} | {r['preempted']} |")
        print()

    speed = [r for r in rows if r["part"] == "speed"]
    if speed:
        stock = {r["batch"]: float(r["tokens_per_s"]) for r in speed if r["engine"].startswith("stock")}
        print("| requests | stock tokens/s | plugin tokens/s | plugin / stock |\n|---|---|---|---|")
        for r in speed:
            if r["engine"].startswith("plugin"):
                t = float(r["tokens_per_s"])
                print(f"| {r['batch']} | {stock[r['batch']]} | {t} | {t / stock[r['batch']]:.2f} |")


if __name__ == "__main__":
    main()
