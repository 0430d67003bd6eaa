#!/usr/bin/env python3
"""A transformers tokenizer folder for a GGUF whose SentencePiece-BPE
vocabulary transformers reads wrongly (Gemma 3: transformers 5.2 turns the
GGUF's pieces and scores into a Unigram model, which splits " capital" into
" c", "ap", "it", "al"; the model then answers nonsense).

SentencePiece BPE merges the adjacent pair whose merged piece has the highest
score (the GGUF's scores are minus each piece's merge rank), so every piece
of two or more characters is one merge of its best split into two pieces
of the vocabulary, ranked by the merged piece's score. This writes that BPE
with byte fallback, spaces as "▁" and the GGUF's special tokens, as a
PreTrainedTokenizerFast folder that kvpress_race.py --tokenizer loads.

usage: gguf_bpe_tokenizer.py MODEL.gguf OUT_DIR
"""
import sys

import numpy as np


def main():
    from gguf import GGUFReader
    from tokenizers import Tokenizer, decoders, normalizers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    path, out = sys.argv[1], sys.argv[2]
    r = GGUFReader(path)

    def field(name):
        f = r.fields[name]
        return [f.parts[i] for i in f.data]

    tokens = [bytes(p).decode("utf-8", "replace") for p in field("tokenizer.ggml.tokens")]
    scores = np.array([p[0] for p in field("tokenizer.ggml.scores")], dtype=np.float64)
    types = np.array([p[0] for p in field("tokenizer.ggml.token_type")])
    special = {k: int(r.fields[f"tokenizer.ggml.{k}_token_id"].parts[-1][0])
               for k in ("bos", "eos", "unknown", "padding") if f"tokenizer.ggml.{k}_token_id" in r.fields}
    vocab = {t: i for i, t in enumerate(tokens)}
    normal = types == 1  # gguf token types: 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte
    merges = []
    for i, piece in enumerate(tokens):
        if not normal[i] or len(piece) < 2:
            continue
        best = None  # the split whose two halves are the highest-scored pieces (the last merge that makes it)
        for cut in range(1, len(piece)):
            a, b = piece[:cut], piece[cut:]
            if a in vocab and b in vocab:
                key = (scores[vocab[a]] + scores[vocab[b]], -cut)
                if best is None or key > best[0]:
                    best = (key, a, b)
        if best is not None:
            merges.append((scores[i], best[1], best[2]))
    merges.sort(key=lambda m: -m[0])
    tk = Tokenizer(BPE(vocab=vocab, merges=[(a, b) for _, a, b in merges], byte_fallback=True, fuse_unk=True,
                       unk_token=tokens[special.get("unknown", 0)]))
    tk.normalizer = normalizers.Replace(" ", "\u2581")
    tk.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    controls = [tokens[i] for i in np.flatnonzero((types == 3) | (types == 4))]
    fast = PreTrainedTokenizerFast(tokenizer_object=tk, bos_token=tokens[special["bos"]],
                                   eos_token=tokens[special["eos"]], unk_token=tokens[special.get("unknown", 0)],
                                   pad_token=tokens[special.get("padding", 0)], additional_special_tokens=controls[:512])
    fast.add_bos_token = True
    fast.save_pretrained(out)
    print(f"{out}: {len(tokens)} pieces, {len(merges)} merges")


if __name__ == "__main__":
    sys.exit(main())
