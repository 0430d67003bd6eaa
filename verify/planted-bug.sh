#!/bin/sh
# planted-bug.sh -- the proof gate must catch an off-by-one.
#
#   usage: planted-bug.sh WP_CHECK EXACT_C WORKDIR [frama-c args...]
#
# Copies core/src/methods/exact.c to WORKDIR with one change, the key row of
# an update stored one slot too far (count + 1: past the end when the method
# is one token from full), runs the proof job on the copy and passes only if
# the job FAILS on a precondition of that store (the row must lie inside the
# method's rows). A gate that stayed green here could not be trusted to catch
# anything. The job also runs on the unchanged copy first, which must pass,
# so the red result is the plant's doing and not a broken setup.
set -u
check=$1 src=$2 work=$3
shift 3
mkdir -p "$work"
cp "$src" "$work/exact_clean.c"
sed 's/kvc_row_store(K, s->count, k);/kvc_row_store(K, s->count + 1u, k);/' "$src" >"$work/exact_planted.c"
if cmp -s "$src" "$work/exact_planted.c"; then
    echo "FAIL planted_bug: the store to plant the bug in was not found in $src"
    exit 1
fi
if ! "$check" planted_clean "$@" "$work/exact_clean.c"; then
    echo "FAIL planted_bug: the unchanged copy does not prove; nothing to compare"
    exit 1
fi
out=$("$check" planted_bug "$@" "$work/exact_planted.c")
echo "$out"
case $out in
FAIL*) ;;
*) echo "FAIL planted_bug: the job stayed green with the off-by-one"; exit 1 ;;
esac
if printf '%s\n' "$out" | grep -q 'exact_update_st_call_kvc_row_store_requires'; then
    echo "PASS planted_bug: the off-by-one fails the row store's precondition in exact_update_st"
    exit 0
fi
echo "FAIL planted_bug: the job failed, but not on the planted store"
exit 1
