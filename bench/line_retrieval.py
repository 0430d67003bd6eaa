#!/usr/bin/env python3
"""SubGen's Table 1 task, line retrieval in LongEval's format, in kvpress's
pipeline (issue 54, docs/quality.md): first where the exact cache answers at
all, then SubGen, H2O, sink-window (Attention Sink), uniform and the
recommended configuration at a fixed, sublinear budget there.

A prompt is LongEval's instruction, then n_lines lines
"line <word>-<number>: REGISTER_CONTENT is <NNNNN>" (distinct line names
from a generator seeded by (seed, n_lines, question)) and "Now the record is
over." (the context, which the press compresses), then the question for the
line at depth (q + 0.5) / questions and the answer's start "The
<REGISTER_CONTENT> in line <name> is <"; 8 greedy tokens. Correct when the
line's 5-digit value is in them.

Budgets are sublinear in the context, as in the paper: a budget c gives
round(c * sqrt(n)) tokens for an n-token context. A press "kvc-METHOD-f16"
gets the bytes of that many f16 rows (c * sqrt(n) / n of an f16 exact
cache's bytes; the paper's kind: about that many tokens in the model's
precision, less the method's metadata); "kvc-METHOD-int8" gets the same bytes
in int8 rows, about twice the tokens; "-protect" adds
the library's protected spans (25% of the budget), as the recommended
configuration does. kvpress's own presses ("snapkv", "streaming_llm", ...)
keep the same share of the tokens. Rows are appended to the CSV as they
finish; a rerun skips those there.

    python bench/line_retrieval.py GGUF_DIR GGUF_NAME --csv OUT.csv [--tokenizer DIR]
        [--lines 3,5,10,20,50] [--questions 15] [--seed 54] [--presses exact,...] [--budgets 4]
"""
import argparse
import math
import os
import random
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resumable_csv import ResumableCsv  # noqa: E402

os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

WORDS = ("apple river stone cloud maple tiger piano lemon candle rocket violet falcon harbor copper meadow "
         "silver orange garden winter pepper").split()
INSTRUCTION = ("Below is a record of lines I want you to remember. Each line begins with 'line <line index>' and "
               "contains a '<REGISTER_CONTENT>' at the end of the line as a numerical value. For each line index, "
               "memorize its corresponding <REGISTER_CONTENT>. At the end of the record, I will ask you to retrieve "
               "the corresponding <REGISTER_CONTENT> of a certain line index. Now the record start:\n\n")


def line_prompt(n_lines: int, question: int, questions: int, seed: int) -> tuple[str, str, str, str]:
    """LongEval's record of n_lines lines and the question for one of them:
    (context, question, answer prefix, value)."""
    r = random.Random(f"{seed}-{n_lines}-{question}")
    names, lines = set(), []
    while len(lines) < n_lines:
        name = f"{r.choice(WORDS)}-{r.randrange(100)}"
        if name not in names:
            names.add(name)
            lines.append((name, r.randrange(10000, 100000)))
    name, value = lines[int((question + 0.5) / questions * n_lines)]
    record = "".join(f"line {n}: REGISTER_CONTENT is <{v}>\n" for n, v in lines)
    return (INSTRUCTION + record + "\nNow the record is over.",
            f" Tell me what is the <REGISTER_CONTENT> in line {name}? I need the number.",
            f"The <REGISTER_CONTENT> in line {name} is <", str(value))


def make_press(name: str, budget_tokens: int, n_context: int):
    """The press called name at a budget of budget_tokens tokens (or their
    f16 bytes) for an n_context-token context; None for exact."""
    if name == "exact":
        return None
    ours = re.fullmatch(r"kvc-(.+)-(f16|int8|int4|kivi4)(-protect)?", name)
    if ours:
        from kvcompress.hf import KvcPress

        method, dtype, protect = ours.groups()
        params = {"protect": 25} if protect else {}
        # the bytes of budget_tokens f16 rows (a ratio, not a token count: a
        # model with sliding-window layers splits bytes between its layer kinds)
        return KvcPress(method=method, dtype=dtype, compression_ratio=1.0 - budget_tokens / n_context, params=params)
    import kvpress

    theirs = {"snapkv": kvpress.SnapKVPress, "streaming_llm": kvpress.StreamingLLMPress,
              "random": kvpress.RandomPress, "tova": kvpress.TOVAPress, "knorm": kvpress.KnormPress}
    if name in theirs:
        return theirs[name](compression_ratio=1.0 - budget_tokens / n_context)
    raise SystemExit(f"unknown press {name}: want exact, kvc-METHOD-{{f16,int8,int4,kivi4}}[-protect], "
                     f"{', '.join(theirs)}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf_dir")
    ap.add_argument("gguf_name")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--tokenizer", help="a tokenizer folder in place of the GGUF's (Gemma 3: bench/gguf_bpe_tokenizer.py)")
    ap.add_argument("--lines", default="3,5,10,20,50")
    ap.add_argument("--questions", type=int, default=15)
    ap.add_argument("--seed", type=int, default=54)
    ap.add_argument("--presses", default="exact")
    ap.add_argument("--budgets", default="4", help="c in a budget of round(c * sqrt(context tokens)) tokens")
    a = ap.parse_args()
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline
    import kvpress  # noqa: F401  (registers the pipeline)

    transformers.logging.set_verbosity_error()
    torch.manual_seed(a.seed)
    tok = (AutoTokenizer.from_pretrained(a.tokenizer) if a.tokenizer
           else AutoTokenizer.from_pretrained(a.gguf_dir, gguf_file=a.gguf_name))
    model = AutoModelForCausalLM.from_pretrained(a.gguf_dir, gguf_file=a.gguf_name, dtype=torch.float32).eval()
    tok.chat_template = None  # plain text, as in kvpress_race.py
    pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tok, device="cpu")
    out = ResumableCsv(a.csv, ["press", "budget_c", "budget_tokens", "lines", "question", "prompt_tokens",
                               "correct", "answer", "seconds", "seed"],
                       key=["press", "budget_c", "lines", "question"])
    print(f"line_retrieval: {a.gguf_name}, seed {a.seed}, {a.questions} questions a cell, presses {a.presses}, "
          f"budgets c = {a.budgets} (round(c * sqrt(n)) tokens)", flush=True)
    for n_lines in [int(x) for x in a.lines.split(",")]:
        for q in range(a.questions):
            context, question, prefix, value = line_prompt(n_lines, q, a.questions, a.seed)
            n_context = len(tok(context).input_ids)
            for name in a.presses.split(","):
                for c in ([0.0] if name == "exact" else [float(x) for x in a.budgets.split(",")]):
                    if out.has(name, f"{c:g}", n_lines, q):
                        continue
                    budget = n_context if name == "exact" else min(n_context, round(c * math.sqrt(n_context)))
                    t0 = time.time()
                    with torch.no_grad():
                        answer = pipe(context, question=question, answer_prefix=prefix,
                                      press=make_press(name, budget, n_context), max_new_tokens=8)["answer"]
                    ok = int(value in answer)
                    out.write([name, f"{c:g}", budget, n_lines, q, n_context, ok, " ".join(answer.split())[:24],
                               f"{time.time() - t0:.1f}", a.seed])
                    print(f"{n_lines} lines q{q} {name} c={c:g} ({budget} tokens): {'ok' if ok else 'miss'} "
                          f"({answer.strip()[:16]!r})", flush=True)
    out.close()


if __name__ == "__main__":
    main()
