"""kvcompress.device: the paged cache of kvc_cuda_batch.h driven from torch,
and KvcCache(paged=True) in transformers. Runs where the package has a CUDA
table: "simt" (CI: pip wheel -C cmake.define.KVC_PYTHON_SIMT=ON, the kernels
on the CPU runtime over CPU tensors) or "gpu" (CUDA tensors); skips with a
message otherwise.

Every output is checked against the f64 softmax attention over the rows as
they are stored (read back and dequantised by the reference row kernels),
within batch_bound below: the bound accel/cuda/tests/test_cuda_batch.cu
derives for the batched kernel (queries rounded to f16 after a power-of-two
scaling, the tensor core's f32 sums, probabilities rounded to f16, the split
merge), restated here for the test's weights (1) and roles (both).
"""
import math
import os

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch)")

import kvcompress.device as kd  # noqa: E402

if kd.backend() is None:
    pytest.skip("this kvcompress has no CUDA table (build it with -C cmake.define.KVC_PYTHON_SIMT=ON or "
                "KVC_CUDA_GPU=ON)", allow_module_level=True)
if kd.backend() == "gpu" and not torch.cuda.is_available():
    pytest.skip("the GPU build needs a CUDA device; torch sees none", allow_module_level=True)
DEVICE = "cuda" if kd.backend() == "gpu" else "cpu"
SEED = 20261127
U, UH, HALF_SUB = 2.0 ** -24, 2.0 ** -11, 2.0 ** -25


