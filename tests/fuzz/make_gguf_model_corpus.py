#!/usr/bin/env python3
"""Tiny Llama GGUF models (metadata, tensor table, weights, a byte-level BPE
tokenizer) for the model-loader fuzz target, and hostile variants of them.
tiny_llama() is also what the command-line tests load (tests/cli)."""
import math
import os
import random
import struct

from make_gguf_corpus import gguf, s

HERE = os.path.dirname(os.path.abspath(__file__))
F32, Q8_0, Q4_1 = 0, 8, 3


def byte_tokens(missing=()):
    """GPT-2's bytes_to_unicode strings of the byte values not in `missing`."""
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cps, n = {}, 0
    for b in range(256):
        if b in keep:
            cps[b] = b
        else:
            cps[b] = 256 + n
            n += 1
    return [chr(cps[b]) for b in range(256) if b not in missing]


def arr_str(items):
    return struct.pack("<IQ", 8, len(items)) + b"".join(s(x) for x in items)


def tensor_bytes(values, typ):
    if typ == F32:
        return struct.pack("<%df" % len(values), *values)
    out = b""
    for i in range(0, len(values), 32):
        blk = values[i:i + 32]
        if typ == Q8_0:
            amax = max(abs(x) for x in blk) or 1.0
            d = amax / 127.0
            out += struct.pack("<e", d) + bytes((int(round(x / d)) & 0xFF) for x in blk)
        else:  # Q4_1
            lo, hi = min(blk), max(blk)
            d = (hi - lo) / 15.0 or 1.0
            q = [max(0, min(15, int(round((x - lo) / d)))) for x in blk]
            out += struct.pack("<ee", d, lo) + bytes(q[j] | (q[j + 16] << 4) for j in range(16))
    return out


def tiny_llama(dim=8, hidden=16, heads=2, kv_heads=1, layers=2, ctx=64, block_count=None, typ=F32, seed=1,
               scale=0.3, nan_at=None, extra_tokens=0, missing=(), with_tokenizer=True, meta=None):
    """A complete model; vocab = the tokenizer's tokens (eos + bytes + merges)."""
    rng = random.Random(seed)
    merges = ["Ġ t", "h e", "Ġt he", "a n", "i n"]
    tokens = ["<|endoftext|>"] + byte_tokens(missing) + [m.replace(" ", "") for m in merges]
    vocab = len(tokens)
    if extra_tokens:
        tokens += ["<extra%d>" % i for i in range(extra_tokens)]
    kvd = dim // heads * kv_heads
    u32 = lambda k, v: (k, 4, struct.pack("<I", v))
    kvs = [("general.architecture", 8, s("llama")), u32("llama.block_count", layers if block_count is None else block_count),
           u32("llama.embedding_length", dim), u32("llama.feed_forward_length", hidden),
           u32("llama.attention.head_count", heads), u32("llama.attention.head_count_kv", kv_heads),
           u32("llama.context_length", ctx), ("llama.rope.freq_base", 6, struct.pack("<f", 10000.0)),
           ("llama.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-5))]
    if with_tokenizer:
        kvs += [("tokenizer.ggml.model", 8, s("gpt2")), ("tokenizer.ggml.tokens", 9, arr_str(tokens)),
                ("tokenizer.ggml.merges", 9, arr_str(merges)), u32("tokenizer.ggml.eos_token_id", 0)]
    for k, v in (meta or {}).items():
        kvs = [x for x in kvs if x[0] != k] + [u32(k, v)]
    shapes = [("token_embd.weight", [dim, vocab]), ("output_norm.weight", [dim])]
    for l in range(layers):
        shapes += [("blk.%d.attn_norm.weight" % l, [dim]), ("blk.%d.attn_q.weight" % l, [dim, dim]),
                   ("blk.%d.attn_k.weight" % l, [dim, kvd]), ("blk.%d.attn_v.weight" % l, [dim, kvd]),
                   ("blk.%d.attn_output.weight" % l, [dim, dim]), ("blk.%d.ffn_norm.weight" % l, [dim]),
                   ("blk.%d.ffn_gate.weight" % l, [dim, hidden]), ("blk.%d.ffn_down.weight" % l, [hidden, dim]),
                   ("blk.%d.ffn_up.weight" % l, [dim, hidden])]
    tensors, data = [], b""
    for name, dims in shapes:
        n = math.prod(dims)
        norm = name.endswith("norm.weight")
        vals = [1.0 if norm else rng.gauss(0.0, scale) for _ in range(n)]
        if nan_at == name:
            vals[n // 2] = float("nan")
        t = typ if (len(dims) == 2 and dims[0] % 32 == 0) else F32
        data += b"\0" * ((-len(data)) % 32)
        tensors.append((name, dims, t, len(data)))
        data += tensor_bytes(vals, t)
    return gguf(kvs=kvs, tensors=tensors, data=data)


def main():
    d = os.path.join(HERE, "corpus", "gguf_model")
    os.makedirs(d, exist_ok=True)
    files = {
        "valid_f32.gguf": tiny_llama(),
        "valid_q8_q41.gguf": tiny_llama(dim=32, hidden=64, heads=4, kv_heads=2, layers=1, typ=Q8_0),
        "valid_q41.gguf": tiny_llama(dim=32, hidden=32, heads=2, kv_heads=2, layers=1, typ=Q4_1),
        "valid_no_tokenizer.gguf": tiny_llama(with_tokenizer=False),
        "overflow_weights.gguf": tiny_llama(scale=1e10, seed=3),
        "bad_block_count_short.gguf": tiny_llama(layers=2, block_count=1),
        "bad_nan_weight.gguf": tiny_llama(nan_at="blk.1.ffn_up.weight"),
        "bad_huge_metadata.gguf": tiny_llama(meta={"llama.embedding_length": 65536}),
        "bad_missing_layer.gguf": tiny_llama(layers=1, block_count=2),
        "tokenizer_gaps.gguf": tiny_llama(missing=(0x04, 0xC0, 0xFF)),
    }
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as fh:
            fh.write(data)


if __name__ == "__main__":
    main()
