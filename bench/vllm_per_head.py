#!/usr/bin/env python3
"""What the per-head methods would cost on vLLM's blocks (docs/vllm.md).

vLLM's block holds every kv head of every layer of its tokens (one block
table per request), so a block can be freed only when no (layer, kv head)
keeps any of its tokens. This script measures, for each per-token eviction
method of the core, the share of a prompt's blocks that some (layer, kv head)
still needs when each keeps `budget` of the prompt's tokens: the blocks a
block-granular engine would have to keep to run the method unchanged.

SmolLM2-135M (transformers, from the project's GGUF) reads the prompt once;
its post-RoPE keys, values' shapes and queries of every layer are captured.
Each method then runs in the core (kvcompress.Cache, f32 rows, one cache
per method) on those keys (and queries for H2O and TOVA, which score the
attention they receive; the prompt's last 32 queries for SnapKV). Which
tokens a cache kept is read back through the attention itself: with a zero
query every kept row gets the same softmax weight, so with values one-hot
over 64 tokens at a time (a pass per 64 tokens; the methods' decisions do
not depend on values) the output's nonzero entries are the kept tokens.

    python bench/vllm_per_head.py GGUF_DIR GGUF_NAME [--tokens 2048] [--budget 25]
        [--block 32] [--layers all|0,7,15,22,29] [--methods knorm,keydiff,snapkv,uniform,h2o,tova]

Prints one line per method: kept tokens per head, blocks needed, and that as
a share of the prompt's blocks and of the budget's.
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kvpress_race import FILL, NATURAL_TEXT, build_context, natural_blocks  # noqa: E402


def capture(model, tok, text):
    """Every layer's post-RoPE q (n, hq, d) and k (n, hkv, d), float32."""
    import torch
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    got = {}

    def recording(module, query, key, value, attention_mask, **kw):
        got[module.layer_idx] = (query[0].transpose(0, 1).float().numpy().copy(),
                                 key[0].transpose(0, 1).float().numpy().copy())
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kw)

    AttentionInterface.register("kvc_capture", recording)
    model.config._attn_implementation = "kvc_capture"
    ids = tok(text, return_tensors="pt").input_ids
    with torch.no_grad():
        model(ids, use_cache=False)
    return [got[i] for i in range(len(got))]


def kept_tokens(method, q, k, budget, observed):
    """The token sets (one per kv head) a core cache of `method` keeps after
    reading the prompt's keys k (n, hkv, d) (and queries q (n, hq, d) when
    `observed`)."""
    import kvcompress

    n, hkv, d = k.shape
    hq = q.shape[1]
    kept = [set() for _ in range(hkv)]
    for first in range(0, n, d):
        v = np.zeros((n, hkv, d), np.float32)
        idx = np.arange(first, min(n, first + d))
        v[idx, :, idx - first] = 1.0
        c = kvcompress.Cache(1, hq, hkv, d, method=method, budget=budget, dtype="f32", context=n)
        if method == "snapkv":
            c.prefill_queries(0, q[-32:])
        if observed:
            c.extend(0, k, v, q)
        else:
            c.extend(0, k, v)
        out = c.attend(0, np.zeros((hq, d), np.float32))
        for h in range(hkv):
            for j in np.flatnonzero(out[h * (hq // hkv)] > 0):
                kept[h].add(first + int(j))
    return kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf_dir")
    ap.add_argument("gguf_name")
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--budget", type=float, default=25.0, help="percent of the prompt's tokens each head keeps")
    ap.add_argument("--block", type=int, default=32)
    ap.add_argument("--layers", default="all")
    ap.add_argument("--methods", default="knorm,keydiff,snapkv,uniform,h2o,tova")
    ap.add_argument("--task", default="passkey", choices=["passkey", "natural"])
    a = ap.parse_args()
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(a.gguf_dir, gguf_file=a.gguf_name)
    model = AutoModelForCausalLM.from_pretrained(a.gguf_dir, gguf_file=a.gguf_name, torch_dtype=torch.float32)
    blocks = [FILL] if a.task == "passkey" else natural_blocks(NATURAL_TEXT)
    text = build_context(tok, blocks, a.tokens, 0.5, "31415")
    t0 = time.time()
    layers = capture(model, tok, text)
    n = layers[0][1].shape[0]
    use = range(len(layers)) if a.layers == "all" else [int(x) for x in a.layers.split(",")]
    budget = int(n * a.budget / 100)
    n_blocks = -(-n // a.block)
    print(f"vllm_per_head: {a.task} prompt of {n} tokens, {budget} kept per kv head ({a.budget:g}%), blocks of "
          f"{a.block} ({n_blocks}), layers {a.layers}; captured in {time.time() - t0:.0f} s", flush=True)
    print("| method | tokens kept per kv head (mean) | blocks one (layer, kv head) needs (mean) | blocks some "
          "(layer, kv head) needs | share of the prompt's blocks | × the budget's blocks |\n|---|---|---|---|---|---|")
    for method in a.methods.split(","):
        t0 = time.time()
        needed, sizes, own = set(), [], []
        for li in use:
            q, k = layers[li]
            for s in kept_tokens(method, q, k, budget, method in ("h2o", "tova")):
                sizes.append(len(s))
                own.append(len({t // a.block for t in s}))
                needed.update(t // a.block for t in s)
        share = len(needed) / n_blocks
        print(f"| {method} | {np.mean(sizes):.0f} | {np.mean(own):.0f} | {len(needed)} of {n_blocks} | "
              f"{100 * share:.0f}% | "
              f"{len(needed) / -(-budget // a.block):.1f} |  ({time.time() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
