"""kvcompress's vLLM plugin in vLLM's real engine (issue 53; docs/vllm.md).
Runs in the vLLM venv (python/vllm/setup-env.sh) with KVC_VLLM_MODEL naming
SmolLM2 converted by python/vllm/convert_gguf.py; skips with a message
elsewhere. One engine per process (python/vllm/check_plugin.py): about a
minute each here."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed (python/vllm/setup-env.sh makes its venv)")
MODEL = os.environ.get("KVC_VLLM_MODEL", "")
if not (MODEL and (pathlib.Path(MODEL) / "model.safetensors").exists()):
    pytest.skip("KVC_VLLM_MODEL does not name a converted model (python/vllm/convert_gguf.py)",
                allow_module_level=True)

CHECK = pathlib.Path(__file__).resolve().parents[1] / "vllm" / "check_plugin.py"
POOL = 1 << 30  # VLLM_CPU_KVCACHE_SPACE=1 GiB
LAYERS, KV_HEADS, D, BLOCK = 30, 3, 64, 128  # SmolLM2-135M; vLLM's CPU block
LONG = ("The passkey is 31415. Remember it. " + "The grass is green. The sky is blue. The sun is yellow. " * 40 +
        "What is the passkey? The passkey is")


def run(mode, *prompts, **env):
    e = dict(os.environ, VLLM_CPU_KVCACHE_SPACE="1", **{k: str(v) for k, v in env.items()})
    out = subprocess.run([sys.executable, str(CHECK), MODEL, mode, *prompts], env=e, capture_output=True,
                         text=True, timeout=900)
    lines = [x for x in out.stdout.splitlines() if x.startswith("{")]
    assert out.returncode == 0 and lines, out.stderr[-2000:]
    return json.loads(lines[-1])


def pool_tokens(bytes_per_token_and_head):
    """vLLM's pool: whole blocks of every layer's pages in the KV memory."""
    return POOL // (LAYERS * BLOCK * KV_HEADS * bytes_per_token_and_head) * BLOCK


def test_int8_rows_fill_the_pool_with_their_true_bytes_and_keep_stock_tokens():
    stock = run("stock")
    plugin = run("plugin", KVCOMPRESS_VLLM_DTYPE="int8")
    assert stock["pool_tokens"] == pool_tokens(2 * D * 4)  # f32 keys and values
    assert plugin["pool_tokens"] == pool_tokens(2 * (D + 4))  # int8 rows: d codes and an f32 scale each
    assert plugin["tokens"] == stock["tokens"]  # 64 greedy tokens of both prompts


def test_sink_window_frees_blocks_admits_more_and_keeps_the_passkey():
    exact = run("plugin", KVCOMPRESS_VLLM_DTYPE="int8", KVCOMPRESS_CHECK_CHUNK=256)
    sw = run("plugin", LONG, KVCOMPRESS_VLLM_DTYPE="int8", KVCOMPRESS_VLLM_METHOD="sink-window",
             KVCOMPRESS_VLLM_SINK=4, KVCOMPRESS_VLLM_WINDOW=64, KVCOMPRESS_CHECK_CHUNK=256)
    assert sw["freed_blocks"] > 0
    # a 2,048-token request: 16 blocks in full; sink-window keeps 1 + 1 + 1 and one chunk of 2
    assert abs(sw["max_concurrency_2048"] / exact["max_concurrency_2048"] - 16 / 5) < 0.01
    assert sw["texts"][2].startswith(" 31415")
