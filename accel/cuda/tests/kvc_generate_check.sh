#!/usr/bin/env bash
# The CUDA path end to end: `kvc generate` on the stories260K decoder with the
# cache manager on the "cuda" kernel table (KVC_KERNELS=cuda; here on the CPU
# SIMT runtime) must write the same greedy text as on the reference table,
# for H2O (whose evictions follow the attention mass the GPU kernel returns)
# in f32 and f16 storage. Exit 77 without the model.
# usage: kvc_generate_check.sh KVC MODEL_DIR
set -u
kvc=${1:?usage: kvc_generate_check.sh KVC MODEL_DIR}
dir=${2:?usage: kvc_generate_check.sh KVC MODEL_DIR}
[ -f "$dir/stories260K.bin" ] && [ -f "$dir/tok512.bin" ] || { echo "no stories260K in $dir: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for dtype in f32 f16 int8; do
    args=(generate --model "$dir/stories260K.bin" --tokenizer "$dir/tok512.bin" --method h2o --budget 32 --sink 4
          --window 8 --steps 64 --temp 0 --prompt "Once upon a time" --dtype "$dtype" --threads 2)
    # stdout: the text and the summary line; stderr apart (a sanitizer's notes)
    KVC_KERNELS=cuda "$kvc" "${args[@]}" >"$tmp/cuda.txt" 2>"$tmp/cuda.err" ||
        { echo "$dtype: kvc failed on the cuda table"; cat "$tmp/cuda.txt" "$tmp/cuda.err"; exit 1; }
    KVC_KERNELS=ref "$kvc" "${args[@]}" >"$tmp/ref.txt" 2>"$tmp/ref.err" ||
        { echo "$dtype: kvc failed on the ref table"; cat "$tmp/ref.err"; exit 1; }
    grep -q "kernels cuda" "$tmp/cuda.txt" "$tmp/cuda.err" || { echo "$dtype: the run did not use the cuda table"; fail=1; }
    # the text is everything but the summary line
    if diff <(grep -v "tokens in .* s:" "$tmp/cuda.txt") <(grep -v "tokens in .* s:" "$tmp/ref.txt") >/dev/null; then
        echo "$dtype: same 64-token greedy text on the cuda and ref tables ($(cat "$tmp/cuda.txt" "$tmp/cuda.err" | grep -o 'tokens in [0-9.]* s') on cuda)"
    else
        echo "$dtype: the texts differ"; diff "$tmp/cuda.txt" "$tmp/ref.txt" | head -20; fail=1
    fi
done
exit $fail
