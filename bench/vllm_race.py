#!/usr/bin/env python3
"""vLLM stock against vLLM with kvcompress's plugin at the same KV memory
(issue 53; docs/vllm.md has the table). Runs in the vLLM venv
(python/vllm/setup-env.sh) on SmolLM2 converted by python/vllm/convert_gguf.py.

    python bench/vllm_race.py MODEL_DIR --csv OUT.csv [--parts pool,recall,admission,speed]
        [--contexts 1024,2048,4096] [--trials 5] [--budgets 25,12.5] [--seed 1]

Parts (each engine in a process of its own, `--worker`; rows are appended to
the CSV as they finish, and a rerun skips the engines whose rows are there):

- pool: the tokens each engine's pool holds in 1 GiB of KV memory (stock f32,
  stock bf16, plugin f16 / int8 / int4 rows).
- recall: the project's passkey prompts (apps/kvc/passkey.c, as
  bench/kvpress_race.py builds them: instruction, filler, the needle at depth
  (t + 0.5) / trials, key from a generator seeded by (seed, context, trial)),
  then " What is the pass key?\\nThe pass key is", 8 greedy tokens; correct
  when the 5-digit key is in them. Stock (f32, every token) against the
  plugin's recommended configuration (int8 rows, sink-window with protected
  blocks) at a share of the f16 bytes of the prompt: the blocks a request
  keeps between steps (sink, protected, window and the block the window
  straddles) hold at most that share of what f16 rows of the whole prompt
  would; one sink block, a quarter of them protected. The plugin's blocks are
  16 tokens (its attention takes any multiple of 16), stock's 32 (vLLM's CPU
  kernel wants multiples of 32). Prefill in chunks of 256 tokens.
  plugin-noprotect gives the smallest budget's blocks to sinks and window
  alone (what protection buys).
- admission: N requests of the longest context at once, in a pool sized for
  4 of them in f16 (stock bf16) or for as many as fit in the same bytes
  (plugin, the 25% configuration): the most requests running together, and
  preemptions.
- speed: 64 greedy tokens for each of 1 and 16 requests, tokens/s (the median
  of three runs), stock f32 against the plugin's int8 rows at the exact
  setting.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kvpress_race import FILL, build_context  # noqa: E402  (the same prompts)
from resumable_csv import ResumableCsv  # noqa: E402

QUESTION = " What is the pass key?"
ANSWER_PREFIX = "\nThe pass key is"
D, KV_HEADS, LAYERS = 64, 3, 30  # SmolLM2-135M
BLOCK, STOCK_BLOCK, CHUNK = 16, 32, 256  # the plugin's blocks; stock's (vLLM's CPU kernel: multiples of 32)
SINK = BLOCK
F16_BYTES = 2 * 2 * D  # a token's key and value of one kv head in f16
INT8_BYTES = 2 * (D + 4)  # kvc int8 rows: d codes and an f32 scale each


def passkey_prompts(tok, context: int, trials: int, seed: int = 1) -> list[dict]:
    """The recall part's prompts of one context: key from a generator seeded
    by (seed, context, trial), needle depth (t + 0.5) / trials."""
    prompts = []
    for t in range(trials):
        key = f"{random.Random(f'{seed}-passkey-{context}-{t}').randrange(10000, 100000):05d}"
        depth = (t + 0.5) / trials
        prompts.append(dict(trial=t, key=key, depth=round(depth, 2),
                            text=build_context(tok, [FILL], context - 48, depth, key) + QUESTION + ANSWER_PREFIX))
    return prompts


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's 95% interval of a proportion k / n."""
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre, half = p + z * z / (2 * n), z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    return max(0.0, (centre - half) / (1 + z * z / n)), min(1.0, (centre + half) / (1 + z * z / n))


