#!/usr/bin/env bash
# Runs libFuzzer targets for SECONDS each on copies of their seed corpora
# (tests/fuzz/corpus/<target>; libFuzzer adds the inputs it finds to the copy),
# JOBS targets at a time, and fails if any target finds a crash, a leak or a
# sanitizer report; that target's log tail is printed.
# usage: run_fuzzers.sh BINDIR SECONDS JOBS TARGET...
set -euo pipefail
bindir=${1:?usage: run_fuzzers.sh BINDIR SECONDS JOBS TARGET...}
seconds=${2:?}
jobs=${3:?}
shift 3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fuzz_one() { # target -> exit status of its run, log in $work/<target>.log
    local target=$1 corpus=$work/$1
    mkdir -p "$corpus"
    cp "$here/corpus/$target"/* "$corpus"/
    "$bindir/fuzz_$target" -max_total_time="$seconds" -print_final_stats=1 "$corpus" >"$work/$target.log" 2>&1
}
pids=() names=() failed=0
wait_one() { # waits for the oldest run still going and reports it
    local rc=0
    wait "${pids[0]}" || rc=$?
    local target=${names[0]}
    pids=("${pids[@]:1}") names=("${names[@]:1}")
    echo "fuzz_$target: $(grep -E 'stat::number_of_executed_units' "$work/$target.log" | tr -s ' ' || true)"
    grep -E 'ERROR|SUMMARY' "$work/$target.log" || true
    if [ "$rc" -ne 0 ]; then tail -n 40 "$work/$target.log"; echo "fuzz_$target failed (exit $rc)"; failed=1; fi
}
for target in "$@"; do
    [ "${#pids[@]}" -lt "$jobs" ] || wait_one
    echo "fuzzing $target for $seconds s"
    fuzz_one "$target" &
    pids+=($!) names+=("$target")
done
while [ "${#pids[@]}" -gt 0 ]; do wait_one; done
exit $failed
