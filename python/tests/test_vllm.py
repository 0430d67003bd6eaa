"""kvcompress's vLLM plugin in vLLM's real engine (issue 53; docs/vllm.md).
Runs in the vLLM venv (python/vllm/setup-env.sh) with KVC_VLLM_MODEL naming
SmolLM2 converted by python/vllm/convert_gguf.py; skips with a message
elsewhere. Each engine runs in a process of its own (bench/vllm_race.py's
worker), four in all, about 30 s each here: stock, the plugin's exact int8
setting, and its recommended configuration at 25% and 12.5% of f16 bytes.
Every engine answers the same 5 passkey prompts of 2,048 tokens (the race's:
keys from generators seeded by (1, 2048, trial), printed) and 64 greedy
tokens of two short prompts. Greedy decoding: the outcomes are deterministic
for a given build, so the recall checks have no false-alarm rate of their
own; their bounds are the issue's goals on Wilson's 95% interval."""
import importlib.util
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

RACE_PATH = pathlib.Path(__file__).resolve().parents[2] / "bench" / "vllm_race.py"
_spec = importlib.util.spec_from_file_location("vllm_race", RACE_PATH)
race = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(race)

POOL = 1 << 30  # 1 GiB of KV memory
CONTEXT, TRIALS, MAX_LEN = 2048, 5, 2048 + 128
SHORT = ["The capital of France is", "The passkey is 31415. Remember it. What is the passkey? The passkey is"]


def pool_tokens(bytes_per_token_and_head, block):
    """vLLM's pool: whole blocks of every layer's pages in the KV memory."""
    return POOL // (race.LAYERS * block * race.KV_HEADS * bytes_per_token_and_head) * block


def engine(plugin, env):
    from transformers import AutoTokenizer

    prompts = race.passkey_prompts(AutoTokenizer.from_pretrained(MODEL), CONTEXT, TRIALS)
    print("keys", [p["key"] for p in prompts], "depths", [p["depth"] for p in prompts])
    job = dict(part="recall", model=MODEL, plugin=plugin, max_len=MAX_LEN, kv_bytes=POOL, prompts=prompts,
               greedy=SHORT)
    e = dict(os.environ, **{k: str(v) for k, v in env.items()})
    out = subprocess.run([sys.executable, str(RACE_PATH), "--worker", json.dumps(job)], env=e, capture_output=True,
                         text=True, timeout=900)
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    assert out.returncode == 0 and lines, out.stderr[-3000:]
    got = {"correct": [r["correct"] for r in lines if r["kind"] == "recall"]}
    for r in lines:
        got.update({k: v for k, v in r.items() if k not in ("kind", "trial", "key", "depth", "correct", "answer")})
    print(json.dumps({k: v for k, v in got.items() if k != "tokens"}))
    return got


@pytest.fixture(scope="module")
def stock():
    return engine(False, {})


@pytest.fixture(scope="module")
def exact():
    return engine(True, {"KVCOMPRESS_VLLM_DTYPE": "int8"})


def configured(pct):
    env = race.recommended(CONTEXT, pct)
    kept = env.pop("kept_blocks")
    return engine(True, env), kept


@pytest.fixture(scope="module")
def at25():
    return configured(25.0)


@pytest.fixture(scope="module")
def at12():
    return configured(12.5)


def test_pools_hold_the_true_bytes_and_exact_int8_keeps_stock_tokens(stock, exact):
    assert stock["pool_tokens"] == pool_tokens(2 * race.D * 4, race.STOCK_BLOCK)  # f32 keys and values
    # int8 rows: d codes and an f32 scale each, key and value
    assert exact["pool_tokens"] == pool_tokens(race.INT8_BYTES, race.BLOCK)
    assert exact["tokens"] == stock["tokens"]  # 64 greedy tokens of both prompts


def test_recall_at_a_quarter_and_an_eighth_of_f16_bytes(stock, at25, at12):
    """Through the engine, the recommended configuration recalls the passkey
    as stock exact does within Wilson's 95% interval of stock's count at 25%
    of f16 bytes, and at least 90% of stock's count at 12.5%."""
    k = sum(stock["correct"])
    lo, _ = race.wilson(k, TRIALS)
    assert k >= 4, f"stock itself recalls {k} of {TRIALS}: the prompts or the model are not what the race ran"
    assert sum(at25[0]["correct"]) >= lo * TRIALS, (at25[0]["correct"], stock["correct"])
    assert sum(at12[0]["correct"]) >= 0.9 * k, (at12[0]["correct"], stock["correct"])


def test_eviction_frees_blocks_and_admission_counts_what_is_kept(exact, at25):
    """The manager freed blocks, and vLLM's admission divides the same pool
    by a request's peak: the blocks it keeps plus one prefill chunk, against
    the whole length for the exact setting."""
    got, kept = at25
    assert got["freed_blocks"] > 0
    full = -(-MAX_LEN // race.BLOCK)
    peak = kept + -(-race.CHUNK // race.BLOCK)
    assert abs(got["max_concurrency"] / exact["max_concurrency"] - full / peak) < 1e-3 * full / peak
