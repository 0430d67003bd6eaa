#!/usr/bin/env python3
"""Thinformer Express's Figure 1(c) at our scale: SmolLM2-135M's perplexity
on a long text when the last k layers' attention is replaced by a compressed
cache's, with the time (issue 54, docs/quality.md).

The model (transformers, from the project's GGUF) reads the text once. In
the replaced layers every query attends right after its own token is
appended to a kvcompress cache (Cache.extend with queries, f32 rows, one per
layer), so the first tokens (sinks) and the last ones (the window) are
exact and the method holds the rest; the other layers use PyTorch SDPA.
Express and uniform get the same budget (tokens, sinks and window
included). k = 0 is the exact model. Rows are appended to the CSV as they
finish; a rerun skips those there.

    python bench/express_ppl.py GGUF_DIR GGUF_NAME --csv docs/data/express-ppl.csv
        [--tokens 4096] [--budget 512] [--layers 1,2,4,8,16,30] [--methods express,uniform]
        [--text /usr/share/common-licenses/GPL-3]
"""
import argparse
import os
import re
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resumable_csv import ResumableCsv  # noqa: E402

os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gguf_dir")
    ap.add_argument("gguf_name")
    ap.add_argument("--csv", required=True)
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--budget", type=int, default=512)
    ap.add_argument("--layers", default="1,2,4,8,16,30")
    ap.add_argument("--methods", default="express,uniform")
    ap.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    ap.add_argument("--seed", type=int, default=54)
    a = ap.parse_args()
    import torch
    import kvcompress
    from transformers import AttentionInterface, AutoModelForCausalLM, AutoTokenizer
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(a.gguf_dir, gguf_file=a.gguf_name)
    model = AutoModelForCausalLM.from_pretrained(a.gguf_dir, gguf_file=a.gguf_name, dtype=torch.float32)
    model.eval()
    cfg = model.config
    n_layers, hq, hkv = cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads
    d = cfg.hidden_size // hq
    text = re.sub(r"\s+", " ", open(a.text, encoding="utf-8").read())
    ids = tok(text, return_tensors="pt").input_ids
    while ids.shape[1] < a.tokens:  # a short text read again
        ids = torch.cat([ids, ids], dim=1)
    ids = ids[:, :a.tokens]
    state = {"method": None, "first": n_layers, "usage": None}

    def attention(module, query, key, value, attention_mask, **kw):
        if state["method"] is None or module.layer_idx < state["first"]:
            return sdpa_attention_forward(module, query, key, value, attention_mask, **kw)
        q = query[0].transpose(0, 1).float().contiguous().numpy()
        k = key[0].transpose(0, 1).float().contiguous().numpy()
        v = value[0].transpose(0, 1).float().contiguous().numpy()
        c = kvcompress.Cache(1, hq, hkv, d, method=state["method"], budget=a.budget, dtype="f32",
                             context=q.shape[0], seed=a.seed + module.layer_idx)
        out = c.extend(0, k, v, q)
        state["usage"] = c.usage()
        return torch.from_numpy(out)[None].to(query.dtype), None

    AttentionInterface.register("kvc_replace", attention)
    model.config._attn_implementation = "kvc_replace"

    out = ResumableCsv(a.csv, ["method", "replaced_layers", "tokens", "budget", "perplexity", "seconds", "text",
                               "seed"],
                       key=["method", "replaced_layers", "tokens", "budget"])
    print(f"express_ppl: {ids.shape[1]} tokens of {a.text}, budget {a.budget} tokens per kv head, seed {a.seed}, "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads)", flush=True)
    runs = [("exact", 0)] + [(m, int(k)) for k in a.layers.split(",") for m in a.methods.split(",")]
    for method, k in runs:
        if out.has(method, k, ids.shape[1], a.budget):
            continue
        state["method"] = None if method == "exact" else method
        state["first"] = n_layers - k
        t0 = time.perf_counter()
        with torch.no_grad():
            loss = model(ids, labels=ids).loss.item()
        sec = time.perf_counter() - t0
        ppl = float(np.exp(loss))
        out.write([method, k, ids.shape[1], a.budget, f"{ppl:.4f}", f"{sec:.1f}", os.path.basename(a.text), a.seed])
        print(f"{method} last {k} layers: perplexity {ppl:.3f}, {sec:.1f} s", flush=True)
    out.close()


if __name__ == "__main__":
    main()
