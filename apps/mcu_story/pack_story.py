#!/usr/bin/env python3
"""Pack a llama2.c checkpoint and its tokenizer into one blob for the
microcontroller decoder (story.c): every matrix and the embedding table as
int8 rows with one f32 scale per row (scale = max|row| / 127, q = round(w /
scale)), the norm weights as f32, then the tokenizer. Little-endian, every
field 4-aligned; story.c reads it in place (from flash on a device).

  python3 pack_story.py MODEL.bin TOKENIZER.bin OUT.kvs

Layout: "KVS1", int32 dim, hidden_dim, n_layers, n_heads, n_kv_heads,
vocab_size, seq_len; int8 rows of: embedding (vocab x dim); per layer wq
(dim x dim), wk, wv (kv_dim x dim), wo (dim x dim), w1 (hidden x dim), w2
(dim x hidden), w3 (hidden x dim); f32 rms_att (layers x dim), rms_ffn
(layers x dim), rms_final (dim); classifier: int8 rows (vocab x dim) (the
embedding again when the file shares it); tokenizer: int32 max_token_length,
then per token f32 score, int32 length, the bytes, zero-padded to 4.
An int8 row of n elements: f32 scale, then n int8, padded to 4 bytes."""
import struct
import sys

import numpy as np


def int8_rows(m):
    m = np.asarray(m, dtype=np.float32)
    amax = np.abs(m).max(axis=1)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.rint(m / scale[:, None]), -127, 127).astype(np.int8)
    pad = (-m.shape[1]) % 4
    out = bytearray()
    for s, row in zip(scale, q):
        out += struct.pack("<f", float(s)) + row.tobytes() + b"\0" * pad
    return bytes(out)


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    model, tok, out = sys.argv[1:]
    raw = open(model, "rb").read()
    dim, hidden, layers, heads, kv_heads, vocab, seq_len = struct.unpack("<7i", raw[:28])
    shared = vocab > 0
    vocab = abs(vocab)
    w = np.frombuffer(raw, dtype="<f4", offset=28)
    hs = dim // heads
    kv_dim = kv_heads * hs
    at = 0

    def take(*shape):
        nonlocal at
        n = int(np.prod(shape))
        t = w[at:at + n].reshape(shape)
        at += n
        return t

    emb = take(vocab, dim)
    rms_att = take(layers, dim)
    wq, wk, wv = take(layers, dim, dim), take(layers, kv_dim, dim), take(layers, kv_dim, dim)
    wo = take(layers, dim, dim)
    rms_ffn = take(layers, dim)
    w1, w2, w3 = take(layers, hidden, dim), take(layers, dim, hidden), take(layers, hidden, dim)
    rms_final = take(dim)
    take(seq_len, hs // 2)  # legacy freq_cis_real
    take(seq_len, hs // 2)  # legacy freq_cis_imag
    wcls = emb if shared else take(vocab, dim)
    if at != w.size:
        sys.exit(f"{model}: {w.size - at} floats left over: not a llama2.c checkpoint of this shape")

    blob = bytearray(b"KVS1" + struct.pack("<7i", dim, hidden, layers, heads, kv_heads, vocab, seq_len))
    blob += int8_rows(emb)
    for l in range(layers):
        for m in (wq[l], wk[l], wv[l], wo[l], w1[l], w2[l], w3[l]):
            blob += int8_rows(m)
    blob += rms_att.astype("<f4").tobytes() + rms_ffn.astype("<f4").tobytes() + rms_final.astype("<f4").tobytes()
    blob += int8_rows(wcls)
    t = open(tok, "rb").read()
    (maxlen,) = struct.unpack("<i", t[:4])
    blob += struct.pack("<i", maxlen)
    p = 4
    for _ in range(vocab):
        score, n = struct.unpack("<fi", t[p:p + 8])
        s = t[p + 8:p + 8 + n]
        p += 8 + n
        blob += struct.pack("<fi", score, n) + s + b"\0" * ((-n) % 4)
    open(out, "wb").write(bytes(blob))
    print(f"{out}: {len(blob)} bytes (dim {dim}, hidden {hidden}, layers {layers}, heads {heads}/{kv_heads}, "
          f"vocab {vocab}, seq_len {seq_len})")


if __name__ == "__main__":
    main()
