#!/usr/bin/env bash
# Mean relative error of every registered method with f32, f16 and int8
# storage, and its arena bytes, on SmolLM2-135M traces (GPL-3 text teacher-
# forced, n tokens, the given layers, every kv-head, seed 1, budget 10% of n).
# Methods come from `kvc methods` (the library's registry): nothing is listed
# here by hand. Rows are appended to $out/dtype.csv as they finish.
#   bench/dtype_report.sh [BUILD_DIR] [MODEL.gguf]      (N=4096 LAYERS="1 15" by default)
set -euo pipefail
build=${1:-build-release}
model=${2:-$HOME/.cache/kvcompress/SmolLM2-135M-Instruct.Q4_1.gguf}
kvc=$build/apps/kvc/kvc
n=${N:-4096}
layers=${LAYERS:-"1 15"}
out=${OUT:-out/dtype-report}
budget=$((n / 10))
mkdir -p "$out"
if [ ! -f "$out/tr/L${layers##* }/q.npy" ]; then
  $kvc dump --model "$model" --text /usr/share/common-licenses/GPL-3 --steps "$n" --layers "${layers// /,}" \
    --out "$out/tr" >/dev/null
fi
heads=$(python3 -c "import numpy as np; print(np.load('$out/tr/L${layers%% *}/k.npy', mmap_mode='r').shape[0])")
csv=$out/dtype.csv
echo "method,dtype,layer,head,mean_rel_error,arena_bytes" >"$csv"
methods=$($kvc methods | grep -v '^#' | awk '{print $1}')
for m in $methods; do for dt in f32 f16 int8; do for l in $layers; do for ((h = 0; h < heads; h++)); do
  line=$($kvc eval --trace "$out/tr/L$l" --head "$h" --method "$m" --budget "$budget" --dtype "$dt" \
    --reference f64 2>&1 | tail -n 1 || true)
  case "$line" in
  mean_rel_error=*)
    e=$(echo "$line" | sed 's/mean_rel_error=\([^ ]*\).*/\1/')
    a=$(echo "$line" | sed 's/.*arena_bytes=\([0-9]*\).*/\1/')
    echo "$m,$dt,$l,$h,$e,$a" >>"$csv" ;;
  *) echo "$m,$dt,$l,$h,refused: $line,0" >>"$csv" ;;
  esac
done; done; done; done
render() {
python3 - "$csv" "$n" "$budget" "$layers" "$out/tr/L${layers%% *}" <<'PY'
import csv, sys, collections
import numpy as np
rows = list(csv.DictReader(open(sys.argv[1])))
n, budget, layers = int(sys.argv[2]), sys.argv[3], sys.argv[4]
k = np.load(sys.argv[5] + '/k.npy', mmap_mode='r'); v = np.load(sys.argv[5] + '/v.npy', mmap_mode='r')
d, dv = k.shape[-1], v.shape[-1]
err = collections.defaultdict(list); arena = {}; refused = {}
for r in rows:
    key = (r['method'], r['dtype'])
    try:
        err[key].append(float(r['mean_rel_error'])); arena[key] = int(r['arena_bytes'])
    except ValueError:
        refused[key] = r['mean_rel_error'].split(':', 2)[-1].strip()
print(f"SmolLM2-135M, GPL-3 text, n={n}, layers {layers}, every kv-head, seed 1, budget {budget} tokens "
      f"(10%): mean over (layer, head) of the mean relative error, and the arena bytes of one stream. "
      f"An exact cache of the {n} tokens is {n*(d+dv)*2} B in f16 (llama.cpp) and {n*(d+dv)*4} B in f32.")
print("| method | f32 | f16 | int8 | arena f32 | arena f16 | arena int8 | int8 arena / exact f16 |")
print("|---|---|---|---|---|---|---|---|")
for m in dict.fromkeys(r['method'] for r in rows):
    if all((m, t) in refused for t in ('f32', 'f16', 'int8')):
        print(f"| {m} | refused: {refused[(m, 'f32')][:70]} |||||||"); continue
    e = [sum(err[(m, t)]) / len(err[(m, t)]) for t in ('f32', 'f16', 'int8')]
    a = [arena[(m, t)] for t in ('f32', 'f16', 'int8')]
    print(f"| {m} | " + " | ".join(f"{x:.4g}" for x in e) + " | " + " | ".join(str(x) for x in a) +
          f" | {a[2] / (n * (d + dv) * 2):.3f} |")
PY
}
render
