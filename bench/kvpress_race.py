#!/usr/bin/env python3
"""Passkey retrieval in kvpress's own pipeline: kvcompress's press against
kvpress's presses at the same bytes (docs/kvpress-race.md).

Every run goes through kvpress's KVPressTextGenerationPipeline unchanged:
exact prefill of the context with the press active, then the question and a
greedy answer. A kvpress press at ratio r keeps 1 - r of the prompt's tokens
in f16 rows; kvcompress's press at the same r gets (1 - r) of an f16 exact
cache's bytes for the prompt (its rows int8, its metadata counted).

Prompts: the project's passkey prompts (apps/kvc/passkey.c: instruction,
filler sentences or natural text cut in blocks of about 100 bytes, the needle
"The pass key is NNNNN. Remember it. NNNNN is the pass key." at a depth), the
question " What is the pass key?" with kvpress's answer_prefix "The pass key
is", as plain text (the chat template is set aside, so that the prompt is
passkey.c's). Contexts and trials from the command line; each prompt's key from a
generator seeded by (seed, task, context, trial), its depth
(t + 0.5) / trials. A run is correct when the 5-digit key is in the answer.
Trials are the outer loop, so a partial run covers every cell.

Rows are appended to the CSV as they finish; a rerun skips the rows already
there (resume). bench/kvpress_race_table.py makes the table.

usage: kvpress_race.py GGUF_DIR GGUF_NAME --csv OUT.csv [--contexts 1024,2048,4096] [--trials 5]
       [--budgets 10,25] [--tasks passkey,natural] [--haystack TEXT] [--presses NAME,...] [--seed 1]
       [--tokenizer DIR]
"""
import argparse
import os
import random
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resumable_csv import ResumableCsv  # noqa: E402

os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

INTRO = ("There is an important info hidden inside a lot of irrelevant text. Find it and memorize it. "
         "I will quiz you about the important information there.")
FILL = " The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
QUESTION = " What is the pass key?"  # kvpress appends it to the context as is: the space is passkey.c's
ANSWER_PREFIX = "The pass key is"  # kvpress's answer_prefix: the answer's start, after the chat template's turn
NATURAL_TEXT = "/usr/share/common-licenses/GPL-3"  # Debian's base-files: on every Debian machine


def natural_blocks(path):
    """The text cut into blocks of about 100 bytes at spaces, each starting
    with a space (passkey.c's kvc_passkey_set_haystack)."""
    text = " " + re.sub(r"\s+", " ", open(path, encoding="utf-8").read()).strip()
    blocks, at = [], 0
    while at < len(text):
        end = min(at + 100, len(text))
        while end < len(text) and text[end] != " ":
            end += 1
        blocks.append(text[at:end])
        at = end
    return blocks


