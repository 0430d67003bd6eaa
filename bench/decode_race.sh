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
  # exact with an f16 cache: the bytes of llama.cpp's default KV cache
  $kvc bench decode --model "$model" --context "$context" --steps "$steps" --rounds "$rounds" --threads "$t" \
    --methods exact --budget 100% --dtype f16 --csv "$out/kvc_f16_t$t.csv" --quiet | tee "$out/kvc_f16_t$t.txt"
  f16=$(awk -F, '$1=="exact" {print $7; exit}' "$out/kvc_f16_t$t.csv")
  ours=$(awk -F, -v t="$t" '$1=="kvcompress" && $2=="exact" && $5==t {print $6}' "$csv")
  echo "kvcompress,exact-f16cache,100,$context,$t,$f16,$(python3 -c "print(f'{$f16/$ours:.4f}')")" >>"$csv"
done
if [ -n "${LLAMA_BENCH:-}" ] && [ -x "$LLAMA_BENCH" ]; then
  for t in $threads; do
    # -p 0: no prompt test; -n steps tokens generated after a depth of `context` tokens (its
    # default f16 KV cache), flash attention off and on: both rows, so llama.cpp's best counts
    "$LLAMA_BENCH" -m "$model" -p 0 -n "$steps" -d "$context" -t "$t" -r "$rounds" -fa 0,1 -o csv \
      >"$out/llama_t$t.csv" 2>/dev/null
    ours=$(awk -F, -v t="$t" '$1=="kvcompress" && $2=="exact" && $5==t {print $6}' "$csv")
    python3 - "$out/llama_t$t.csv" "$context" "$t" "$ours" >>"$csv" <<'PY'
import csv, sys
path, context, t, ours = sys.argv[1:5]
for r in csv.DictReader(open(path)):
    tps = float(r["avg_ts"])
    ratio = tps / float(ours) if ours else float("nan")
    print(f"llama.cpp,exact-f16-fa{r['flash_attn']},100,{context},{t},{tps:.4f},{ratio:.4f}")
PY
    grep "^llama.cpp" "$csv" | awk -F, -v t="$t" '$5==t {printf "llama.cpp (llama-bench) %s, %s threads: %s tokens/s (%s x our exact)\n", $2, t, $6, $7}'
  done
else
  echo "LLAMA_BENCH not set: the llama.cpp row is skipped"
fi
echo "rows: $csv"
