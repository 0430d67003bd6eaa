#!/usr/bin/env bash
# Figures of a method comparison: mean relative error at 12.5%, 25% and 50%
# budgets on a stories260K layer trace and on a clustered synthetic trace,
# log-log slopes of the normalised error against memory (kvc oracle), and
# update / query cost as ratios to exact attention's query cost.
#   bench/method_report.sh [BUILD_DIR]                    (uniform, balancekv, balancekv-prefill)
#   KVC_REPORT_METHODS="uniform express express-prefill" bench/method_report.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build-release}
kvc=$build/apps/kvc/kvc
bench="$build/apps/kvc/kvc bench cost"
out=out/method-report
mkdir -p "$out"
$kvc dump --steps 512 --out "$out/stories" >/dev/null
$kvc synth --kind clustered --n 16384 --d 64 --seed 1 --out "$out/clustered" >/dev/null
methods=${KVC_REPORT_METHODS:-"uniform balancekv balancekv-prefill"}

row() { # trace head sink window budget method
  $kvc eval --trace "$1" --head "$2" --sink "$3" --window "$4" --budget "$5" --method "$6" --reference f64 |
    tail -n 1 | sed 's/mean_rel_error=\([^ ]*\).*/\1/'
}
table() { # title trace head sink window budgets...
  local title=$1 trace=$2 head=$3 sink=$4 window=$5; shift 5
  echo "## $title (sink $sink, window $window): mean relative error"
  printf '| method |'; for b in "$@"; do printf ' budget %s |' "$b"; done; echo
  printf '|---|'; for b in "$@"; do printf -- '---|'; done; echo
  for m in $methods; do
    printf '| %s |' "$m"
    for b in "$@"; do printf ' %s |' "$(row "$trace" "$head" "$sink" "$window" "$b" "$m")"; done
    echo
  done
  echo
}
table "stories260K layer 2, head 0, n=512" "$out/stories/L2" 0 8 8 64 128 256
table "clustered synthetic, n=16384, d=64" "$out/clustered" 0 32 32 2048 4096 8192

echo "## slopes of log mean normalised error on log memory (kvc oracle, 8 seeds x 16 positions)"
for m in $methods; do
  s1=$($kvc oracle --trace "$out/stories/L2" --head 0 --sink 8 --window 8 --method "$m" --budget 64,128,256 --seeds 8 --positions 16 2>/dev/null | grep slope || true)
  s2=$($kvc oracle --trace "$out/clustered" --method "$m" --budget 2048,4096,8192 --seeds 8 --positions 16 2>/dev/null | grep slope || true)
  echo "- $m: stories260K L2: ${s1#slope of log mean e on log memory: }; clustered: ${s2#slope of log mean e on log memory: }"
done
echo
echo "## cost ratios (25% budget)"
$bench --trace "$out/stories/L2" --head 0 --sink 8 --window 8 --budget 128 --methods "$(echo $methods | tr " " ",")" --reps 200
$bench --trace "$out/clustered" --budget 4096 --methods "$(echo $methods | tr " " ",")" --reps 20
