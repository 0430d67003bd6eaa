#!/usr/bin/env python3
"""Seed corpora for the llama2.c loader fuzz targets (small, deterministic)."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def checkpoint(dim=8, hidden=8, layers=1, heads=2, kv=1, vocab=4, seq=4, shared=True, extra=0, cut=0):
    hs = dim // heads
    kvd = hs * kv
    n = (vocab * dim + layers * dim + layers * dim * dim + 2 * layers * dim * kvd + layers * dim * dim
         + layers * dim + 3 * layers * dim * hidden + dim + seq * hs + (0 if shared else vocab * dim))
    hdr = struct.pack("<7i", dim, hidden, layers, heads, kv, vocab if shared else -vocab, seq)
    body = b"".join(struct.pack("<f", ((i * 7919) % 97) / 97.0 - 0.5) for i in range(n))
    data = hdr + body + b"\0" * extra
    return data[: len(data) - cut] if cut else data


def tokenizer(pieces, maxlen=None, vocab_byte=None):
    maxlen = maxlen or max(len(p) for p in pieces)
    out = struct.pack("<i", maxlen)
    for i, p in enumerate(pieces):
        out += struct.pack("<fi", float(-i), len(p)) + p
    return bytes([len(pieces) - 1 if vocab_byte is None else vocab_byte]) + out


def main():
    md = os.path.join(HERE, "corpus", "l2c_model")
    td = os.path.join(HERE, "corpus", "l2c_tokenizer")
    os.makedirs(md, exist_ok=True)
    os.makedirs(td, exist_ok=True)
    files = {
        "valid_shared.bin": checkpoint(),
        "valid_unshared.bin": checkpoint(shared=False),
        "valid_gqa_2layers.bin": checkpoint(dim=8, heads=4, kv=2, layers=2),
        "bad_truncated.bin": checkpoint(cut=3),
        "bad_trailing.bin": checkpoint(extra=4),
        "bad_header_only.bin": checkpoint()[:28],
        "bad_short.bin": b"\x08\x00\x00",
        "bad_neg_layers.bin": struct.pack("<7i", 8, 8, -1, 2, 1, 4, 4),
        "bad_kv_not_divisor.bin": struct.pack("<7i", 8, 8, 1, 2, 3, 4, 4),
        "bad_huge_dims.bin": struct.pack("<7i", 65536, 262144, 256, 1024, 1024, 1000000, 1048576),
        "bad_vocab_intmin.bin": struct.pack("<7i", 8, 8, 1, 2, 1, -2**31, 4),
    }
    for name, data in files.items():
        with open(os.path.join(md, name), "wb") as f:
            f.write(data)
    pieces = [b"<unk>", b"<s>", b"</s>"] + [bytes([b]) for b in b" abcdeinorstuOa"] + [b"ab", b" a", b"Once", b" upon"]
    tfiles = {
        "valid_small.bin": tokenizer(pieces),
        "valid_bytes.bin": tokenizer([b"<unk>", b"<s>", b"</s>"] + [b"<0x%02X>" % i for i in range(200)], vocab_byte=202),
        "bad_truncated.bin": tokenizer(pieces)[:-2],
        "bad_len_over_max.bin": tokenizer(pieces, maxlen=1),
        "bad_neg_len.bin": bytes([1]) + struct.pack("<ifi", 4, 0.0, -1),
        "bad_vocab_mismatch.bin": tokenizer(pieces, vocab_byte=200),
        "bad_empty.bin": b"\x05",
    }
    for name, data in tfiles.items():
        with open(os.path.join(td, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