def build_context(tok, blocks, n_tokens, depth, key):
    """The context (instruction, haystack, needle at depth) of about n_tokens
    tokens, the question left out (kvpress's pipeline adds it)."""
    needle = f" The pass key is {key}. Remember it. {key} is the pass key."

    def compose(n_blocks):
        at = int(depth * n_blocks + 0.5)
        parts = [INTRO]
        for b in range(n_blocks + 1):
            if b == at:
                parts.append(needle)
            if b < n_blocks:
                parts.append(blocks[b % len(blocks)])
        return "".join(parts)

    def count(n_blocks):
        return len(tok(compose(n_blocks), add_special_tokens=False).input_ids)

    base, one = count(0), count(1)
    n = max(0, (n_tokens - base) // max(1, one - base))
    for _ in range(3):  # natural blocks differ in length: correct by the measured tokens per block
        m = count(n)
        if m == n_tokens or n == 0:
            break
        n = max(0, int(n * (n_tokens - base) / max(1, m - base)))
    while n > 0 and count(n) > n_tokens:
        n -= 1
    return compose(n)


def make_press(name, ratio, tok):
    import kvpress
    from kvcompress.hf import KvcPress

    # "-sentences": the protected spans hold the prompt's sentences of highest
    # mean surprisal (KvcPress(protect_marks="sentences"): a share of 50% of
    # the budget, radius 1, 4 sinks, unless the suffix gives the share)
    sentences = re.fullmatch(r"kvc-(sink-window|balancekv)-(int8|int4|kivi4)-sentences(\d*)", name)
    if sentences:
        method, dtype, share = sentences.group(1), sentences.group(2), sentences.group(3)
        return KvcPress(compression_ratio=ratio, method=method, dtype=dtype, protect_marks="sentences",
                        params={"protect": int(share)} if share else {}, tokenizer=tok)
    ours = {
        "kvc-sink-window-int8": dict(method="sink-window", dtype="int8"),
        "kvc-sink-window-int8-protect": dict(method="sink-window", dtype="int8", params={"protect": 25}),
        "kvc-balancekv-int8": dict(method="balancekv", dtype="int8"),
        "kvc-balancekv-int8-protect": dict(method="balancekv", dtype="int8", params={"protect": 25}),
        # f16 rows: at r the same bytes and about the same tokens (1 - r) as kvpress's presses (the
        # BalanceKV paper's setting: a compression ratio of about 0.25, in the model's own precision)
        "kvc-balancekv-f16": dict(method="balancekv", dtype="f16"),
        "kvc-balancekv-f16-protect": dict(method="balancekv", dtype="f16", params={"protect": 25}),
        "kvc-express-int8-protect": dict(method="express", dtype="int8", params={"protect": 25}),
    }
    theirs = {
        "tova": kvpress.TOVAPress, "knorm": kvpress.KnormPress, "kvzip": kvpress.KVzipPress,
        "streaming_llm": kvpress.StreamingLLMPress, "snapkv": kvpress.SnapKVPress,
        "expected_attention": kvpress.ExpectedAttentionPress, "pyramidkv": kvpress.PyramidKVPress,
        "random": kvpress.RandomPress,
    }
    if name == "exact":
        return None
    if name in ours:
        return KvcPress(compression_ratio=ratio, **ours[name])
    if name in theirs:
        return theirs[name](compression_ratio=ratio)
    raise SystemExit(f"unknown press {name}: want exact, {', '.join(ours)}, "
                     f"kvc-{{sink-window,balancekv}}-{{int8,int4,kivi4}}-sentences[SHARE], {', '.join(theirs)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf_dir")
    ap.add_argument("gguf_name")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--contexts", default="1024,2048,4096")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--budgets", default="10,25", help="percent of the f16 exact cache's bytes")
    ap.add_argument("--tasks", default="passkey,natural",
                    help="passkey (filler), natural (the prose of --haystack)")
    ap.add_argument("--haystack", default=NATURAL_TEXT,
                    help="the natural task's text; a text other than GPL-3 names the task natural:BASENAME")
    ap.add_argument("--presses", default="exact,kvc-sink-window-int8-protect,kvc-balancekv-int8-protect,"
                    "kvc-express-int8-protect,tova,knorm,kvzip,streaming_llm,snapkv,expected_attention")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tokenizer", help="a tokenizer folder in place of the GGUF's (Gemma 3: bench/gguf_bpe_tokenizer.py)")
    ap.add_argument("--max-new-tokens", type=int, default=8)
    a = ap.parse_args()

    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline
    import kvpress  # noqa: F401  (registers the pipeline)

    transformers.logging.set_verbosity_error()
    torch.manual_seed(a.seed)
    tok = (AutoTokenizer.from_pretrained(a.tokenizer) if a.tokenizer
           else AutoTokenizer.from_pretrained(a.gguf_dir, gguf_file=a.gguf_name))
    model = AutoModelForCausalLM.from_pretrained(a.gguf_dir, gguf_file=a.gguf_name, dtype=torch.float32)
    model.eval()
    # KVzip re-reads the tokenizer from model.config.name_or_path, which a GGUF
    # load leaves pointing at a folder without one: give it a saved copy
    tok_dir = tempfile.mkdtemp(prefix="kvpress_race_tokenizer_")
    tok.save_pretrained(tok_dir)
    model.config.name_or_path = tok_dir
    # The project's passkey prompts are plain text (no chat turns), as in kvc
    # bench recall: without a chat template kvpress's pipeline reads the
    # context after the BOS token and puts "\n" between question and answer
    # prefix. (With SmolLM2-Instruct's chat template exact itself answered
    # "the pass key. The pass key is" at 1k tokens, depth 0.1.)
    tok.chat_template = None
    pipe = pipeline("kv-press-text-generation", model=model, tokenizer=tok, device="cpu")
    contexts = [int(x) for x in a.contexts.split(",")]
    budgets = [float(x) for x in a.budgets.split(",")]
    presses = a.presses.split(",")
    print(f"kvpress_race: seed {a.seed}, contexts {contexts}, {a.trials} trials each, budgets {budgets}% of f16 "
          f"bytes, torch {torch.__version__}, transformers {transformers.__version__}, "
          f"kvpress {__import__('importlib.metadata').metadata.version('kvpress')}", flush=True)

    out = ResumableCsv(a.csv, ["task", "context", "trial", "depth", "key", "prompt_tokens", "press", "budget_pct",
                               "correct", "answer", "seconds"],
                       key=["task", "context", "trial", "press", "budget_pct"])
    natural = natural_blocks(a.haystack) if "natural" in a.tasks else None
    natural_name = "natural" if a.haystack == NATURAL_TEXT else "natural:" + os.path.basename(a.haystack)
    for t in range(a.trials):
        for n in contexts:
            for task in a.tasks.split(","):
                blocks = [FILL] if task == "passkey" else natural
                if task == "natural":
                    task = natural_name
                key = f"{random.Random(f'{a.seed}-{task}-{n}-{t}').randrange(10000, 100000):05d}"
                depth = (t + 0.5) / a.trials
                context = build_context(tok, blocks, n - 48, depth, key)  # room for the template, question, answer
                for name in presses:
                    for pct in ([100.0] if name == "exact" else budgets):
                        if out.has(task, n, t, name, f"{pct:g}"):
                            continue
                        press = make_press(name, 1.0 - pct / 100.0, tok)
                        t0 = time.time()
                        try:
                            with torch.no_grad():
                                answer = pipe(context, question=QUESTION, answer_prefix=ANSWER_PREFIX, press=press,
                                              max_new_tokens=a.max_new_tokens)["answer"]
                        except (RuntimeError, ValueError) as e:  # a press that fails or refuses the model
                            # (PyramidKV at 8k; KVzip on Gemma 3): no row, said
                            print(f"{task} n={n} t={t} {name} {pct:g}%: failed, no row ({e})", flush=True)
                            continue
                        sec = time.time() - t0
                        ok = int(key in answer)
                        n_prompt = len(tok(context).input_ids)
                        out.write([task, n, t, f"{depth:.2f}", key, n_prompt, name, f"{pct:g}", ok,
                                   re.sub(r"[\s,]+", " ", answer)[:40], f"{sec:.1f}"])
                        print(f"{task} n={n} t={t} {name} {pct:g}%: {'ok' if ok else 'miss'} "
                              f"({answer.strip()[:24]!r}, {sec:.1f} s)", flush=True)
    out.close()


if __name__ == "__main__":
    sys.exit(main())