def recommended(context: int, pct: float) -> dict:
    """The plugin's sink-window settings whose kept blocks hold at most pct%
    of the f16 bytes of a context-token prompt: one sink block, a quarter of
    the blocks protected, the window the rest less the block it straddles."""
    blocks = int(pct / 100 * context * F16_BYTES / (INT8_BYTES * BLOCK))
    protect = max(1, blocks // 4)
    window = blocks - 1 - protect - 1
    assert window >= 2, (context, pct, blocks)
    return dict(KVCOMPRESS_VLLM_METHOD="sink-window", KVCOMPRESS_VLLM_DTYPE="int8", KVCOMPRESS_VLLM_SINK=SINK,
                KVCOMPRESS_VLLM_PROTECT=protect * BLOCK, KVCOMPRESS_VLLM_WINDOW=window * BLOCK,
                kept_blocks=blocks)


# ---------------------------------------------------------------- the worker


def engine(job):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the scheduler in this process: its counts
    if job["plugin"]:
        os.environ["KVCOMPRESS_VLLM"] = "1"
    else:
        os.environ["VLLM_PLUGINS"] = "none"
    from vllm import LLM

    args = dict(model=job["model"], dtype=job.get("model_dtype", "float32"), max_model_len=job["max_len"],
                enforce_eager=True, seed=0, enable_prefix_caching=False,
                block_size=BLOCK if job["plugin"] else STOCK_BLOCK,
                max_num_batched_tokens=job.get("chunk", CHUNK), kv_cache_memory_bytes=job["kv_bytes"])
    t0 = time.time()
    llm = LLM(**args)
    cache = llm.llm_engine.vllm_config.cache_config
    return llm, dict(pool_tokens=cache.num_gpu_blocks * cache.block_size, start_s=round(time.time() - t0, 1),
                     max_concurrency=round(cache.kv_cache_max_concurrency, 3))


def freed_blocks():
    try:
        from kvcompress.vllm_backend import SinkWindowManager
        return SinkWindowManager.freed_blocks
    except Exception:  # the plugin is off (stock): nothing freed
        return 0


def worker(job) -> None:
    from vllm import SamplingParams

    llm, info = engine(job)
    print(json.dumps(dict(kind="engine", **info)), flush=True)
    if job["part"] == "recall":
        prompts = [p["text"] for p in job["prompts"]]
        t0 = time.time()
        outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=8), use_tqdm=False)
        sec = time.time() - t0
        for p, o in zip(job["prompts"], outs):
            text = o.outputs[0].text
            print(json.dumps(dict(kind="recall", trial=p["trial"], key=p["key"], depth=p["depth"],
                                  prompt_tokens=len(o.prompt_token_ids), correct=int(p["key"] in text),
                                  answer=" ".join(text.split())[:40])), flush=True)
        print(json.dumps(dict(kind="done", seconds=round(sec, 1), freed_blocks=freed_blocks())), flush=True)
        if job.get("greedy"):  # the 64 greedy tokens of each (equal to stock's at the exact setting)
            outs = llm.generate(job["greedy"], SamplingParams(temperature=0, max_tokens=64, ignore_eos=True),
                                use_tqdm=False)
            print(json.dumps(dict(kind="greedy", tokens=[list(o.outputs[0].token_ids) for o in outs],
                                  texts=[o.outputs[0].text for o in outs])), flush=True)
    elif job["part"] == "admission":
        from vllm.v1.core.sched.scheduler import Scheduler

        seen = {"running": 0, "preempted": set()}
        schedule = Scheduler.schedule

        def counting(self, *a, **k):
            out = schedule(self, *a, **k)
            seen["running"] = max(seen["running"], len(self.running))
            seen["preempted"].update(r.request_id for r in self.running if r.num_preemptions)
            seen["preempted"].update(r.request_id for r in self.waiting if r.num_preemptions)
            return out

        Scheduler.schedule = counting
        tok = llm.get_tokenizer()
        prompts = [build_context(tok, [FILL], job["context"] - 48, 0.5, f"{10000 + i:05d}") + QUESTION +
                   ANSWER_PREFIX for i in range(job["requests"])]
        t0 = time.time()
        llm.generate(prompts, SamplingParams(temperature=0, max_tokens=job["max_tokens"], ignore_eos=True),
                     use_tqdm=False)
        print(json.dumps(dict(kind="admission", requests=job["requests"], most_running=seen["running"],
                              preempted=len(seen["preempted"]), seconds=round(time.time() - t0, 1),
                              freed_blocks=freed_blocks())), flush=True)
    elif job["part"] == "speed":
        prompts = ["The capital of France is",
                   "The passkey is 31415. Remember it. What is the passkey? The passkey is"]
        for batch in job["batches"]:
            many = [prompts[i % 2] for i in range(batch)]
            llm.generate(many[:1], SamplingParams(temperature=0, max_tokens=4), use_tqdm=False)  # warm
            rates = []
            for _ in range(3):  # the median of three (the machine is shared)
                t0 = time.time()
                llm.generate(many, SamplingParams(temperature=0, max_tokens=64, ignore_eos=True), use_tqdm=False)
                rates.append(64 * batch / (time.time() - t0))
            print(json.dumps(dict(kind="speed", batch=batch, tokens_per_s=round(sorted(rates)[1], 1),
                                  runs=[round(r, 1) for r in rates])), flush=True)


