"""kvcompress inside transformers and kvpress, on SmolLM2-135M loaded by
transformers from the project's GGUF (apps/fetch-smollm2.sh, or the file
named by KVC_SMOLLM2). Skips with a message when torch, transformers or
kvpress are missing or the model cannot be fetched; .ci/test installs them.

The exact cache is checked twice. At every layer, position and query head of
a real prompt its attention is within the f32 rounding bound of the f64
softmax attention (test_cache.exact_tolerance, derived there). The logits
are then within tau = 2 e of transformers' own (SDPA, f32), where e is
transformers' f32 logits' distance from the same model run in f64: an
attention that rounds within the f32 bound puts our logits within e of the
f64 ones too, so the two f32 runs differ by at most 2 e."""
import os
import pathlib
import subprocess

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed")

import kvcompress  # noqa: E402
import kvcompress.hf as kvc_hf  # noqa: E402
from test_cache import exact_tolerance  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROMPT = ("The passkey is 31415. Remember it. The grass is green. The sky is blue. The sun is yellow. "
          "Here we go. There and back again. What is the passkey? The passkey is")


def _gguf():
    path = os.environ.get("KVC_SMOLLM2")
    if path and os.path.isfile(path):
        return pathlib.Path(path)
    r = subprocess.run(["bash", str(ROOT / "apps" / "fetch-smollm2.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"SmolLM2-135M could not be fetched (apps/fetch-smollm2.sh: {r.stderr.strip()[-200:]})")
    return pathlib.Path(r.stdout.strip())


@pytest.fixture(scope="module")
def lm():
    os.environ.setdefault("TQDM_DISABLE", "1")
    transformers.logging.set_verbosity_error()
    g = _gguf()
    tok = transformers.AutoTokenizer.from_pretrained(g.parent, gguf_file=g.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(g.parent, gguf_file=g.name, dtype=torch.float32)
    model.eval()
    ids = tok(PROMPT, return_tensors="pt").input_ids
    return tok, model, ids


def _logits(model, ids, cache=None):
    with torch.no_grad():
        return model(ids, past_key_values=cache).logits[0].double()


def test_exact_attention_within_the_f32_bound_at_every_layer(lm, monkeypatch):
    tok, model, ids = lm
    worst = [0.0]
    original = kvc_hf.KvcLayer.attend

    def checked(self, query, scaling, real=None):
        k, v = (t[0].double().numpy() for t in self.pending)  # (n_kv_heads, L, d): the whole prompt
        out = original(self, query, scaling, real)[0].double().numpy()  # (L, n_heads, d)
        q = query[0].double().numpy()
        group = q.shape[0] // k.shape[0]
        beta = 1.0 / np.sqrt(q.shape[-1])
        for h in range(q.shape[0]):
            K, V = k[h // group], v[h // group]
            for t in range(q.shape[1]):
                x = (K[: t + 1] @ q[h, t]) * scaling
                p = np.exp(x - x.max())
                ref = (p @ V[: t + 1]) / p.sum()
                tol = exact_tolerance(q[h, t].astype(np.float32) * np.float32(scaling / beta),
                                      K[: t + 1].astype(np.float32), V[: t + 1].astype(np.float32), beta)
                err = np.abs(out[t, h] - ref).max()
                assert err <= tol, f"layer {self.layer_idx} head {h} position {t}: {err:.3g} > {tol:.3g}"
                worst[0] = max(worst[0], err / tol)
        return torch.from_numpy(out).float().unsqueeze(0)

    monkeypatch.setattr(kvc_hf.KvcLayer, "attend", checked)
    cache = kvc_hf.KvcCache.for_model(model, method="exact", dtype="f32", budget=ids.shape[1], sink=0, window=0)
    _logits(model, ids, cache)
    print(f"exact attention: worst error / derived bound = {worst[0]:.3g} over 30 layers x 9 heads x "
          f"{ids.shape[1]} positions")


def test_exact_logits_and_greedy_text_equal_transformers(lm):
    tok, model, ids = lm
    model.set_attn_implementation("sdpa")
    ref32 = _logits(model, ids)
    ref_text = model.generate(ids, max_new_tokens=16, do_sample=False)
    m64 = transformers.AutoModelForCausalLM.from_config(model.config, dtype=torch.float64)
    m64.load_state_dict(model.state_dict())
    m64.eval()
    ref64 = _logits(m64, ids)
    e = (ref32 - ref64).abs().max().item()
    cache = kvc_hf.KvcCache.for_model(model, method="exact", dtype="f32", budget=ids.shape[1] + 16, sink=0,
                                      window=0)
    ours = _logits(model, ids, cache)
    diff = (ours - ref32).abs().max().item()
    print(f"logits over {ids.shape[1]} positions: max |kvcompress - transformers sdpa| = {diff:.3g}, "
          f"transformers f32 vs f64 e = {e:.3g}, tau = 2e = {2 * e:.3g}, max |logit| = {ref32.abs().max():.3g}")
    assert diff <= 2 * e
    cache = kvc_hf.KvcCache.for_model(model, method="exact", dtype="f32", budget=ids.shape[1] + 16, sink=0,
                                      window=0)
    text = model.generate(ids, past_key_values=cache, max_new_tokens=16, do_sample=False)
    assert torch.equal(text, ref_text), (tok.decode(text[0]), tok.decode(ref_text[0]))


@pytest.mark.parametrize("method", [m["name"] for m in kvcompress.methods()])
def test_every_method_generates_and_reports_its_bytes(lm, method):
    tok, model, ids = lm
    n = ids.shape[1] + 12
    # half the tokens, sinks and window of 4 each, so that the short prompt is
    # compressed (exact keeps every token); the prefill methods are told the
    # whole context as their prompt (as kvc bench recall does)
    budget = n if method == "exact" else n // 2
    params = {"prefix_len": n} if method.endswith("-prefill") else {}
    cache = kvc_hf.KvcCache.for_model(model, method=method, dtype="int8", budget=budget, sink=4, window=4, **params)
    exact = kvcompress.Cache(*kvc_hf.model_shape(model.config), method="exact", dtype="f16", budget=n, sink=0,
                             window=0)
    out = model.generate(ids, past_key_values=cache, max_new_tokens=12, do_sample=False)
    new = out[0, ids.shape[1]:]
    assert new.numel() >= 1 and tok.decode(new).strip() != ""
    assert cache.get_seq_length() == out.shape[1] - 1  # every position but the last generated token's
    n_layers, _, n_kv, d = kvc_hf.model_shape(model.config)
    rows = cache.arena.usage()["peak_elements"] / (2 * d * n_layers * n_kv)  # elements: a key and a value per row
    print(f"{method}: {cache.nbytes} bytes ({cache.nbytes / exact.nbytes:.2f} of f16 exact for {n} tokens), "
          f"{rows:.1f} rows per stream at peak, {tok.decode(new)!r}")
    assert 0 < cache.nbytes and rows <= budget


def test_a_batch_of_two_is_refused(lm):
    tok, model, ids = lm
    cache = kvc_hf.KvcCache.for_model(model, method="sink-window", budget=64)
    with pytest.raises(ValueError, match="one sequence"):
        with torch.no_grad():
            model(ids.repeat(2, 1), past_key_values=cache)


def test_another_attention_fails_loudly_on_a_kvcompress_cache(lm):
    tok, model, ids = lm
    cache = kvc_hf.KvcCache.for_model(model, method="sink-window", budget=128)
    model.set_attn_implementation("sdpa")  # a model not (or no longer) on the kvcompress attention
    try:
        with pytest.raises((RuntimeError, NotImplementedError)):
            with torch.no_grad():
                model(ids, past_key_values=cache)
    finally:
        model.set_attn_implementation(kvc_hf.ATTENTION)


def test_press_in_kvpress_pipeline_answers_from_the_library(lm):
    kvpress = pytest.importorskip("kvpress", reason="kvpress is not installed")
    tok, model, ids = lm
    pipe = transformers.pipeline("kv-press-text-generation", model=model, tokenizer=tok, device="cpu")
    context = "The passkey is 31415. Remember it." + " The grass is green. The sky is blue." * 20
    press = kvc_hf.KvcPress(method="sink-window", dtype="int8", compression_ratio=0.5, params={"protect": 25})
    calls = []
    original = kvc_hf.KvcLayer.attend

    def counted(self, query, scaling, real=None):
        calls.append(query.shape[2])
        return original(self, query, scaling, real)

    kvc_hf.KvcLayer.attend = counted
    try:
        r = pipe(context, questions=["What is the passkey?", "What is the passkey?"],
                 answer_prefix="The passkey is", press=press, max_new_tokens=6)
    finally:
        kvc_hf.KvcLayer.attend = original
    n_ctx = press.shared.mark_len
    f16 = kvcompress.Cache(*kvc_hf.model_shape(model.config), method="exact", dtype="f16", budget=n_ctx, sink=0,
                           window=0)
    print(f"press: answers {r['answers']}, {press.nbytes} bytes = {press.nbytes / f16.nbytes:.3f} of f16 exact "
          f"for {n_ctx} context tokens; {len(calls)} attends by the library")
    assert press.nbytes <= 0.5 * f16.nbytes
    assert len(calls) >= 2 * 30  # the question and the answer of both questions went through the library
    assert r["answers"][0] == r["answers"][1]  # the second question starts from the restored context


def test_press_sentences_protects_the_surprising_sentence(lm):
    """protect_marks="sentences": in a context of one filler sentence repeated,
    the needle sentence's digits are the prompt's least predictable tokens
    once the filler has repeated, so the spans chosen by mean surprisal hold
    every token of the needle sentence; the cache stays within (1 - r) of
    the f16 bytes."""
    pytest.importorskip("kvpress", reason="kvpress is not installed")
    tok, model, ids = lm
    pipe = transformers.pipeline("kv-press-text-generation", model=model, tokenizer=tok, device="cpu")
    filler = " The grass is green. The sky is blue." * 12
    needle = " The passkey is 31415."
    context = "Remember the passkey." + filler + needle + filler
    press = kvc_hf.KvcPress(method="sink-window", dtype="int8", compression_ratio=0.75, protect_marks="sentences",
                            tokenizer=tok)
    r = pipe(context, question="What is the passkey?", answer_prefix="The passkey is", press=press,
             max_new_tokens=6)
    ctx_ids = pipe.preprocess(context, ["What is the passkey?"], "The passkey is", 1 << 20)["context_ids"][0]
    n = press.shared.mark_len
    marks = press.last_marks
    assert marks is not None and marks.shape == (n,) and n == len(ctx_ids)
    text = [tok.decode([i]) for i in ctx_ids.tolist()]
    at = "".join(text).index(needle)  # the needle's tokens: those whose text lies within it
    pos, start, end = 0, None, None
    for t, piece in enumerate(text):
        if start is None and pos + len(piece) > at:
            start = t
        pos += len(piece)
        if end is None and pos >= at + len(needle):
            end = t + 1
    chosen = [text[t] for t in np.flatnonzero(marks)]
    print(f"press sentences: answer {r['answer']!r}, {int(marks.sum())} tokens marked, needle [{start}, {end}): "
          f"{''.join(chosen)!r}")
    assert marks[start:end].all()  # the whole needle sentence
    assert press.nbytes <= 0.25 * kvcompress.Cache(*kvc_hf.model_shape(model.config), method="exact", dtype="f16",
                                                    budget=n, sink=0, window=0).nbytes


def test_other_caches_are_answered_by_the_registrys_sdpa(monkeypatch):
    """A model switched to the "kvcompress" attention (by KvcCache or
    KvcPress) answers any other cache through the registry's "sdpa" as it is
    at that moment: with kvpress imported, kvpress's wrapper, which masks the
    keys a head-wise press (KVzip) evicted. Calling the bare SDPA function
    instead (until 2026-11-30) silently kept every key KVzip had evicted
    when it ran after a kvcompress press in the same process."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    torch.manual_seed(1)
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=1, head_dim=32)
    model = transformers.LlamaForCausalLM(cfg).eval()
    kvc_hf.KvcCache.for_model(model, paged=False, method="exact", budget=64, sink=0, window=0)  # switches it
    assert model.config._attn_implementation == kvc_hf.ATTENTION
    calls = []
    registered = ALL_ATTENTION_FUNCTIONS["sdpa"]

    def spy(*args, **kwargs):
        calls.append(1)
        return registered(*args, **kwargs)

    monkeypatch.setitem(ALL_ATTENTION_FUNCTIONS, "sdpa", spy)
    ids = torch.randint(3, 64, (1, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        model(ids, past_key_values=transformers.DynamicCache())
    assert len(calls) == 2  # one per layer


def test_a_left_padded_prompt_on_the_cpu_path_generates_the_unpadded_tokens():
    """The CPU path (batch 1) reads the attention mask: padding is not
    appended, and a left-padded prompt generates what the prompt alone does
    (a seeded two-layer Llama, sink-window int8 rows)."""
    torch.manual_seed(1)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=256, intermediate_size=256, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                                   max_position_embeddings=256)
    model = transformers.LlamaForCausalLM(cfg).eval()
    p = torch.randint(3, 128, (12,), generator=torch.Generator().manual_seed(1))
    ids = torch.cat([torch.zeros(4, dtype=torch.long), p])[None]
    mask = torch.cat([torch.zeros(4), torch.ones(12)]).long()[None]
    kw = dict(method="sink-window", budget=64, sink=4, window=8, dtype="int8")
    gen = dict(max_new_tokens=16, min_new_tokens=16, do_sample=False, pad_token_id=0)
    padded_cache = kvc_hf.KvcCache.for_model(model, paged=False, **kw)
    alone_cache = kvc_hf.KvcCache.for_model(model, paged=False, **kw)
    with torch.no_grad():
        padded = model.generate(ids, attention_mask=mask, past_key_values=padded_cache, **gen)[0, 16:]
        alone = model.generate(p[None], past_key_values=alone_cache, **gen)[0, 12:]
    assert torch.equal(padded, alone)
    assert padded_cache.arena.usage() == alone_cache.arena.usage()  # the 4 pads never entered


def test_press_on_sliding_window_layers_answers_as_the_model():
    """A Gemma 3-shaped model (random weights: two sliding-window layers of
    window 8, one global layer): the press gives the sliding layers a cache
    of their last 8 positions and the global layer every prompt token
    (exact, f32 rows, within (1 - r) of every layer's f16 bytes), so the
    question's logits equal transformers' own within tau = 2e, e the distance
    of transformers' f32 logits from the same model in f64 (as above)."""
    kvpress = pytest.importorskip("kvpress", reason="kvpress is not installed")
    torch.manual_seed(2)
    cfg = transformers.Gemma3TextConfig(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=3,
                                        num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                                        sliding_window=8, max_position_embeddings=256,
                                        layer_types=["sliding_attention", "sliding_attention", "full_attention"])
    model = transformers.Gemma3ForCausalLM(cfg).eval()
    ids = torch.randint(3, 128, (1, 64), generator=torch.Generator().manual_seed(3))
    question = torch.randint(3, 128, (1, 5), generator=torch.Generator().manual_seed(4))
    full = torch.cat([ids, question], dim=1)
    model.set_attn_implementation("sdpa")
    with torch.no_grad():
        ref32 = model(full).logits[0, -5:].double()
        m64 = transformers.Gemma3ForCausalLM(cfg).to(torch.float64).eval()
        m64.load_state_dict(model.state_dict())
        ref64 = m64(full).logits[0, -5:]
    e = (ref32 - ref64).abs().max().item()
    press = kvc_hf.KvcPress(method="exact", dtype="f32", compression_ratio=0.0, params={"sink": 0, "window": 0})
    cache = transformers.DynamicCache()
    with torch.no_grad(), press(model):
        model.model(input_ids=ids, past_key_values=cache)
    sh = press.shared
    assert sh.sliding is not None and sh.sliding.plan["n_sink"] == 0 and sh.sliding.plan["n_window"] == 7
    f16_bytes = 64 * 3 * 1 * 2 * 32 * 2
    assert press.nbytes <= f16_bytes
    with torch.no_grad():
        ours = model(question, past_key_values=cache).logits[0].double()
    diff = (ours - ref32).abs().max().item()
    print(f"sliding layers: max |press - transformers| = {diff:.3g}, e = {e:.3g}, {press.nbytes} of {f16_bytes} B")
    assert diff <= 2 * e
