#!/bin/sh
# check_format.sh REPO_ROOT: every C, CUDA and header file git tracks is
# already formatted by the repository's .clang-format (clang-format
# --dry-run --Werror). Exit 77 (skip) without clang-format or git.
set -eu
root=$1
cd "$root"
command -v clang-format >/dev/null || { echo "clang-format not installed: skipped"; exit 77; }
git rev-parse --git-dir >/dev/null 2>&1 || { echo "not a git checkout: skipped"; exit 77; }
files=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cpp')
n=$(echo "$files" | wc -l)
if ! echo "$files" | xargs clang-format --dry-run --Werror 2>/tmp/kvc-format.$$; then
  grep -E '^[^ ].*: (error|warning)' /tmp/kvc-format.$$ | cut -d: -f1 | sort | uniq -c | head -n 40
  rm -f /tmp/kvc-format.$$
  echo "clang-format would change the files above (clang-format -i FILE; .clang-format is the style)"
  exit 1
fi
rm -f /tmp/kvc-format.$$
echo "$n files already formatted ($(clang-format --version))"
