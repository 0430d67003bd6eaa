#!/usr/bin/env bash
# Every storage type's added error against the MPFR oracle, per method, on
# the traces of one model: `kvc eval --reference mpfr` for each registered
# method (`kvc methods`) x each implemented storage type (the same listing)
# x each (layer, kv head) of the traces; the table gives the mean over the
# runs and what each type adds to f32. Nothing is listed here by hand.
# Rows are appended to $OUT/dtype_oracle.csv as they finish and a rerun skips
# the rows already there, so a stopped run resumes.
#   bench/dtype_oracle_report.sh BUILD_DIR TRACE_ROOT "LAYERS" BUDGET SINK WINDOW
# TRACE_ROOT/L<l>/{q,k,v}.npy as written by `kvc dump`; JOBS=2 runs in parallel.
set -euo pipefail
build=$1 root=$2 layers=$3 budget=$4 sink=$5 window=$6
kvc=$build/apps/kvc/kvc
out=${OUT:-$root/..}
jobs=${JOBS:-2}
csv=$out/dtype_oracle.csv
[ -f "$csv" ] || echo "method,dtype,layer,head,mean_rel_error" >"$csv"
first=${layers%% *}
heads=$(python3 -c "import numpy as np; print(np.load('$root/L$first/k.npy', mmap_mode='r').shape[0])")
methods=$($kvc methods | grep -v '^#' | awk '{print $1}')
dtypes=$($kvc methods | sed -n 's/^# storage types (--dtype)://p')
list=$(mktemp)
for m in $methods; do for dt in $dtypes; do for l in $layers; do for ((h = 0; h < heads; h++)); do
  grep -q "^$m,$dt,$l,$h,[0-9]" "$csv" || echo "$m $dt $l $h" >>"$list"
done; done; done; done
echo "$(wc -l <"$list") runs to do, $jobs at a time" >&2
export kvc root budget sink window csv
# exact keeps every token: its budget is the trace length
xargs -P "$jobs" -L 1 bash -c '
  m=$0 dt=$1 l=$2 h=$3
  b=$budget
  [ "$m" = exact ] && b=$(python3 -c "import numpy as np; print(np.load(\"$root/L$l/k.npy\", mmap_mode=\"r\").shape[1])")
  line=$($kvc eval --trace "$root/L$l" --head "$h" --method "$m" --budget "$b" --sink "$sink" --window "$window" \
    --dtype "$dt" --reference mpfr 2>&1 | tail -n 1 || true)
  case "$line" in
  mean_rel_error=*) e=${line#mean_rel_error=}; e=${e%% *} ;;
  *) e="NA" ;;
  esac
  echo "$m,$dt,$l,$h,$e" >>"$csv"' <"$list"
rm -f "$list"
python3 - "$csv" "$dtypes" <<'PY'
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1])))
types = sys.argv[2].split()
err = collections.defaultdict(list)
for r in rows:
    if r['mean_rel_error'] != 'NA': err[(r['method'], r['dtype'])].append(float(r['mean_rel_error']))
mean = {k: sum(v) / len(v) for k, v in err.items()}
runs = {k: len(v) for k, v in err.items()}
print("| method | " + " | ".join(types) + " | " + " | ".join(f"added by {t}" for t in types if t != 'f32') + " | runs |")
print("|---" * (2 * len(types) + 1) + "|")
for m in dict.fromkeys(r['method'] for r in rows):
    cells = [f"{mean[(m, t)]:.4g}" if (m, t) in mean else "n/a" for t in types]
    added = [f"{mean[(m, t)] - mean[(m, 'f32')]:+.3g}" if (m, t) in mean and (m, 'f32') in mean else "n/a"
             for t in types if t != 'f32']
    print(f"| {m} | " + " | ".join(cells) + " | " + " | ".join(added) + f" | {min(runs.get((m, t), 0) for t in types)} |")
PY
