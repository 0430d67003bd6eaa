#!/usr/bin/env bash
# The error each storage type alone adds (`kvc floor`: every token held, no
# method dropping any) on SmolLM2-135M traces, GPL-3 text teacher-forced, n
# tokens, the given layers, every query head; rows appended to
# $OUT/floor.csv as they finish, then the mean per type.
#   bench/floor_report.sh [BUILD_DIR] [MODEL.gguf]     (N=2048 LAYERS="1 15" by default)
set -euo pipefail
build=${1:-build-release}
model=${2:-$HOME/.cache/kvcompress/SmolLM2-135M-Instruct.Q4_1.gguf}
kvc=$build/apps/kvc/kvc
n=${N:-2048}
layers=${LAYERS:-"1 15"}
out=${OUT:-out/floor-report}
mkdir -p "$out"
if [ ! -f "$out/tr/L${layers##* }/q.npy" ]; then
  $kvc dump --model "$model" --text /usr/share/common-licenses/GPL-3 --steps "$n" --layers "${layers// /,}" \
    --out "$out/tr" >/dev/null
fi
heads=$(python3 -c "import numpy as np; print(np.load('$out/tr/L${layers%% *}/q.npy', mmap_mode='r').shape[0])")
csv=$out/floor.csv
echo "layer,head,dtype,mean_rel_error,bytes_per_f16" >"$csv"
for l in $layers; do for ((h = 0; h < heads; h++)); do
  $kvc floor --trace "$out/tr/L$l" --head "$h" | awk -v l="$l" -v h="$h" 'NR > 2 { print l "," h "," $1 "," $2 "," $3 }' >>"$csv"
done; done
python3 - "$csv" <<'PY'
import csv, sys, math, collections
rows = list(csv.DictReader(open(sys.argv[1])))
by = collections.defaultdict(list)
for r in rows: by[r["dtype"]].append(float(r["mean_rel_error"]))
size = {r["dtype"]: r["bytes_per_f16"] for r in rows}
print(f"{'dtype':6} {'cells':>5} {'mean':>10} {'min':>10} {'max':>10} {'bytes/f16':>9}")
for t, v in by.items():
    print(f"{t:6} {len(v):5d} {sum(v)/len(v):10.4g} {min(v):10.4g} {max(v):10.4g} {size[t]:>9}")
PY
