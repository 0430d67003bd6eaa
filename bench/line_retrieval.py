#!/usr/bin/env python3
"""SubGen's Table 1 task, line retrieval in LongEval's format, first with the
exact cache: how many lines SmolLM2-135M answers at all (issue 54,
docs/quality.md). The compressed methods are raced only where exact answers.

A prompt is LongEval's instruction, then n_lines lines
"line <word>-<number>: REGISTER_CONTENT is <NNNNN>" (distinct line names
from a generator seeded by (seed, n_lines, question)), then the question
for the line at depth (q + 0.5) / questions and the answer's start
"The <REGISTER_CONTENT> in line <name> is <"; 8 greedy tokens. Correct when
the line's 5-digit value is in them. The model is transformers' SmolLM2
from the project's GGUF, exact attention; rows are appended to the CSV as
they finish and a rerun skips those there.

    python bench/line_retrieval.py GGUF_DIR GGUF_NAME --csv docs/data/line-retrieval.csv
        [--lines 3,5,10,20,50] [--questions 15] [--seed 54]
"""
import argparse
import os
import random
import sys

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


def line_prompt(n_lines: int, question: int, questions: int, seed: int) -> tuple[str, str]:
    """LongEval's record of n_lines lines and the question for one of them: (prompt, answer)."""
    r = random.Random(f"{seed}-{n_lines}-{question}")
    names, lines = set(), []
    while len(lines) < n_lines:
        name = f"{r.choice(WORDS)}-{r.randrange(100)}"
        if name not in names:
            names.add(name)
            lines.append((name, r.randrange(10000, 100000)))
    name, value = lines[int((question + 0.5) / questions * n_lines)]
    record = "".join(f"line {n}: REGISTER_CONTENT is <{v}>\n" for n, v in lines)
    return (INSTRUCTION + record + f"\nNow the record is over. Tell me what is the <REGISTER_CONTENT> in line "
            f"{name}? I need the number.\nThe <REGISTER_CONTENT> in line {name} is <"), str(value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf_dir")
    ap.add_argument("gguf_name")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--lines", default="3,5,10,20,50")
    ap.add_argument("--questions", type=int, default=15)
    ap.add_argument("--seed", type=int, default=54)
    a = ap.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging

    logging.set_verbosity_error()
    tok = AutoTokenizer.from_pretrained(a.gguf_dir, gguf_file=a.gguf_name)
    model = AutoModelForCausalLM.from_pretrained(a.gguf_dir, gguf_file=a.gguf_name, dtype=torch.float32).eval()
    out = ResumableCsv(a.csv, ["method", "lines", "question", "prompt_tokens", "correct", "answer", "seed"],
                       key=["method", "lines", "question"])
    print(f"line_retrieval: seed {a.seed}, {a.questions} questions a cell, exact attention", flush=True)
    for n in [int(x) for x in a.lines.split(",")]:
        ok = 0
        for q in range(a.questions):
            if out.has("exact", n, q):
                continue
            prompt, value = line_prompt(n, q, a.questions, a.seed)
            ids = tok(prompt, return_tensors="pt").input_ids
            with torch.no_grad():
                gen = model.generate(ids, max_new_tokens=8, do_sample=False)
            answer = tok.decode(gen[0, ids.shape[1]:])
            ok += value in answer
            out.write(["exact", n, q, ids.shape[1], int(value in answer), " ".join(answer.split())[:24], a.seed])
        print(f"{n} lines: {ok}/{a.questions}", flush=True)
    out.close()


if __name__ == "__main__":
    main()
