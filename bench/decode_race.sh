#!/usr/bin/env bash
# Decode speed of SmolLM2-135M after a long context: every method of the
# library at 5/10/25% (kvc bench decode) and llama.cpp's llama-bench on the
# same GGUF file, context and thread counts, measured in one run of this
# script (one after the other on the same machine; the ratios to our exact
# decode are taken inside each kvc run). Rows go to $OUT/decode.csv.
#   bench/decode_race.sh [BUILD_DIR] [MODEL.gguf]
# Environment: CONTEXT (default 8144: 8192 minus the decode steps), THREADS
# (default "1 2"), STEPS (16), ROUNDS (3), METHODS (default every method),
# LLAMA_BENCH (path of llama.cpp's llama-bench; its row is skipped without it.
# Build it from llama.cpp's sources, e.g. the copy inside PyPI's
# llama-cpp-python sdist: cmake -B build -DLLAMA_CURL=OFF && cmake --build
# build --target llama-bench).
set -euo pipefail
build=${1:-build-release}
model=${2:-$HOME/.cache/kvcompress/SmolLM2-135M-Instruct.Q4_1.gguf}
kvc=$build/apps/kvc/kvc
context=${CONTEXT:-8144}
steps=${STEPS:-16}
rounds=${ROUNDS:-3}
threads=${THREADS:-"1 2"}
out=${OUT:-out/decode-race}
mkdir -p "$out"
csv=$out/decode.csv
echo "engine,method,budget_pct,context,threads,tokens_per_s,ratio_to_our_exact" >"$csv"
methods_flag=()
[ -n "${METHODS:-}" ] && methods_flag=(--methods "$METHODS")
for t in $threads; do
  $kvc bench decode --model "$model" --context "$context" --steps "$steps" --rounds "$rounds" --threads "$t" \
    "${methods_flag[@]}" --csv "$out/kvc_t$t.csv" --quiet | tee "$out/kvc_t$t.txt"
  tail -n +2 "$out/kvc_t$t.csv" | awk -F, -v t="$t" '{printf "kvcompress,%s,%s,%s,%s,%s,%s\n", $1, $2, $3, t, $7, $8}' >>"$csv"
done
if [ -n "${LLAMA_BENCH:-}" ] && [ -x "$LLAMA_BENCH" ]; then
  for t in $threads; do
    # -p 0: no prompt test; -n steps tokens generated after a depth of `context` tokens (its f16 KV cache)
    "$LLAMA_BENCH" -m "$model" -p 0 -n "$steps" -d "$context" -t "$t" -r "$rounds" -o csv >"$out/llama_t$t.csv" 2>/dev/null
    tps=$(python3 -c "import csv,sys; r=list(csv.DictReader(open('$out/llama_t$t.csv'))); print(r[-1]['avg_ts'])")
    ours=$(awk -F, -v t="$t" '$1=="kvcompress" && $2=="exact" && $5==t {print $6}' "$csv")
    ratio=$(python3 -c "print(f'{$tps/$ours:.4f}' if '$ours' else 'nan')")
    echo "llama.cpp,exact-f16,100,$context,$t,$tps,$ratio" >>"$csv"
    echo "llama.cpp (llama-bench) exact f16 cache, $t threads: $tps tokens/s ($ratio x our exact)"
  done
else
  echo "LLAMA_BENCH not set: the llama.cpp row is skipped"
fi
echo "rows: $csv"
