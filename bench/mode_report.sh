#!/usr/bin/env bash
# Re-measures the default modes of BalanceKV (practical vs theory pairing
# probabilities, streaming and prefill) and Thinformer Express (threshold
# scale L = 1 vs the theory schedule, keys centred or not) on real long
# traces: SmolLM2-135M teacher-forced over the GPL-3 text, N tokens, layers
# 0 7 15 22 29, query heads 0 3 6 (one per kv head), 2 seeds, budgets 10% and
# 25% of N (sinks = window = min(32, budget/8), as kvc bench uses). Prints the
# mean over those runs of kvc eval's mean relative error (f64 reference).
#   bench/mode_report.sh [BUILD_DIR] [N]      (model: $KVC_SMOLLM2 or the fetch script's path)
set -euo pipefail
build=${1:-build-release}
n=${2:-2048}
kvc=$build/apps/kvc/kvc
model=${KVC_SMOLLM2:-${KVC_CACHE:-$HOME/.cache/kvcompress}/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -f "$model" ] || { echo "mode_report: $model not found (apps/fetch-smollm2.sh)"; exit 1; }
out=out/mode-report
mkdir -p "$out"
layers="0 7 15 22 29"
$kvc dump --model "$model" --text /usr/share/common-licenses/GPL-3 --steps "$n" --layers "${layers// /,}" \
  --out "$out/smollm2" >/dev/null

variants=(
  "balancekv practical|--method balancekv --bkv-mode practical"
  "balancekv theory|--method balancekv --bkv-mode theory"
  "balancekv-prefill practical|--method balancekv-prefill --bkv-mode practical"
  "balancekv-prefill theory|--method balancekv-prefill --bkv-mode theory"
  "express L=1 centred|--method express --express-L 1 --express-center on"
  "express L=1 not centred|--method express --express-L 1 --express-center off"
  "express L=theory centred|--method express --express-L theory --express-center on"
  "express L=theory not centred|--method express --express-L theory --express-center off"
)
echo "SmolLM2-135M, GPL-3 text, n=$n, layers $layers, heads 0 3 6, seeds 1 2: mean of mean relative error"
printf '| variant |'
for pct in 10 25; do printf ' budget %d%% |' "$pct"; done
echo; echo '|---|---|---|'
for v in "${variants[@]}"; do
  name=${v%%|*}; args=${v#*|}
  printf '| %s |' "$name"
  for pct in 10 25; do
    budget=$((n * pct / 100)); sw=$((budget / 8 < 32 ? budget / 8 : 32))
    sum=0; cnt=0
    for l in $layers; do for h in 0 3 6; do for seed in 1 2; do
      # shellcheck disable=SC2086
      e=$($kvc eval --trace "$out/smollm2/L$l" --head $h --seed $seed --budget $budget --sink $sw --window $sw \
            --reference f64 $args | tail -n 1 | sed 's/mean_rel_error=\([^ ]*\).*/\1/')
      sum=$(awk -v a="$sum" -v b="$e" 'BEGIN { print a + b }'); cnt=$((cnt + 1))
    done; done; done
    printf ' %s |' "$(awk -v a="$sum" -v c="$cnt" 'BEGIN { printf "%.4f", a / c }')"
  done
  echo
done
