#!/usr/bin/env python3
"""How many protected tokens a prose needle's sentence needs before the
sentences selector reaches it (docs/kvpress-race.md, "Prose at KVzip's level").

For each of kvpress_race.py's natural-text prompts (same contexts, depths and
keys), the prompt goes through the model once at full attention; every token's
surprisal comes from the prefill's last hidden states (kvcompress.hf's
prompt_surprisal, as the press computes it). The prompt is cut into spans by
kvcompress.sentence_ends, with and without the surprisal split at each
``--sigmas`` value, and the spans after the sinks are ranked by mean surprisal
(kvc_spans_choose's order). The row says where the needle's span ranks and
what the spans up to it cost in protected tokens (each span's tokens + 2 for
radius 1): the protected budget at which the selector keeps the needle.

Rows are appended to the CSV as they finish; a rerun skips the prompts
already there (resume).

usage: prose_spans.py GGUF_DIR GGUF_NAME --csv OUT.csv [--haystack TEXT] [--seed 1]
       [--contexts 1024,2048,4096] [--trials 5] [--sigmas 1,1.5,2] [--sinks 4]
       prose_spans.py --table OUT.csv        (the table of docs/kvpress-race.md)
"""
import argparse
import csv
import os
import random
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kvpress_race as race  # noqa: E402  (the prompts)
from resumable_csv import ResumableCsv  # noqa: E402


def table(path):
    """Per haystack, seed and rule: the protected tokens needed to reach the
    needle as a share of the prompt (median, worst), and in how many prompts
    the needle's span is reached within the protected rows the sentences
    press has at 10%, 6.25% and 3.125% of f16 bytes (the plan of each
    prompt's own length: int8 rows, half the budget for spans, 4 sinks)."""
    from kvcompress import Cache

    budgets = ("10", "6.25", "3.125")
    room = {}

    def n_protect(pct, n):
        if (pct, n) not in room:
            c = Cache(30, 9, 3, 64, method="sink-window", dtype="int8", budget=f"{pct}%f16", context=n,
                      protect=50, protect_radius=1, sink=4)
            room[(pct, n)] = c.plan["n_protect"]
        return room[(pct, n)]

    cells = {}
    for r in csv.DictReader(open(path)):
        cells.setdefault((r["task"], r["seed"], r["rule"]), []).append(r)
    print("| haystack, seed | span rule | prompts | protected share needed: median | worst | "
          + " | ".join(f"reached at {b}%" for b in budgets) + " |")
    print("|---" * (5 + len(budgets)) + "|")
    for (task, seed, rule), rows in sorted(cells.items()):
        pcts = [float(r["cost_pct_of_prompt"]) for r in rows]
        ok = sorted(x for x in pcts if x >= 0)
        worst = "split apart" if len(ok) < len(pcts) else f"{max(pcts):.1f}%"
        med = f"{ok[len(ok) // 2]:.1f}%" if ok else "–"
        reached = [sum(0 <= int(r["cost_tokens"]) <= n_protect(b, int(r["prompt_tokens"])) for r in rows)
                   for b in budgets]
        print(f"| {task}, {seed} | {rule} | {len(rows)} | {med} | {worst} | " + " | ".join(map(str, reached)) + " |")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--table":
        return table(sys.argv[2])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf_dir")
    ap.add_argument("gguf_name")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--haystack", default=race.NATURAL_TEXT)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--contexts", default="1024,2048,4096")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--sigmas", default="1,1.5,2")
    ap.add_argument("--sinks", type=int, default=4, help="spans starting in the first N tokens are the sinks'")
    a = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from kvcompress import sentence_ends
    from kvcompress.hf import prompt_surprisal

    transformers.logging.set_verbosity_error()
    tok = AutoTokenizer.from_pretrained(a.gguf_dir, gguf_file=a.gguf_name)
    model = AutoModelForCausalLM.from_pretrained(a.gguf_dir, gguf_file=a.gguf_name, dtype=torch.float32).eval()
    blocks = race.natural_blocks(a.haystack)
    task = "natural" if a.haystack == race.NATURAL_TEXT else "natural:" + os.path.basename(a.haystack)
    rules = [("sentences", None)] + [(f"sentences+split{s}", float(s)) for s in a.sigmas.split(",")]

    out = ResumableCsv(a.csv, ["task", "seed", "context", "trial", "prompt_tokens", "rule", "needle_rank",
                               "needle_span_tokens", "cost_tokens", "cost_pct_of_prompt"],
                       key=["task", "seed", "context", "trial"])
    for n in [int(x) for x in a.contexts.split(",")]:
        for t in range(a.trials):
            if out.has(task, a.seed, n, t):
                continue
            key = f"{random.Random(f'{a.seed}-{task}-{n}-{t}').randrange(10000, 100000):05d}"
            context = (tok.bos_token or "") + race.build_context(tok, blocks, n - 48, (t + 0.5) / a.trials, key)
            ids = torch.tensor(tok.encode(context, add_special_tokens=False))
            text = [tok.decode([i]) for i in ids.tolist()]
            with torch.no_grad():
                hidden = model.model(input_ids=ids[None]).last_hidden_state[0]
            s = prompt_surprisal(model, hidden, ids)
            rows = []
            for name, sigma in rules:
                ends = sentence_ends(text, s if sigma is not None else None, sigma or 0.0).tolist()
                spans = [(b, e) for b, e in zip([0] + ends[:-1], ends) if b >= a.sinks]
                needle = [j for j, (b, e) in enumerate(spans) if key in "".join(text[b:e])
                          and "pass key is" in "".join(text[b:e])]
                if not needle:  # the needle's first sentence cut apart: no span holds it whole
                    rows.append([task, a.seed, n, t, len(ids), name, -1, 0, -1, -1])
                    continue
                means = np.array([s[b:e].mean() for b, e in spans])
                order = list(np.argsort(-means, kind="stable"))
                rank = order.index(needle[0])
                cost = sum(spans[j][1] - spans[j][0] + 2 for j in order[:rank + 1])
                b, e = spans[needle[0]]
                rows.append([task, a.seed, n, t, len(ids), name, rank, e - b, cost, f"{100 * cost / len(ids):.2f}"])
            out.write_all(rows)
            print(f"{task} seed {a.seed} n={n} t={t}: done", flush=True)
    out.close()


if __name__ == "__main__":
    sys.exit(main())
