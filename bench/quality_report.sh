#!/usr/bin/env bash
# Quality at equal bytes on SmolLM2-135M (README "Long context at equal bytes"):
# every step is one `kvc bench` run under 20 minutes on 2 cores, writing its
# CSV and log to OUT (default ./quality) as it goes, so a stopped series keeps
# what it finished. Budgets are percent of the bytes of an f16 exact cache
# (--bytes); the reference column is exact f32. Steps: ppl-int4-25 ppl-int4-10-50
# ppl-f16 recall-int4-25 recall-f16-25 (or name some: bench/quality_report.sh ppl-f16).
#   KVC=path/to/kvc  (default build-release/apps/kvc/kvc)
set -euo pipefail
cd "$(dirname "$0")/.."
KVC=${KVC:-build-release/apps/kvc/kvc}
OUT=${OUT:-quality}
mkdir -p "$OUT"
seeded="sink-window,uniform,knorm,subgen,balancekv,express"
run() { # name, then kvc bench arguments
  local name=$1; shift
  echo "== $name: kvc bench $* ($(date -u +%H:%M:%S))"
  "$KVC" bench "$@" --quiet --csv "$OUT/$name.csv" >"$OUT/$name.log" 2>&1 || echo "   $name failed (see $OUT/$name.log)"
  tail -n 12 "$OUT/$name.log"
}
steps=${*:-ppl-int4-25 ppl-int4-10-50 ppl-f16 recall-int4-25 recall-f16-25}
for s in $steps; do
  case $s in
  ppl-int4-25)    run $s ppl --bytes --dtype int4 --budgets 25 --methods $seeded ;;
  ppl-int4-10-50) run $s ppl --bytes --dtype int4 --budgets 10,50 --methods exact,$seeded ;;
  ppl-f16)        run $s ppl --bytes --dtype f16 --budgets 10,25,50 --methods sink-window,uniform,knorm,subgen,balancekv ;;
  recall-int4-25) run $s recall --bytes --dtype int4 --budgets 25 --methods $seeded ;;
  recall-f16-25)  run $s recall --bytes --dtype f16 --budgets 25 --methods $seeded ;;
  *) echo "unknown step $s"; exit 2 ;;
  esac
done