def batch_bound(q, K, V, beta, dtype, out_unit=U):
    """Per-coordinate bound on |kernel - f64 attention over the stored rows K,
    V| for one query q (float64 arrays), as batch_bound in test_cuda_batch.cu:
      score  dx_i = (c u_h + (d + 40) u) S_i + 2^-25 sigma K_i [+ 2^-25 Qa for int4] + 6u |x_i|
             (c = 2 for int4 keys rounded to f16, else 1; S_i = sum |q beta k_i|, K_i = sum |k_i|)
      weight eta = max_i dx_i + max dx + 4u |x_i - m| + 8u
      out    (2 eta + rel_num + rel_den + u_h) A + H / den + u_out |out|,
             A = sum p |v|max / sum p, H = sum 2^-25 vabs_i (vabs: 127 times the warp's
             largest int8 value scale, |v_i|max otherwise), pages + items <= 2 pages."""
    d, n = q.shape[0], K.shape[0]
    qb = q * beta
    qmax, qa = np.abs(qb).max(), np.abs(qb).sum()
    sigma = 2.0 ** (math.floor(math.log2(qmax)) + 1) if qmax > 2.0 ** -126 else 1.0
    x = K @ qb
    i4 = dtype == "int4"
    dx = (((2.0 if i4 else 1.0) * UH + (d + 40.0) * U) * (np.abs(K) @ np.abs(qb)) +
          HALF_SUB * sigma * np.abs(K).sum(1) + (HALF_SUB * qa if i4 else 0.0) + 6.0 * U * np.abs(x))
    m = x.max()
    p = np.exp(x - m)
    eta = (dx + dx.max() + 4.0 * U * np.abs(x - m) + 8.0 * U).max()
    vmax = np.abs(V).max(1)
    vabs = vmax.copy()
    if dtype == "int8":  # the warp's 16 rows share the largest value scale (127 s = |v|max)
        for w in range(0, n, 16):
            vabs[w:w + 16] = vmax[w:w + 16].max()
    pages = -(-n // 64)
    pi = 4.0 * 2 * pages * U
    rel = 2.0 * eta + (UH + 2 * U + 40 * U + pi) + (16 * U + pi) + UH
    ref = (p @ V) / p.sum()
    return ref, rel * (p @ vmax) / p.sum() + HALF_SUB * vabs.sum() / p.sum() + out_unit * np.abs(ref)


def check_outputs(cache, layer, q, out, t0, scaling, worst):
    """out (1, n, Hq, d) of positions t0 .. t0 + n - 1 against the stored rows:
    a call that did not wrap the ring reads rows 0 .. t; a one-position call
    reads every row present."""
    n, hq, d = out.shape[1], out.shape[2], out.shape[3]
    group = hq // cache.n_kv_heads
    for h in range(cache.n_kv_heads):
        K, V, positions = cache.rows(layer, h)
        K, V = K.double().numpy(), V.double().numpy()
        for i in range(n):
            t = t0 + i
            rows = len(positions) if n == 1 else t + 1
            assert n == 1 or positions[:rows] == list(range(rows))
            for j in range(group):
                qh = q[0, h * group + j, i].double().cpu().numpy()
                ref, tol = batch_bound(qh, K[:rows], V[:rows], scaling, cache.dtype)
                got = out[0, i, h * group + j].double().cpu().numpy()
                err = np.abs(got - ref)
                assert (err <= tol).all(), (f"{cache.method} {cache.dtype} layer {layer} position {t} head "
                                            f"{h * group + j}: {err.max():.3g} > {tol[err.argmax()]:.3g}")
                worst[0] = max(worst[0], (err / tol).max())


@pytest.mark.parametrize("method,dtype,d", [("exact", "f16", 64), ("exact", "int8", 128), ("sink-window", "f16", 128),
                                            ("sink-window", "int8", 64), ("sink-window", "int4", 64)])
def test_paged_attend_within_the_derived_bound(method, dtype, d):
    """A prompt of 40 positions in one call, then one position at a time past
    the budget (64 rows: the ring wraps), every output within batch_bound."""
    g = torch.Generator().manual_seed(SEED)
    print(f"seed {SEED}")
    hkv, group, scaling = 2, 2, 1.0 / math.sqrt(d)
    cache = kd.PagedCache(1, hkv * group, hkv, d, method=method, dtype=dtype,
                          budget=64 if method == "sink-window" else None, sink=4, device=DEVICE)
    worst = [0.0]

    def step(n):
        k, v = (torch.randn(1, hkv, n, d, generator=g).to(DEVICE) for _ in range(2))
        q = (2.0 * torch.randn(1, hkv * group, n, d, generator=g)).to(DEVICE)
        t0 = cache.seen(0)
        out = cache.extend(0, k, v, q, scaling)
        assert out.shape == (1, n, hkv * group, d) and out.dtype == q.dtype
        check_outputs(cache, 0, q, out, t0, scaling, worst)

    step(40)
    for _ in range(30):
        step(1)
    _, _, positions = cache.rows(0, 0)
    # the core's sink-window stream keeps the 4 sinks and the last 64 - 4 positions of the 70
    assert sorted(positions) == (list(range(4)) + list(range(10, 70)) if method == "sink-window" else list(range(70)))
    print(f"{method} {dtype} d={d}: worst error / derived bound = {worst[0]:.3g}")


def test_a_call_across_the_ring_equals_the_same_positions_one_call_each():
    """One call of 80 positions (64 in one launch pair, 16 one by one) gives
    the bits of 64 positions then 16 calls of one."""
    g = torch.Generator().manual_seed(SEED)
    d = 64
    k, v = (torch.randn(1, 1, 80, d, generator=g).to(DEVICE) for _ in range(2))
    q = torch.randn(1, 2, 80, d, generator=g).to(DEVICE)
    a = kd.PagedCache(1, 2, 1, d, method="sink-window", dtype="int8", budget=64, sink=4, device=DEVICE)
    b = kd.PagedCache(1, 2, 1, d, method="sink-window", dtype="int8", budget=64, sink=4, device=DEVICE)
    whole = a.extend(0, k, v, q, 0.125)
    parts = [b.extend(0, k[:, :, :64], v[:, :, :64], q[:, :, :64], 0.125)]
    parts += [b.extend(0, k[:, :, t:t + 1], v[:, :, t:t + 1], q[:, :, t:t + 1], 0.125) for t in range(64, 80)]
    assert torch.equal(whole, torch.cat(parts, dim=1))


def test_bad_input_is_refused_with_a_message():
    with pytest.raises(ValueError, match="decides from the rows"):
        kd.PagedCache(1, 2, 1, 64, method="h2o", budget=64, device=DEVICE)
    with pytest.raises(ValueError, match="dimension 64 or 128"):
        kd.PagedCache(1, 2, 1, 96, method="exact", dtype="f16", device=DEVICE)
    with pytest.raises(ValueError, match="group"):
        kd.PagedCache(1, 34, 2, 64, method="exact", device=DEVICE)
    with pytest.raises(ValueError, match="less than one page"):
        kd.PagedCache(1, 2, 1, 64, budget="1KiB", device=DEVICE)
    c = kd.PagedCache(1, 2, 1, 64, method="sink-window", budget=64, device=DEVICE)
    k = torch.zeros(1, 1, 3, 64, device=DEVICE)
    with pytest.raises(ValueError, match="want shape"):
        c.extend(0, k, k, torch.zeros(1, 3, 3, 64, device=DEVICE), 0.125)
    with pytest.raises(ValueError, match="scaling"):
        c.extend(0, k, k, torch.zeros(1, 2, 3, 64, device=DEVICE), float("nan"))
    assert c.seen(0) == 0  # refused calls leave the cache as it was


def test_bytes_are_whole_pages():
    pb = kd.page_bytes("int8", 64)
    c = kd.PagedCache(3, 6, 2, 64, method="sink-window", dtype="int8", budget="25%f16", context=1024, device=DEVICE)
    f16 = 3 * 2 * 1024 * 2 * 2 * 64  # an f16 exact cache's keys and values for the context
    assert c.nbytes == 3 * 2 * (f16 // 6 // 4 // pb) * pb and c.nbytes <= f16 // 4
    assert c.budget == (f16 // 6 // 4 // pb) * 64


transformers = pytest.importorskip("transformers", reason="transformers is not installed")


@pytest.fixture(scope="module")
def tiny():
    """A two-layer Llama with random weights (seeded): head_dim 64, 4 query
    heads over 2 kv heads; what the SIMT runtime can run in seconds."""
    torch.manual_seed(SEED)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=256, intermediate_size=256, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                                   max_position_embeddings=256)
    model = transformers.LlamaForCausalLM(cfg).to(DEVICE).eval()
    ids = torch.randint(0, 128, (1, 50), generator=torch.Generator().manual_seed(SEED)).to(DEVICE)
    return model, ids


@pytest.mark.parametrize("method,dtype", [("exact", "f16"), ("sink-window", "int8")])
def test_generate_on_paged_rows_within_the_bound_at_every_layer(tiny, monkeypatch, method, dtype):
    """model.generate with KvcCache(paged="slots"): every layer's every output
    within batch_bound of the stored rows (sink-window: 50 prompt positions
    and 20 new tokens pass its 64 rows)."""
    import kvcompress.hf as kvc_hf
    model, ids = tiny
    worst = [0.0]
    original = kvc_hf.KvcPagedLayer.attend

    def checked(self, query, scaling, real=None):
        t0 = self.seen
        out = original(self, query, scaling, real)
        check_outputs(self.shared.arena, self.layer_idx, query, out, t0, scaling, worst)
        return out

    monkeypatch.setattr(kvc_hf.KvcPagedLayer, "attend", checked)
    cache = kvc_hf.KvcCache.for_model(model, paged="slots", method=method, dtype=dtype,
                                      budget=64 if method == "sink-window" else None, sink=4)
    with torch.no_grad():
        text = model.generate(ids, past_key_values=cache, max_new_tokens=20, do_sample=False)
    assert text.shape == (1, 70) and cache.shared.arena.seen(0) == 69  # the last token is not attended yet
    print(f"{method} {dtype}: {cache.nbytes} bytes of pages, worst error / derived bound = {worst[0]:.3g}")


# --- every method through the core's mirrors (kvcompress.device.MirroredCache) ---

import kvcompress  # noqa: E402
import kvcompress.hf as kvc_hf  # noqa: E402
from test_hf import lm  # noqa: E402,F401  (the SmolLM2 fixture)

METHODS = [m["name"] for m in kvcompress.methods()]
NEW_TOKENS = 32


def method_kwargs(method, budget=32):
    """A budget the prompts and the 32 new tokens pass (exact: one that holds
    them all), 4 sinks and a window of 8 so that every method evicts or merges."""
    kw = dict(method=method, budget=64 if method == "exact" else budget, seed=1, sink=4, window=8)
    if method.endswith("-prefill"):
        kw["prefix_len"] = 10
    return kw


def left_padded(prompts):
    """ids and attention mask of a left-padded batch."""
    width = max(len(p) for p in prompts)
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros(len(prompts), width, dtype=torch.long)
    for i, p in enumerate(prompts):
        ids[i, width - len(p):], mask[i, width - len(p):] = p, 1
    return ids.to(DEVICE), mask.to(DEVICE)


def host_and_device_tokens(model, prompts, kw):
    """Greedy tokens of the device path (one left-padded batch) and of the
    host path (each prompt alone, batch 1), and the two paths' caches."""
    ids, mask = left_padded(prompts)
    dev_cache = kvc_hf.KvcCache.for_model(model, paged=True, **kw)
    with torch.no_grad():
        dev = model.generate(ids, attention_mask=mask, past_key_values=dev_cache, max_new_tokens=NEW_TOKENS,
                             min_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)
    host, host_caches = [], []
    for p in prompts:
        hc = kvc_hf.KvcCache.for_model(model, paged=False, **kw)
        with torch.no_grad():
            h = model.generate(p[None].cpu(), past_key_values=hc, max_new_tokens=NEW_TOKENS,
                               min_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)
        host.append(h[0, len(p):].tolist())
        host_caches.append(hc)
    return [dev[i, ids.shape[1]:].tolist() for i in range(len(prompts))], host, dev_cache, host_caches


@pytest.fixture(scope="module")
def tiny_cpu_model():
    """The seeded two-layer Llama of `tiny`, on the build's device, with three
    prompts of 20, 13 and 17 tokens."""
    torch.manual_seed(SEED)
    cfg = transformers.LlamaConfig(vocab_size=128, hidden_size=256, intermediate_size=256, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                                   max_position_embeddings=256)
    model = transformers.LlamaForCausalLM(cfg).to(DEVICE).eval()
    g = torch.Generator().manual_seed(SEED)
    prompts = [torch.randint(3, 128, (n,), generator=g) for n in (20, 13, 17)]
    return model, prompts


@pytest.mark.parametrize("method", METHODS)
def test_every_method_generates_the_host_paths_tokens_for_a_padded_batch(tiny_cpu_model, method):
    """Three left-padded prompts in one batch on the device pages (f16 rows)
    give, for 32 greedy tokens each, the tokens of the host path run on each
    prompt alone, and each sequence's cache ends
    with as many rows as the host path's caches (no padding entered). (f16 pages:
    int8 and int4 pages store the current token in their type where the host
    keeps it in f32, which moves this random model's logits by ~1e-3, past
    some of its top-2 margins: docs/python.md has those runs.)"""
    model, prompts = tiny_cpu_model
    print(f"seed {SEED}")
    kw = method_kwargs(method)
    kw["dtype"] = "f16"
    dev, host, dev_cache, host_caches = host_and_device_tokens(model, prompts, kw)
    for i in range(len(prompts)):
        assert dev[i] == host[i], f"{method}: sequence {i}: device {dev[i]} != host {host[i]}"
    mc = dev_cache.shared.arena
    for i, hc in enumerate(host_caches):  # the rows each holds (the model's batch of 3 rounds k, v apart from
        assert mc.usage(i) == hc.arena._c.usage(), f"{method}: sequence {i}"  # batch 1: no checksums here)
    print(f"{method}: {len(prompts)} x {NEW_TOKENS} tokens equal; {mc.nbytes} bytes of pages, "
          f"{mc.host_bytes} of host state")


def test_mirrored_bad_input_is_refused_and_leaves_the_caches_unchanged():
    d = 64
    mc = kd.MirroredCache(1, 4, 2, d, batch=2, method="h2o", budget=32, sink=4, window=8, device=DEVICE)
    g = torch.Generator().manual_seed(SEED)
    k, v = (torch.randn(2, 2, 3, d, generator=g).to(DEVICE) for _ in range(2))
    q = torch.randn(2, 4, 3, d, generator=g).to(DEVICE)
    mc.extend(0, k, v, q, 0.125)
    before = [mc.checksum(0), mc.checksum(1)]
    bad = k.clone()
    bad[1, 0, 2, 5] = float("nan")
    with pytest.raises(kvcompress.KvcError, match="sequence 1, position 2"):
        mc.extend(0, bad, v, q, 0.125)
    with pytest.raises(ValueError, match="want shape"):
        mc.extend(0, k, v, q[:, :2], 0.125)
    with pytest.raises(ValueError, match="a batch of 1"):
        mc.extend(0, k[:1], v[:1], q[:1], 0.125)
    with pytest.raises(ValueError, match="0 \\(padding\\) or 1"):
        mc.extend(0, k, v, q, 0.125, real=torch.full((2, 3), 2))
    with pytest.raises(ValueError, match="scaling"):
        mc.extend(0, k, v, q, -1.0)
    with pytest.raises(kvcompress.KvcError, match="layer 1 of 1"):
        mc.extend(1, k, v, q, 0.125)
    assert [mc.checksum(0), mc.checksum(1)] == before and mc.seen(0) == 3
    with pytest.raises(kvcompress.KvcError, match="f16, int8 or int4"):
        kd.MirroredCache(1, 4, 2, d, batch=1, method="sink-window", dtype="kivi4", budget=128, device=DEVICE)
    with pytest.raises(ValueError, match="batch"):
        kd.MirroredCache(1, 4, 2, d, batch=0, budget=64, device=DEVICE)


def test_padding_never_enters_and_is_answered_with_zeros():
    """A sequence whose first positions are padding holds exactly what the
    same sequence without them holds, and its padded outputs are 0."""
    d = 64
    g = torch.Generator().manual_seed(SEED)
    k, v = (torch.randn(2, 2, 6, d, generator=g).to(DEVICE) for _ in range(2))
    q = torch.randn(2, 4, 6, d, generator=g).to(DEVICE)
    real = torch.tensor([[1, 1, 1, 1, 1, 1], [0, 0, 1, 1, 1, 1]])
    padded = kd.MirroredCache(1, 4, 2, d, batch=2, method="subgen", budget=32, sink=4, window=8, device=DEVICE)
    alone = kd.MirroredCache(1, 4, 2, d, batch=1, method="subgen", budget=32, sink=4, window=8, device=DEVICE)
    out = padded.extend(0, k, v, q, 0.125, real=real)
    ref = alone.extend(0, k[1:, :, 2:], v[1:, :, 2:], q[1:, :, 2:], 0.125)
    assert padded.checksum(1) == alone.checksum(0)
    assert torch.equal(out[1, :2], torch.zeros_like(out[1, :2]))
    assert torch.isfinite(out).all() and out[1, 2:].shape == ref[0].shape


def test_threads_share_a_mirrored_cache_without_crashing():
    """Two threads extend one cache (the binding holds its lock while the GIL
    is released): both calls complete, in some order, and the cache holds
    both threads' positions."""
    import threading
    d = 64
    mc = kd.MirroredCache(1, 4, 2, d, batch=2, method="h2o", budget=32, sink=4, window=8, device=DEVICE)
    errors = []

    def worker(seed):
        try:
            g = torch.Generator().manual_seed(seed)
            for _ in range(3):
                k, v = (torch.randn(2, 2, 2, d, generator=g).to(DEVICE) for _ in range(2))
                mc.extend(0, k, v, torch.randn(2, 4, 2, d, generator=g).to(DEVICE), 0.125)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and mc.seen(0) == 12


SMOLLM2_PROMPTS = ("The passkey is 31415. Remember it. What is the passkey? The passkey is",
                   "The capital of France is")
# SmolLM2's 30 layers take the SIMT runtime about 50 s a method: CI runs three (the
# recommended method, one that observes the device's mass, one of the papers');
# KVC_DEVICE_SMOLLM2 names others ("all", or a list; docs/python.md has the run of all 14).
# On a GPU build every method runs.
_SMOL = os.environ.get("KVC_DEVICE_SMOLLM2", "all" if kd.backend() == "gpu" else "sink-window,h2o,balancekv")
SMOLLM2_METHODS = METHODS if _SMOL == "all" else [m for m in _SMOL.split(",") if m]


@pytest.fixture(scope="module")
def smollm2(lm):
    """test_hf's SmolLM2 (tokenizer and f32 model), on the build's device."""
    tok, model, _ = lm
    return tok, model.to(DEVICE)


@pytest.mark.parametrize("method", SMOLLM2_METHODS or [
    pytest.param("none", marks=pytest.mark.skip(reason="KVC_DEVICE_SMOLLM2 names no method"))])
def test_smollm2_generates_the_host_paths_tokens_for_a_padded_batch(smollm2, method):
    """SmolLM2-135M, two left-padded prompts on f16 pages: 32 greedy tokens
    each, equal to the host path's on each prompt alone."""
    tok, model = smollm2
    prompts = [tok(p, return_tensors="pt").input_ids[0] for p in SMOLLM2_PROMPTS]
    kw = method_kwargs(method)
    kw["dtype"] = "f16"
    dev, host, mc, _ = host_and_device_tokens(model, prompts, kw)
    for i in range(len(prompts)):
        assert dev[i] == host[i], f"{method}: sequence {i}: device {tok.decode(dev[i])!r} != host {tok.decode(host[i])!r}"
    print(f"{method}: {tok.decode(dev[0])!r} | {tok.decode(dev[1])!r}")
