"""Greedy tokens of the device path (kvcompress.device.MirroredCache, one
left-padded batch) against the host path (each prompt alone), per method, on
python/tests/test_device.py's seeded two-layer Llama: how many of each
sequence's 32 tokens differ, and at the first difference the host's top-2
logit margin and the largest logit difference of the two paths on that
shared prefix (docs/python.md, "Tokens against the host path").

    python bench/device_tokens.py int8 [method ...]     # a wheel with a CUDA table (SIMT or GPU)

Prints one CSV line per method as it finishes.
"""
import sys

import torch
import transformers

import kvcompress
import kvcompress.device as kd
import kvcompress.hf as kvc_hf

SEED, NEW = 20261127, 32


def main() -> None:
    dtype = sys.argv[1] if len(sys.argv) > 1 else "int8"
    methods = sys.argv[2:] or [m["name"] for m in kvcompress.methods()]
    device = "cuda" if kd.backend() == "gpu" else "cpu"
    torch.manual_seed(SEED)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=256, intermediate_size=256, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                                   max_position_embeddings=256)
    model = transformers.LlamaForCausalLM(cfg).to(device).eval()
    g = torch.Generator().manual_seed(SEED)
    prompts = [torch.randint(3, 128, (n,), generator=g) for n in (20, 13, 17)]
    width = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros(len(prompts), width, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):], mask[i, width - len(p):] = p, 1
    gen = dict(max_new_tokens=NEW, min_new_tokens=NEW, do_sample=False, pad_token_id=0, output_scores=True,
               return_dict_in_generate=True)
    print(f"# seed {SEED}, {dtype} pages, 3 prompts of 20, 13, 17 tokens, {NEW} new tokens each", flush=True)
    print("method,dtype,sequence,tokens_differing,first_difference,host_margin,logit_difference", flush=True)
    for method in methods:
        kw = dict(method=method, budget=64 if method == "exact" else 32, seed=1, sink=4, window=8, dtype=dtype)
        if method.endswith("-prefill"):
            kw["prefix_len"] = 10
        with torch.no_grad():
            dev = model.generate(ids.to(device), attention_mask=mask.to(device),
                                 past_key_values=kvc_hf.KvcCache.for_model(model, paged=True, **kw), **gen)
        for i, p in enumerate(prompts):
            with torch.no_grad():
                host = model.generate(p[None].to(device), past_key_values=kvc_hf.KvcCache.for_model(
                    model, paged=False, **kw), **gen)
            a, b = host.sequences[0, len(p):].cpu(), dev.sequences[i, width:].cpu()
            differ = (a != b).nonzero()
            if len(differ) == 0:
                print(f"{method},{dtype},{i},0,,,", flush=True)
                continue
            t = int(differ[0])
            hs, ds = host.scores[t][0].double().cpu(), dev.scores[t][i].double().cpu()
            top = hs.topk(2).values
            both = torch.isfinite(hs) & torch.isfinite(ds)  # min_new_tokens sets the end token to -inf in both
            print(f"{method},{dtype},{i},{int((a != b).sum())},{t},{float(top[0] - top[1]):.3g},"
                  f"{float((hs - ds)[both].abs().max()):.3g}", flush=True)


if __name__ == "__main__":
    main()
