#!/usr/bin/env bash
# The BalanceKV paper's Figure 1 protocol (`kvc fig1`): SmolLM2-135M teacher-forced over the
# GPL-3 text, n = 2048 tokens, layers 1, 2 and 5, query heads 0, 3 and 6, 20 seeds; the first
# and last 256 tokens exact, the middle 1536 compressed to 2^-T (T = 1..4) by offline
# BalanceKV and by a uniform sample of the same size; the last 256 queries scored against
# exact attention. With METHODS=all (or a list) every registered method that does not
# observe also compresses the middle as a stream at a budget of the kept tokens (the
# diagnosis of the streaming forms). Rows go to $OUT/fig1-L<l>.csv as they finish; the
# tables and the mean ratio at the end. About a minute on two cores (six with METHODS=all).
#   bench/fig1_report.sh [BUILD_DIR] [MODEL.gguf]
set -euo pipefail
build=${1:-build-release}
model=${2:-$HOME/.cache/kvcompress/SmolLM2-135M-Instruct.Q4_1.gguf}
kvc=$build/apps/kvc/kvc
out=${OUT:-out/fig1-report}
layers=${LAYERS:-"1 2 5"}
mkdir -p "$out"
if [ ! -f "$out/tr/L${layers##* }/q.npy" ]; then
  $kvc dump --model "$model" --text /usr/share/common-licenses/GPL-3 --steps 2048 --layers "${layers// /,}" \
    --out "$out/tr" >/dev/null
fi
for l in $layers; do
  echo "== layer $l"
  $kvc fig1 --trace "$out/tr/L$l" --seeds "${SEEDS:-20}" ${METHODS:+--methods "$METHODS"} --csv "$out/fig1-L$l.csv" |
    tail -n +2 | tee "$out/fig1-L$l.txt"
done
python3 - "$out" $layers <<'PY'
import sys
out, layers = sys.argv[1], sys.argv[2:]
ratios = []
for l in layers:
    for line in open(f"{out}/fig1-L{l}.txt").read().splitlines()[1:5]:
        ratios.append(float(line.split()[4]))
print(f"cells {len(ratios)}, mean ratio {sum(ratios)/len(ratios):.3f}, max {max(ratios):.3f}, "
      f"below 1: {sum(r < 1 for r in ratios)} of {len(ratios)}")
PY