# ------------------------------------------------------------------ the race


FIELDS = ["part", "engine", "context", "budget_pct", "trial", "depth", "key", "prompt_tokens", "correct", "answer",
          "pool_tokens", "kept_blocks", "requests", "most_running", "preempted", "batch", "tokens_per_s",
          "freed_blocks", "seconds", "settings"]


def run_worker(job, env) -> list[dict]:
    e = dict(os.environ, **{k: str(v) for k, v in env.items()})
    t0 = time.time()
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", json.dumps(job)], env=e,
                         capture_output=True, text=True, timeout=3600)
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    if out.returncode != 0:
        raise SystemExit(f"worker {job['part']} {env} failed:\n{out.stderr[-3000:]}")
    print(f"  ({time.time() - t0:.0f} s)", flush=True)
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", nargs="?")
    ap.add_argument("--csv")
    ap.add_argument("--parts", default="pool,recall,admission,speed")
    ap.add_argument("--contexts", default="1024,2048,4096")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--budgets", default="25,12.5")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--requests", type=int, default=0, help="admission: requests (default: as many as fit, + 2)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(json.loads(a.worker))
    if not (a.model and a.csv):
        ap.error("MODEL_DIR and --csv are required")
    from transformers import AutoTokenizer
    import vllm

    tok = AutoTokenizer.from_pretrained(a.model)
    contexts = [int(x) for x in a.contexts.split(",")]
    budgets = [float(x) for x in a.budgets.split(",")]
    max_len = max(contexts) + 16 * -(-max(contexts) // CHUNK) + 64  # the admission part's decode fits
    out = ResumableCsv(a.csv, FIELDS, key=["part", "engine", "context", "budget_pct"])
    print(f"vllm_race: vLLM {vllm.__version__}, seed {a.seed}, contexts {contexts}, {a.trials} trials, budgets "
          f"{budgets}% of f16 bytes, blocks of {BLOCK} (stock {STOCK_BLOCK}), prefill chunks of {CHUNK}", flush=True)

    emit = out.write

    gib = 1 << 30
    if "pool" in a.parts.split(","):
        for name, plugin, env, dtype in [("stock-f32", False, {}, "float32"), ("stock-bf16", False, {}, "bfloat16"),
                                         ("plugin-f16", True, {"KVCOMPRESS_VLLM_DTYPE": "f16"}, "float32"),
                                         ("plugin-int8", True, {"KVCOMPRESS_VLLM_DTYPE": "int8"}, "float32"),
                                         ("plugin-int4", True, {"KVCOMPRESS_VLLM_DTYPE": "int4"}, "float32")]:
            if out.has("pool", name, "", ""):
                continue
            print(f"pool {name}", flush=True)
            lines = run_worker(dict(part="pool", model=a.model, plugin=plugin, max_len=max_len, kv_bytes=gib,
                                    model_dtype=dtype), env)
            emit(dict(part="pool", engine=name, pool_tokens=lines[0]["pool_tokens"], settings=json.dumps(env)))

    if "recall" in a.parts.split(","):
        # plugin-noprotect: the smallest budget's blocks all to sinks and window (what the protected blocks buy)
        cells = [("stock", 100.0)] + [("plugin", pct) for pct in budgets] + [("plugin-noprotect", min(budgets))]
        for n in contexts:
            prompts = passkey_prompts(tok, n, a.trials, a.seed)
            for name, pct in cells:
                if out.has("recall", name, n, f"{pct:g}"):
                    continue
                env = {}
                kept = ""
                if name != "stock":
                    env = recommended(n, pct)
                    kept = env.pop("kept_blocks")
                    if name == "plugin-noprotect":
                        env["KVCOMPRESS_VLLM_WINDOW"] += env["KVCOMPRESS_VLLM_PROTECT"]
                        env["KVCOMPRESS_VLLM_PROTECT"] = 0
                print(f"recall {name} {n} tokens {pct:g}% {env}", flush=True)
                lines = run_worker(dict(part="recall", model=a.model, plugin=name != "stock", max_len=max_len,
                                        kv_bytes=gib, prompts=prompts), env)
                tail = lines[-1]
                for r in lines:
                    if r["kind"] == "recall":
                        emit(dict(part="recall", engine=name, context=n, budget_pct=f"{pct:g}", kept_blocks=kept,
                                  pool_tokens=lines[0]["pool_tokens"], freed_blocks=tail["freed_blocks"],
                                  seconds=tail["seconds"], settings=json.dumps(env),
                                  **{k: r[k] for k in ("trial", "depth", "key", "prompt_tokens", "correct",
                                                       "answer")}))
                        print(f"  t={r['trial']} {'ok' if r['correct'] else 'miss'} {r['answer']!r}", flush=True)

    if "admission" in a.parts.split(","):
        n = max(contexts)
        # Prefill runs one chunk of one request per step, so requests start
        # one after another; each decodes long enough (16 requests' prefills)
        # to be still running when the last starts. Stock bf16 (f16's bytes)
        # gets a pool for 4 whole requests; the plugin the same bytes.
        decode = 16 * -(-n // CHUNK) + 8
        per_request = -(-(n + decode) // STOCK_BLOCK) * STOCK_BLOCK
        kv_bytes = 4 * per_request * LAYERS * KV_HEADS * F16_BYTES
        env = recommended(n, 25.0)
        kept = env.pop("kept_blocks")
        fit = (kv_bytes // (LAYERS * KV_HEADS * INT8_BYTES * BLOCK)) // (kept + CHUNK // BLOCK)
        requests = a.requests or min(16, int(fit) + 2)
        for name, plugin, e, dtype in [("stock-bf16", False, {}, "bfloat16"), ("plugin", True, env, "float32")]:
            if out.has("admission", name, n, "25" if plugin else "100"):
                continue
            print(f"admission {name}: {requests} requests of {n} tokens, {kv_bytes} B of KV", flush=True)
            lines = run_worker(dict(part="admission", model=a.model, plugin=plugin, max_len=max_len,
                                    kv_bytes=kv_bytes, model_dtype=dtype, context=n, requests=requests,
                                    max_tokens=decode), e)
            r = lines[-1]
            emit(dict(part="admission", engine=name, context=n, budget_pct="25" if plugin else "100",
                      pool_tokens=lines[0]["pool_tokens"], kept_blocks=kept if plugin else "",
                      requests=r["requests"], most_running=r["most_running"], preempted=r["preempted"],
                      freed_blocks=r["freed_blocks"], seconds=r["seconds"], settings=json.dumps(e)))
            print(f"  most running {r['most_running']}, preempted {r['preempted']}", flush=True)

    if "speed" in a.parts.split(","):
        for name, plugin, env in [("stock-f32", False, {}), ("plugin-int8", True, {"KVCOMPRESS_VLLM_DTYPE": "int8"})]:
            if out.has("speed", name, "", ""):
                continue
            print(f"speed {name}", flush=True)
            lines = run_worker(dict(part="speed", model=a.model, plugin=plugin, max_len=2048, kv_bytes=gib,
                                    batches=[1, 16], chunk=2048), env)
            for r in lines:
                if r["kind"] == "speed":
                    emit(dict(part="speed", engine=name, batch=r["batch"], tokens_per_s=r["tokens_per_s"],
                              settings=json.dumps(env)))
                    print(f"  batch {r['batch']}: {r['tokens_per_s']} tokens/s", flush=True)
    out.close()


if __name__ == "__main__":
    main()
