#!/usr/bin/env bash
# The recall grid of issue 32 on SmolLM2-135M (docs/quality.md "The grid"):
# every registered method x storage type x budget (6.25, 12.5, 25% of an f16
# exact cache's bytes), protected spans at 25% of each budget for every
# method, the filler passkey at 5 depths (10..90%) per context length. Each
# step is one `kvc bench recall` run (one context, one storage type) that
# writes its CSV and log to OUT (default ./grid) as it goes, so a stopped
# series keeps every step it finished; the exact prefill is recorded once per
# prompt and replayed into every configuration (kvc bench recall --help).
#   bench/grid_report.sh [step ...]   step: CONTEXT-DTYPE[-sSEED[-dDEPTHS]], e.g.
#   2048-int8, 8192-kivi4-s2 (keys drawn from seed 2) or 8192-kivi4-s3-d10.30.50
#   (depths 10, 30, 50 only): a long context's prompts split over seeds and
#   depths keep each run under 20 minutes (default seed 1, depths 10..90)
#   default: 1024 2048 4096 8192 x int8 f16 kivi4
#   KVC=path/to/kvc (default build-release/apps/kvc/kvc), THREADS (default 2),
#   METHODS (default: every method), PROTECT (default 25; 0 = off),
#   BUDGETS (default 6.25%f16,12.5%f16,25%f16), TRIALS (keys per depth, default 1)
set -euo pipefail
cd "$(dirname "$0")/.."
KVC=${KVC:-build-release/apps/kvc/kvc}
OUT=${OUT:-grid}
THREADS=${THREADS:-2}
PROTECT=${PROTECT:-25}
BUDGETS=${BUDGETS:-6.25%f16,12.5%f16,25%f16}
TRIALS=${TRIALS:-1}
mkdir -p "$OUT"
steps=${*:-}
if [ -z "$steps" ]; then
  for c in 1024 2048 4096 8192; do for t in int8 f16 kivi4; do steps="$steps $c-$t"; done; done
fi
methods=()
[ -n "${METHODS:-}" ] && methods=(--methods "$METHODS")
protect=()
[ "$PROTECT" != 0 ] && protect=(--protect "$PROTECT")
for s in $steps; do
  IFS=- read -r ctx dtype seed depths <<<"$s"
  seed=${seed#s}
  seed=${seed:-1}
  depths=${depths#d}
  depths=${depths:-10.30.50.70.90}
  echo "== $s: kvc bench recall --contexts $ctx --dtype $dtype --seed $seed ($(date -u +%H:%M:%S))"
  start=$(date +%s)
  "$KVC" bench recall --contexts "$ctx" --dtype "$dtype" --budget "$BUDGETS" --trials "$TRIALS" --seed "$seed" \
    --depths "${depths//./,}" \
    "${methods[@]}" "${protect[@]}" -t "$THREADS" --quiet --csv "$OUT/recall-$s.csv" >"$OUT/recall-$s.log" 2>&1 ||
    echo "   $s failed (see $OUT/recall-$s.log)"
  echo "   $s: $(( $(date +%s) - start )) s"
done
