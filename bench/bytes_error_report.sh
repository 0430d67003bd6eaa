#!/usr/bin/env bash
# Mean relative attention error at equal bytes (README "Long context at equal
# bytes"): SmolLM2-135M teacher-forced over the GPL-3 text, N tokens, layers
# 0 7 15 22 29, query heads 0 3 6 (one per kv head), seed 1; every method x
# storage type at 10%, 25% and 50% of the bytes of an f16 exact cache
# (kvc eval --budget P%f16: the most tokens whose arena fits), sinks = window = 32,
# all scored on the same positions N/2.. against the f64 reference. Writes
# OUT/bytes_error.csv (one row per run) as it goes and prints the table of
# means over the 15 (layer, head) runs.
#   bench/bytes_error_report.sh [BUILD_DIR] [N]   (model: $KVC_SMOLLM2 or the fetch script's path)
#   METHODS="..." DTYPES="..." pick rows, PCTS="6.25 12.5 25" the columns (default 10 25 50);
#   EXTRA="--protect 25" adds flags to every kvc eval.
set -euo pipefail
build=${1:-build-release}
n=${2:-2048}
kvc=$build/apps/kvc/kvc
model=${KVC_SMOLLM2:-${KVC_CACHE:-$HOME/.cache/kvcompress}/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$model" ] || { echo "bytes_error_report: $model not found (apps/fetch-smollm2.sh)"; exit 1; }
out=${OUT:-out/bytes-report}
mkdir -p "$out"
layers="0 7 15 22 29"
[ -d "$out/smollm2/L29" ] || $kvc dump --model "$model" --text /usr/share/common-licenses/GPL-3 --steps "$n" \
  --layers "${layers// /,}" --out "$out/smollm2" >/dev/null
methods=${METHODS:-"exact sink-window uniform knorm subgen balancekv express"}
dtypes=${DTYPES:-"f16 int8 int4"}
csv=$out/bytes_error.csv
echo "dtype,method,bytes_pct,layer,head,budget_tokens,arena_bytes,mean_rel_error,p99_rel_error" >"$csv"
echo "SmolLM2-135M, GPL-3 text, n=$n, layers $layers, heads 0 3 6, seed 1, positions $((n / 2)).., f64 reference"
pcts=${PCTS:-"10 25 50"}
printf '| storage | method |'; for pct in $pcts; do printf ' %s%% of f16 bytes |' "$pct"; done
printf '\n|---|---|'; for pct in $pcts; do printf -- '---|'; done; echo
for dt in $dtypes; do for m in $methods; do
  printf '| %s | %s |' "$dt" "$m"
  for pct in $pcts; do
    sum=0; cnt=0; tok=0
    for l in $layers; do for h in 0 3 6; do
      line=$($kvc eval --trace "$out/smollm2/L$l" --head $h --seed 1 --budget ${pct}%f16 --sink 32 --window 32 \
               --score-from $((n / 2)) --reference f64 --method "$m" --dtype "$dt" ${EXTRA:-} 2>/dev/null | tail -n 1) || line=""
      case $line in mean_rel_error=*) ;; *) continue ;; esac
      e=$(echo "$line" | sed 's/mean_rel_error=\([^ ]*\).*/\1/')
      p99=$(echo "$line" | sed 's/.*p99_rel_error=\([^ ]*\).*/\1/')
      tok=$(echo "$line" | sed 's/.*max_tokens=\([^ ]*\).*/\1/')
      ab=$(echo "$line" | sed 's/.*arena_bytes=\([^ ]*\).*/\1/')
      echo "$dt,$m,$pct,$l,$h,$tok,$ab,$e,$p99" >>"$csv"
      sum=$(awk -v a="$sum" -v b="$e" 'BEGIN { print a + b }'); cnt=$((cnt + 1))
    done; done
    if [ "$cnt" -gt 0 ]; then
      printf ' %s (%s tok) |' "$(awk -v a="$sum" -v c="$cnt" 'BEGIN { printf "%.4f", a / c }')" "$tok"
    else
      printf ' n/a |'
    fi
  done
  echo
done; done
