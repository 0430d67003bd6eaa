#!/usr/bin/env bash
# The injected-bug matrix (accel/cuda/README.md, the injected-bug matrix, re-created for the
# kernels of accel/cuda): the binaries cuda_matrix[_asan|_tsan] hold every
# injected bug (built with KVC_BUG_MATRIX=1, kernels/injected_bug.cuh); with
# the environment variable KVC_BUG=k each runs bug k on the matrix shapes
# (f16, 3 query heads, n = 4001, 4096 and 1001) in four configurations of the CPU SIMT runtime:
#   fwd      the default schedule, poison 0xFF (NaN)
#   rev7f    the reversed schedule, poison 0x7F (3.4e38: survives fmaxf)
#   asan     AddressSanitizer + UBSan, default schedule
#   tsan     ThreadSanitizer (each CUDA thread a fiber), default schedule
# A configuration catches a bug when the run fails: a result off the derived
# tolerance, a runtime error (divergent barrier or warp operation), or a
# sanitizer report. Bugs 1..7 and 9..14 (the batched decode's: a wrong
# tensor-core fragment index, a missing cp.async wait, a page-table
# off-by-one, a swizzle the reads disagree with, a wrong ldmatrix lane map,
# a merge that drops a split, a wrong int8 or int4 conversion constant; its
# matrix cases are f16, int8 and int4, d = 64, 4 entries of ragged lengths, one of them
# split in two items of two pages)
# must each be caught at least once, and so must 17 (the core's mirror
# carried to the pages with one edit of each stream's step dropped) and 18
# (the attention mass merged wrongly across an entry's splits): their case is
# H2O on int8 pages observing the device's mass, 2 sequences of 280 rows (5
# pages, split over items), a prompt in one call and decode steps past the
# budget; the clean kernels (0) and the control (8, a redundant barrier
# removed) never. TSan does not run rows 17 and 18 (n/a: see run() below).
# A real bug's row stops at its first catching configuration, in the order
# fwd, rev7f, asan, tsan (cheapest first; the others print "-"): what the test
# asserts is "caught at least once", and the TSan runs are most of the
# matrix's time (CI's hour). The clean and control rows run all four.
# KVC_BUG_MATRIX_FULL=1 runs every cell (the table of accel/cuda/README.md).
# usage: bug_matrix.sh BINDIR
set -u
full=${KVC_BUG_MATRIX_FULL:-0}
bin=${1:?usage: bug_matrix.sh BINDIR}
names=("none" "no barrier after the scores" "no barrier between a reduction's write and read"
       "value loop one row past the tile" "__syncthreads inside if (warp == 0)"
       "full-mask shuffle reached by 16 lanes" "tile max over the whole tile (unwritten smem)"
       "block counter += without atomicAdd" "a redundant barrier dropped (control)"
       "batch: mma A fragment registers 1 and 2 swapped" "batch: no cp.async wait before a page is read"
       "batch: page table read one entry late" "batch: f16 swizzle read with the wrong XOR (r & 3)"
       "batch: ldmatrix lane map with the tiles' roles swapped" "batch: merge drops an entry's last split"
       "batch: int8 -> f16 conversion subtracts 1024, not 1152 (sign flip forgotten)"
       "batch: int4 -> f16 conversion subtracts 1032, not 1024 (a symmetric int4's offset)"
       "mirror: a stream's in-place row rewrite not staged (one edit dropped)"
       "mass: an item's own maximum and sum taken for the entry's merged ones")
run() { # bug config -> prints pass|CAUGHT(why)
    local exe=$bin/cuda_matrix out rc
    case $2 in
    fwd) out=$(KVC_BUG=$1 SIMT_POISON=0xFF timeout 600 "$exe" matrix 2>&1); rc=$? ;;
    rev7f) out=$(KVC_BUG=$1 SIMT_SCHEDULE=reverse SIMT_POISON=0x7F timeout 600 "$exe" matrix 2>&1); rc=$? ;;
    asan) out=$(KVC_BUG=$1 ASAN_OPTIONS=detect_leaks=0 timeout 600 "${exe}_asan" matrix 2>&1); rc=$? ;;
    tsan)
        # 17 and 18 live in the mirror case, whose host side TSan adds nothing to and whose
        # kernels (put_rows, the mass launch) TSan still runs clean in row 0; at 3.7 min a
        # row under TSan they are left to fwd, rev and ASan (CI's hour)
        if [ "$1" -eq 17 ] || [ "$1" -eq 18 ]; then echo "n/a"; return; fi
        out=$(KVC_BUG=$1 TSAN_OPTIONS=halt_on_error=1 timeout 900 "${exe}_tsan" matrix 2>&1); rc=$? ;;
    esac
    if [ $rc -eq 0 ]; then echo pass; return; fi
    local why="exit $rc"
    if grep -q "ThreadSanitizer: data race" <<<"$out"; then why="race"
    elif grep -q "AddressSanitizer: [a-z-]*" <<<"$out"; then why=$(grep -o "AddressSanitizer: [a-z-]*" <<<"$out" | head -1 | cut -d' ' -f2)
    elif grep -q "simt: error:" <<<"$out"; then why=$(grep -o "simt: error: [^(]*" <<<"$out" | head -1 | cut -c14-60)
    elif grep -q "^FAIL" <<<"$out"; then why="wrong ($(grep -c '^FAIL' <<<"$out") checks)"
    elif [ $rc -eq 124 ]; then why="timeout"
    fi
    echo "CAUGHT($why)"
}
printf "| # | injected bug | fwd | rev + poison 0x7F | ASan | TSan |\n|---|---|---|---|---|---|\n"
bad=0
for k in $(seq 0 18); do
    row="| $k | ${names[$k]} |"
    caught=0
    for c in fwd rev7f asan tsan; do
        if [ "$caught" -gt 0 ] && [ "$full" != 1 ] && [ $k -ne 0 ] && [ $k -ne 8 ]; then
            row="$row - |"
            continue
        fi
        v=$(run $k $c)
        [[ $v == CAUGHT* ]] && caught=$((caught + 1))
        row="$row $v |"
    done
    echo "$row"
    if [ $k -eq 0 ] || [ $k -eq 8 ]; then
        [ $caught -eq 0 ] || { echo "  -> the clean kernels failed in $caught configuration(s): a false alarm"; bad=1; }
    else
        [ $caught -ge 1 ] || { echo "  -> bug $k was caught by no configuration"; bad=1; }
    fi
done
if [ $bad -ne 0 ]; then echo "bug matrix: FAILED"; exit 1; fi
echo "bug matrix: every injected bug caught at least once, the clean and control kernels never"
