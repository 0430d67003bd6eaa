#!/usr/bin/env python3
"""Independent float64 reference for `kvc ppl`: a llama2.c forward pass and
tokenizer written from scratch with numpy. Exits 0 when the perplexity that
`kvc ppl --method exact` reports agrees with this one within 1e-4 relative,
1 when not, 77 (skip) when numpy or the model is missing.

usage: ref_forward.py KVC_BINARY MODEL_DIR TEXT_FILE
"""
import math
import os
import re
import struct
import subprocess
import sys

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not installed")
    sys.exit(77)

TOL = 1e-4


def load_model(path):
    raw = open(path, "rb").read()
    dim, hidden, layers, heads, kv, vocab, seq = struct.unpack("<7i", raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    w = np.frombuffer(raw[28:], dtype="<f4").astype(np.float64)
    hs = dim // heads
    kvd = hs * kv
    off = 0

    def take(*shape):
        nonlocal off
        n = int(np.prod(shape))
        a = w[off:off + n].reshape(shape)
        off += n
        return a

    m = dict(dim=dim, hidden=hidden, layers=layers, heads=heads, kv=kv, vocab=vocab, seq=seq, hs=hs)
    m["emb"] = take(vocab, dim)
    m["rms_att"] = take(layers, dim)
    m["wq"] = take(layers, dim, dim)
    m["wk"] = take(layers, kvd, dim)
    m["wv"] = take(layers, kvd, dim)
    m["wo"] = take(layers, dim, dim)
    m["rms_ffn"] = take(layers, dim)
    m["w1"] = take(layers, hidden, dim)
    m["w2"] = take(layers, dim, hidden)
    m["w3"] = take(layers, hidden, dim)
    m["rms_final"] = take(dim)
    take(seq, hs)  # freq_cis (unused)
    m["wcls"] = m["emb"] if shared else take(vocab, dim)
    return m


def load_tokenizer(path, vocab):
    raw = open(path, "rb").read()
    off = 4
    pieces, scores = [], []
    for _ in range(vocab):
        score, n = struct.unpack("<fi", raw[off:off + 8])
        off += 8
        pieces.append(raw[off:off + n])
        off += n
        scores.append(score)
    return pieces, scores


def encode(text, pieces, scores):
    index = {p: i for i, p in enumerate(pieces)}
    toks = [1]
    data = text.encode("utf-8")
    if data:
        toks.append(index[b" "])
    i = 0
    while i < len(data):
        j = i + 1
        while j < len(data) and (data[j] & 0xC0) == 0x80 and j - i < 4:
            j += 1
        cp = data[i:j]
        if cp in index:
            toks.append(index[cp])
        else:
            toks.extend(b + 3 for b in cp)
        i = j
    while True:
        best, best_i, best_id = -1e10, -1, -1
        for k in range(1, len(toks) - 1):
            pid = index.get(pieces[toks[k]] + pieces[toks[k + 1]])
            if pid is not None and scores[pid] > best:
                best, best_i, best_id = scores[pid], k, pid
        if best_i < 0:
            return toks
        toks[best_i:best_i + 2] = [best_id]


def rmsnorm(x, w):
    return w * (x / np.sqrt(np.mean(x * x) + 1e-5))


def nll(m, toks):
    L, hs, heads, kv = m["layers"], m["hs"], m["heads"], m["kv"]
    group = heads // kv
    K = [[] for _ in range(L)]
    V = [[] for _ in range(L)]
    total = 0.0
    for pos in range(len(toks) - 1):
        x = m["emb"][toks[pos]].copy()
        for l in range(L):
            xb = rmsnorm(x, m["rms_att"][l])
            q, k, v = m["wq"][l] @ xb, m["wk"][l] @ xb, m["wv"][l] @ xb
            for vec in (q, k):
                for i in range(0, len(vec), 2):
                    freq = 1.0 / (10000.0 ** ((i % hs) / hs))
                    c, s = math.cos(pos * freq), math.sin(pos * freq)
                    a, b = vec[i], vec[i + 1]
                    vec[i], vec[i + 1] = a * c - b * s, a * s + b * c
            K[l].append(k)
            V[l].append(v)
            Kl, Vl = np.array(K[l]), np.array(V[l])
            out = np.zeros(m["dim"])
            for h in range(heads):
                kh = h // group
                sc = Kl[:, kh * hs:(kh + 1) * hs] @ q[h * hs:(h + 1) * hs] / math.sqrt(hs)
                p = np.exp(sc - sc.max())
                p /= p.sum()
                out[h * hs:(h + 1) * hs] = p @ Vl[:, kh * hs:(kh + 1) * hs]
            x = x + m["wo"][l] @ out
            xb = rmsnorm(x, m["rms_ffn"][l])
            h1, h3 = m["w1"][l] @ xb, m["w3"][l] @ xb
            x = x + m["w2"][l] @ (h1 / (1.0 + np.exp(-h1)) * h3)
        logits = m["wcls"] @ rmsnorm(x, m["rms_final"])
        mx = logits.max()
        total += -(logits[toks[pos + 1]] - mx - math.log(np.exp(logits - mx).sum()))
    return total / (len(toks) - 1)


def main():
    kvc, model_dir, text_path = sys.argv[1:4]
    mp, tp = os.path.join(model_dir, "stories260K.bin"), os.path.join(model_dir, "tok512.bin")
    if not os.path.exists(mp):
        print(f"SKIP: model not found at {mp}")
        sys.exit(77)
    m = load_model(mp)
    pieces, scores = load_tokenizer(tp, m["vocab"])
    toks = encode(open(text_path, encoding="utf-8").read(), pieces, scores)[: m["seq"]]
    ref = math.exp(nll(m, toks))
    out = subprocess.run([kvc, "ppl", "--method", "exact", "--budget", str(m["seq"]), "--text", text_path,
                          "--model", mp, "--tokenizer", tp], capture_output=True, text=True, check=True).stdout
    line = out.strip().splitlines()[-1]
    fields = dict(kv.split("=") for kv in line.split())
    got_tokens, got_ppl, got_exact = int(fields["tokens"]), float(fields["perplexity"]), float(fields["exact_perplexity"])
    rel = abs(got_exact - ref) / ref
    print(f"tokens: kvc {got_tokens}, reference {len(toks) - 1}")
    print(f"perplexity: kvc exact cache {got_ppl:.8f}, kvc exact {got_exact:.8f}, float64 reference {ref:.8f}")
    print(f"relative difference {rel:.3e} (tolerance {TOL:g})")
    ok = got_tokens == len(toks) - 1 and rel <= TOL and abs(got_ppl - got_exact) / ref <= TOL
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
