#!/usr/bin/env python3
"""Seed corpus for the GGUF fuzz target: small valid files and hostile variants."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b


def gguf(version=3, kvs=None, tensors=None, data=b"", align=32):
    kvs = kvs or []
    tensors = tensors or []
    out = struct.pack("<IIQQ", 0x46554747, version, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += s(k) + struct.pack("<I", t) + v
    for name, dims, typ, off in tensors:
        out += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", typ, off)
    out += b"\0" * ((-len(out)) % align)
    return out + data


def main():
    d = os.path.join(HERE, "corpus", "gguf")
    os.makedirs(d, exist_ok=True)
    kvs = [("general.architecture", 8, s("llama")), ("llama.block_count", 4, struct.pack("<I", 2)),
           ("llama.rope.freq_base", 6, struct.pack("<f", 10000.0)),
           ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 2) + s("a") + s("bc"))]
    f32 = struct.pack("<8f", *range(8))
    q8 = struct.pack("<e", 0.5) + bytes(range(32))
    q41 = struct.pack("<ee", 0.5, -1.0) + bytes(range(16))
    valid = gguf(kvs=kvs, tensors=[("w", [8], 0, 0), ("q", [32], 8, 32), ("r", [32], 3, 96)],
                 data=f32 + b"\0" * 0 + q8 + b"\0" * 30 + q41)
    files = {
        "valid_small.gguf": valid,
        "valid_v2_no_tensors.gguf": gguf(version=2, kvs=kvs),
        "valid_alignment_64.gguf": gguf(kvs=kvs + [("general.alignment", 4, struct.pack("<I", 64))],
                                        tensors=[("w", [8], 0, 0)], data=f32, align=64),
        "bad_magic.gguf": b"GGUX" + valid[4:],
        "bad_version.gguf": valid[:4] + struct.pack("<I", 9) + valid[8:],
        "bad_truncated.gguf": valid[: len(valid) // 2],
        "bad_huge_counts.gguf": struct.pack("<IIQQ", 0x46554747, 3, 1 << 62, 1 << 62),
        "bad_tensor_past_end.gguf": gguf(kvs=kvs, tensors=[("w", [8], 0, 4096)], data=f32),
        "bad_unknown_type.gguf": gguf(kvs=kvs, tensors=[("w", [8], 99, 0)], data=f32),
        "bad_misaligned_offset.gguf": gguf(kvs=kvs, tensors=[("w", [4], 0, 4)], data=f32),
        "bad_nested_array.gguf": gguf(kvs=[("x", 9, struct.pack("<IQ", 9, 1))]),
        "bad_zero_dim.gguf": gguf(kvs=kvs, tensors=[("w", [0], 0, 0)], data=f32),
        "bad_alignment_3.gguf": gguf(kvs=[("general.alignment", 4, struct.pack("<I", 3))]),
    }
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as fh:
            fh.write(data)


if __name__ == "__main__":
    main()
