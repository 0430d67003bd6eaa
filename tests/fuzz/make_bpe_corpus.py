#!/usr/bin/env python3
"""Seed corpus of the GGUF tokenizer fuzz target (fuzz_bpe.c): even first
byte = text for the synthetic vocabularies, odd = a GGUF tokenizer file."""
import os

from make_gguf_model_corpus import tiny_llama

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    d = os.path.join(HERE, "corpus", "bpe")
    os.makedirs(d, exist_ok=True)
    files = {
        "text_english.bin": b"\0The cat's 3 hats, and the other's: 'll 've 're.\n\n  indented  \t tabs",
        "text_every_byte.bin": b"\0" + bytes(range(256)),
        "text_long_pretoken.bin": b"\0" + b"a" * 2500 + b" " + b"!" * 1200 + b" " + b"7" * 1100,
        "text_smollm2_gaps.bin": b"\0ok \xff \x04 \xc0\xc1 \xf1\x80\x80\x80 done",
        "text_utf8.bin": "\0café 日本語 😀 Ünïcödé".encode(),
        "text_nul_bytes.bin": b"\0a\0b\0\0c",
        "gguf_model_tokenizer.bin": b"\1" + tiny_llama(),
        "gguf_tokenizer_gaps.bin": b"\1" + tiny_llama(missing=(0x41, 0x20, 0xFF)),
    }
    for name, data in files.items():
        with open(os.path.join(d, name), "wb") as fh:
            fh.write(data)


if __name__ == "__main__":
    main()
