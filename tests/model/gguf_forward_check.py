#!/usr/bin/env python3
"""Independent float64 reference for the GGUF Llama decoder: reads the model
with the `gguf` package (test-only), runs a numpy forward pass over fixed
token ids and compares every position's logits with `kvc logits`.
Tolerance: max |logit difference| <= 2e-2 (float32 weights and activations
against float64 over 30 layers; logits are O(20)) and identical argmax at
every position. Exits 77 (skip) when the model or the gguf/numpy packages
are missing.

usage: gguf_forward_check.py KVC_BINARY [MODEL.gguf]
"""
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import gguf
    from gguf import quants
except ImportError as e:
    print(f"SKIP: {e}")
    sys.exit(77)

TOKENS = [1, 504, 3458, 8079, 28, 253, 3464, 314, 1345, 30]
TOL = 2e-2


def main():
    kvc = sys.argv[1]
    path = sys.argv[2] if len(sys.argv) > 2 else os.environ.get(
        "KVC_SMOLLM2", os.path.join(os.environ.get("KVC_CACHE") or os.path.expanduser("~/.cache/kvcompress"),
                     "SmolLM2-135M-Instruct.Q4_1.gguf"))
    if not os.path.exists(path):
        print(f"SKIP: {path} not found (apps/fetch-smollm2.sh fetches it)")
        sys.exit(77)
    r = gguf.GGUFReader(path)
    f = lambda k: r.fields[k].parts[r.fields[k].data[0]][0]
    L, D = int(f("llama.block_count")), int(f("llama.embedding_length"))
    H, HK = int(f("llama.attention.head_count")), int(f("llama.attention.head_count_kv"))
    base, eps = float(f("llama.rope.freq_base")), float(f("llama.attention.layer_norm_rms_epsilon"))
    T = {t.name: t for t in r.tensors}

    def w(name):
        t = T[name]
        a = quants.dequantize(t.data, t.tensor_type).astype(np.float64)
        return a.reshape(int(t.shape[1]), int(t.shape[0])) if len(t.shape) > 1 else a.reshape(-1)

    emb = w("token_embd.weight")
    out_w = w("output.weight") if "output.weight" in T else emb
    hs = D // H
    layers = [{k: w(f"blk.{l}.{k}.weight") for k in
               ["attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"]}
              for l in range(L)]
    rms = lambda x, g: g * x / np.sqrt(np.mean(x * x) + eps)
    Ks = [[] for _ in range(L)]
    Vs = [[] for _ in range(L)]
    ref = []
    for pos, tok in enumerate(TOKENS):
        x = emb[tok].copy()
        for l, W in enumerate(layers):
            xb = rms(x, W["attn_norm"])
            q, k, v = W["attn_q"] @ xb, W["attn_k"] @ xb, W["attn_v"] @ xb
            for vec in (q, k):
                for i in range(0, len(vec), 2):
                    fr = 1.0 / base ** ((i % hs) / hs)
                    c, s = np.cos(pos * fr), np.sin(pos * fr)
                    a, b = vec[i], vec[i + 1]
                    vec[i], vec[i + 1] = a * c - b * s, a * s + b * c
            Ks[l].append(k)
            Vs[l].append(v)
            K, V = np.array(Ks[l]), np.array(Vs[l])
            o = np.zeros(D)
            for h in range(H):
                kh = h // (H // HK)
                sc = K[:, kh * hs:(kh + 1) * hs] @ q[h * hs:(h + 1) * hs] / np.sqrt(hs)
                p = np.exp(sc - sc.max())
                p /= p.sum()
                o[h * hs:(h + 1) * hs] = p @ V[:, kh * hs:(kh + 1) * hs]
            x = x + W["attn_output"] @ o
            xb = rms(x, W["ffn_norm"])
            g, u = W["ffn_gate"] @ xb, W["ffn_up"] @ xb
            x = x + W["ffn_down"] @ (g / (1.0 + np.exp(-g)) * u)
        ref.append(out_w @ rms(x, w("output_norm.weight")))
    ref = np.array(ref)
    with tempfile.TemporaryDirectory() as d:
        npy = os.path.join(d, "logits.npy")
        subprocess.run([kvc, "logits", "--model", path, "--tokens", ",".join(map(str, TOKENS)), "--out", npy],
                       check=True, capture_output=True)
        ours = np.load(npy).astype(np.float64)
    diff = float(np.max(np.abs(ours - ref)))
    same = bool(np.all(ours.argmax(1) == ref.argmax(1)))
    print(f"{len(TOKENS)} positions, vocab {ref.shape[1]}: max |logit difference| {diff:.3e} (tolerance {TOL}); "
          f"argmax identical at every position: {same}; greedy next tokens {ref.argmax(1).tolist()}")
    sys.exit(0 if diff <= TOL and same else 1)


if __name__ == "__main__":
    main()
