"""vLLM's engine with and without kvcompress's plugin, in the vLLM venv
(python/vllm/setup-env.sh): the pool each sizes in the same KV memory, and
the greedy text of the same prompts (issue 53; docs/vllm.md).

    KVCOMPRESS_VLLM_DTYPE=int8 python check_plugin.py MODEL_DIR stock|plugin [PROMPT ...]

Prints one JSON line: mode, dtype, the pool's tokens, the texts. One engine
per process (vLLM's engine does not come apart cleanly in one process); the
caller compares the two runs.
"""
import json
import os
import sys
import time


def main() -> None:
    model, mode = sys.argv[1], sys.argv[2]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the scheduler in this process: its managers' counts
    if mode == "plugin":
        os.environ["KVCOMPRESS_VLLM"] = "1"
    else:
        os.environ["VLLM_PLUGINS"] = "none"
        os.environ.pop("KVCOMPRESS_VLLM", None)
    from vllm import LLM, SamplingParams

    t0 = time.time()
    chunk = int(os.environ.get("KVCOMPRESS_CHECK_CHUNK", "0"))  # max_num_batched_tokens; 0: vLLM's default
    llm = LLM(model=model, dtype="float32", max_model_len=2048, enforce_eager=True, seed=0,
              enable_prefix_caching=False, **({"max_num_batched_tokens": chunk} if chunk else {}))
    started = time.time() - t0
    blocks = llm.llm_engine.vllm_config.cache_config.num_gpu_blocks
    block_size = llm.llm_engine.vllm_config.cache_config.block_size
    prompts = ["The capital of France is", "The passkey is 31415. Remember it. What is the passkey? The passkey is"]
    prompts += sys.argv[3:]
    batch = int(os.environ.get("KVCOMPRESS_CHECK_BATCH", "0"))  # that many requests, the prompts repeated
    if batch:
        prompts = [prompts[i % len(prompts)] for i in range(batch)]
    t0 = time.time()
    out = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=64, ignore_eos=True))
    freed = 0
    if mode == "plugin" and os.environ.get("KVCOMPRESS_VLLM_METHOD") == "sink-window":
        from kvcompress.vllm_backend import SinkWindowManager
        freed = SinkWindowManager.freed_blocks
    concurrency = llm.llm_engine.vllm_config.cache_config.kv_cache_max_concurrency
    print(json.dumps({"method": os.environ.get("KVCOMPRESS_VLLM_METHOD", "exact"), "freed_blocks": freed,
                      "max_concurrency_2048": round(concurrency, 2), "mode": mode, "dtype": os.environ.get("KVCOMPRESS_VLLM_DTYPE", "int8") if mode == "plugin"
                      else "f32", "pool_tokens": blocks * block_size, "start_s": round(started, 1),
                      "generate_s": round(time.time() - t0, 2), "texts": [o.outputs[0].text for o in out],
                      "tokens": [list(o.outputs[0].token_ids) for o in out]}), flush=True)


if __name__ == "__main__":
    main()
