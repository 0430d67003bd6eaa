#!/bin/sh
# planted-bug.sh -- the proof gate must catch an off-by-one.
#
#   usage: planted-bug.sh WP_CHECK NAME SRC WORKDIR SED_EXPR GOAL [frama-c args...]
#
# Copies SRC to WORKDIR twice, the second copy with one change made by the
# sed expression SED_EXPR (an index one too far), runs the proof job on both
# and passes only if the unchanged copy proves and the planted one FAILS on
# the goal GOAL (a precondition that keeps the access inside its rows). A
# gate that stayed green here could not be trusted to catch anything; the
# clean run first shows that the red result is the plant's doing and not a
# broken setup. The planted bugs (verify/CMakeLists.txt):
#   planted_bug         exact's update stores the key row at count + 1;
#   planted_bug_stream  the window ring wraps a slot only past W, not at W.
set -u
if [ $# -lt 6 ]; then
    echo "usage: $0 WP_CHECK NAME SRC WORKDIR SED_EXPR GOAL [frama-c args...]" >&2
    exit 2
fi
check=$1 name=$2 src=$3 work=$4 plant=$5 goal=$6
shift 6
mkdir -p "$work"
base=$(basename "$src" .c)
cp "$src" "$work/${base}_clean.c"
sed "$plant" "$src" >"$work/${base}_planted.c"
if cmp -s "$src" "$work/${base}_planted.c"; then
    echo "FAIL $name: the code to plant the bug in ($plant) was not found in $src"
    exit 1
fi
if ! "$check" "${name}_clean" "$@" "$work/${base}_clean.c"; then
    echo "FAIL $name: the unchanged copy does not prove; nothing to compare"
    exit 1
fi
out=$("$check" "$name" "$@" "$work/${base}_planted.c")
echo "$out"
case $out in
FAIL*) ;;
*) echo "FAIL $name: the job stayed green with the off-by-one"; exit 1 ;;
esac
if printf '%s\n' "$out" | grep -q "$goal"; then
    echo "PASS $name: the off-by-one fails $goal"
    exit 0
fi
echo "FAIL $name: the job failed, but not on $goal"
exit 1
