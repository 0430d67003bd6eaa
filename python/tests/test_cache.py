"""kvcompress's Python layer over the C core. Seeds are fixed and printed in
the test names' parameters; the tolerance of the exact-attention check is
derived from f32 rounding (see exact_tolerance)."""
import math
import pathlib
import re

import numpy as np
import pytest

import kvcompress

U = 2.0 ** -24  # f32 unit roundoff
SEED = 20261126
ROOT = pathlib.Path(__file__).resolve().parents[2]


def rows(rng, n, d, scale=1.0):
    return (scale * rng.standard_normal((n, d))).astype(np.float32)


def exact_tolerance(q, K, V, beta):
    """|out - ref| per query head, for f32 rows summed in f32 by the best kernel table:
    score error dx_i <= beta (d + 3) u sum_c |q_c k_ic| + 3u |x_i|, weight error
    eta <= 2 dx_max + u |x_i - m| + 6u, sums (n + 16) u each; out moves by at most
    (2 eta + 2 (n + 16) u) * max |v| + u |out| (the final rounding)."""
    d, n = q.shape[-1], K.shape[0]
    x = beta * (K.astype(np.float64) @ q.astype(np.float64))
    dx = beta * (d + 3) * U * (np.abs(K.astype(np.float64)) @ np.abs(q.astype(np.float64))) + 3 * U * np.abs(x)
    m = x.max()
    eta = 2 * dx.max() + U * np.abs(x - m).max() + 6 * U
    vmax = np.abs(V).max()
    return (2 * eta + 2 * (n + 16) * U) * vmax + U * vmax


def reference(q, K, V, beta):
    x = beta * (K.astype(np.float64) @ q.astype(np.float64))
    p = np.exp(x - x.max())
    return (p @ V.astype(np.float64)) / p.sum()


def test_methods_come_from_the_registry():
    ms = kvcompress.methods()
    names = [m["name"] for m in ms]
    assert len(names) == len(set(names)) >= 13
    for m in ms:
        for p in m["params"]:
            assert p["type"] in ("int", "float", "choice") and p["help"]
            if p["type"] != "choice":
                assert p["min"] <= p["max"]
    assert {"f32", "f16", "int8"} <= set(kvcompress.dtypes())


@pytest.mark.parametrize("n_heads,n_kv_heads,d,n", [(8, 2, 64, 300), (4, 4, 32, 77)])
def test_exact_equals_softmax_attention(n_heads, n_kv_heads, d, n):
    rng = np.random.default_rng(SEED)
    cache = kvcompress.Cache(2, n_heads, n_kv_heads, d, method="exact", budget=n, dtype="f32")
    K, V = rows(rng, n * n_kv_heads, d, 1.5).reshape(n, n_kv_heads, d), rows(rng, n * n_kv_heads, d).reshape(n, n_kv_heads, d)
    for t in range(n):
        cache.append(1, K[t], V[t])
    q = rows(rng, n_heads, d)
    out = cache.attend(1, q)
    beta = 1.0 / math.sqrt(d)
    g = n_heads // n_kv_heads
    worst = 0.0
    for h in range(n_heads):
        kv = h // g
        ref = reference(q[h], K[:, kv], V[:, kv], beta)
        tol = exact_tolerance(q[h], K[:, kv], V[:, kv], beta)
        err = np.abs(out[h] - ref).max()
        worst = max(worst, err / tol)
        assert err <= tol, (h, err, tol)
    print(f"seed {SEED}: worst error / derived tolerance {worst:.3g}")


@pytest.mark.parametrize("method", [m["name"] for m in kvcompress.methods()])
def test_every_method_and_type_runs(method):
    rng = np.random.default_rng(SEED)
    for dtype in kvcompress.dtypes():
        try:
            cache = kvcompress.Cache(1, 4, 2, 32, method=method, budget=48, dtype=dtype)
        except kvcompress.KvcError as e:  # a combination the core refuses says why
            assert e.code < 0 and e.message
            continue
        for _ in range(40 if method == "exact" else 120):
            cache.append(0, rows(rng, 2, 32), rows(rng, 2, 32))
        out = cache.attend(0, rows(rng, 4, 32))
        assert out.shape == (4, 32) and np.isfinite(out).all()
        assert 0 < cache.usage()["bytes"] <= cache.nbytes


def test_budget_spellings():
    kw = dict(method="sink-window", dtype="int8")
    assert kvcompress.Cache(1, 2, 1, 64, budget=256, **kw).budget == 256
    assert kvcompress.Cache(1, 2, 1, 64, budget="256", **kw).budget == 256
    assert kvcompress.Cache(1, 2, 1, 64, budget="25%", context=1000, **kw).budget == 250
    f16 = kvcompress.Cache(1, 2, 1, 64, method="exact", dtype="f16", budget=1000)
    quarter = kvcompress.Cache(1, 2, 1, 64, budget="25%f16", context=1000, **kw)
    assert quarter.nbytes <= 0.25 * f16.nbytes * 1.01  # the cache header is outside the share
    for spelled, whole in (("64KiB", 64 * 1024), ("20000B", 20000), ("1.5MiB", 1.5 * 2**20)):
        small = kvcompress.Cache(2, 2, 1, 64, budget=spelled, **kw)  # the whole cache, its header included
        assert small.nbytes <= whole
        assert kvcompress.Cache(2, 2, 1, 64, budget=small.budget + 1, **kw).nbytes > whole  # and the largest
    with pytest.raises(ValueError):
        kvcompress.Cache(1, 2, 1, 64, budget="25%", **kw)  # a share needs the context
    with pytest.raises(ValueError):
        kvcompress.Cache(1, 2, 1, 64, budget="lots", **kw)
    with pytest.raises(ValueError, match="too few"):  # 2,500 B a stream: less than the 32 sinks' rows
        kvcompress.Cache(2, 2, 1, 64, budget="5000B", **kw)


def test_snapshot_round_trip_and_corruption():
    rng = np.random.default_rng(SEED)
    cache = kvcompress.Cache(2, 4, 2, 32, budget=64)
    for _ in range(100):
        for layer in range(2):
            cache.append(layer, rows(rng, 2, 32), rows(rng, 2, 32))
    q = rows(rng, 4, 32)
    back = kvcompress.Cache.from_bytes(cache.to_bytes())
    assert back.checksum() == cache.checksum() and back.shape == cache.shape
    assert np.array_equal(back.attend(1, q), cache.attend(1, q))
    snap = bytearray(cache.to_bytes())
    snap[8] ^= 0x40  # a header field
    with pytest.raises(kvcompress.KvcError) as e:
        kvcompress.Cache.from_bytes(bytes(snap))
    assert e.value.code < 0


def test_bad_input_raises_and_leaves_the_cache_unchanged():
    rng = np.random.default_rng(SEED)
    cache = kvcompress.Cache(1, 4, 2, 32, budget=64)
    cache.append(0, rows(rng, 2, 32), rows(rng, 2, 32))
    before = cache.checksum()
    with pytest.raises(kvcompress.KvcError) as e:
        cache.append(0, rows(rng, 3, 32), rows(rng, 2, 32))
    assert e.value.code == -1 and "k:" in e.value.message
    with pytest.raises(kvcompress.KvcError):
        cache.append(5, rows(rng, 2, 32), rows(rng, 2, 32))  # no layer 5
    k = rows(rng, 2, 32)
    k[0, 3] = np.nan
    with pytest.raises(kvcompress.KvcError):
        cache.append(0, k, rows(rng, 2, 32))
    assert cache.checksum() == before
    with pytest.raises(kvcompress.KvcError) as e:
        kvcompress.Cache(1, 4, 2, 32, method="no-such-method")
    assert e.value.code == -1


def test_marks_decide_span_centres_and_refusals_change_nothing():
    """Cache.mark (kvc_cache_mark): a window token's centre flag is the
    caller's to set; a token outside the window, or a cache without protected
    spans, raises KvcError and leaves the bytes as they were."""
    rng = np.random.default_rng(SEED)
    cache = kvcompress.Cache(1, 2, 1, 16, method="uniform", budget=120, dtype="f32", protect=25, protect_radius=2)
    for _ in range(50):
        cache.append(0, rows(rng, 1, 16), rows(rng, 1, 16))
    cache.mark(0, 0, 48, True)
    marked = cache.checksum()
    cache.mark(0, 0, 48, False)
    assert cache.checksum() != marked  # one flag byte differs
    cache.mark(0, 0, 48)  # centre defaults to True
    assert cache.checksum() == marked
    for token in (49, 50, 5000):  # pending, not appended yet
        with pytest.raises(kvcompress.KvcError) as e:
            cache.mark(0, 0, token)
        assert e.value.code == -1 and cache.checksum() == marked
    with pytest.raises(kvcompress.KvcError) as e:
        cache.mark(0, 1, 48)  # no kv head 1
    assert e.value.code == -1 and cache.checksum() == marked
    plain = kvcompress.Cache(1, 2, 1, 16, method="uniform", budget=120, dtype="f32")
    for _ in range(50):
        plain.append(0, rows(rng, 1, 16), rows(rng, 1, 16))
    with pytest.raises(kvcompress.KvcError) as e:
        plain.mark(0, 0, 48)
    assert e.value.code == -6  # KVC_E_UNSUPPORTED: no protected spans


def test_prompt_extend_equals_appends_and_loads_offline_balancekv():
    """extend(layer, k, v) without queries is one kvc_cache_prefill: for a
    method without a whole-prompt form it ends in the bytes token-by-token
    appends reach; balancekv-prefill with bkv_mode="offline" compresses its
    prompt there (plain appends of that prompt are refused), then decodes."""
    rng = np.random.default_rng(SEED)
    n, kv = 600, 2
    k, v = rows(rng, n * kv, 16).reshape(n, kv, 16), rows(rng, n * kv, 16).reshape(n, kv, 16)
    whole = kvcompress.Cache(1, 4, kv, 16, method="uniform", budget=100, dtype="int8")
    steps = kvcompress.Cache(1, 4, kv, 16, method="uniform", budget=100, dtype="int8")
    whole.extend(0, k, v)
    for t in range(n):
        steps.append(0, k[t], v[t])
    assert whole.checksum() == steps.checksum()
    offline = kvcompress.Cache(2, 4, kv, 16, method="balancekv-prefill", budget=100, dtype="int8",
                               prefix_len=n, bkv_mode="offline")
    for layer in range(2):
        offline.extend(layer, k, v)
    for t in range(400):  # decoding after the prompt never stops (a uniform tail)
        offline.append(0, k[t], v[t])
    out = offline.attend(0, rows(rng, 4, 16))
    assert np.all(np.isfinite(out))
    plain = kvcompress.Cache(1, 4, kv, 16, method="balancekv-prefill", budget=100, dtype="int8",
                             prefix_len=n, bkv_mode="offline")
    with pytest.raises(kvcompress.KvcError) as e:
        for t in range(n):
            plain.append(0, k[t], v[t])
    assert e.value.code == -5  # KVC_E_CAPACITY: the method takes its prompt only whole


def test_torch_tensors_pass():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(SEED)
    a = kvcompress.Cache(1, 4, 2, 32, budget=64)
    b = kvcompress.Cache(1, 4, 2, 32, budget=64)
    for _ in range(50):
        k, v = rows(rng, 2, 32), rows(rng, 2, 32)
        a.append(0, k, v)
        b.append(0, torch.from_numpy(k), torch.from_numpy(v))
    q = rows(rng, 4, 32)
    assert np.array_equal(a.attend(0, q), b.attend(0, torch.from_numpy(q)))


def test_readme_python_quick_start_runs_as_written():
    text = (ROOT / "README.md").read_text()
    m = re.search(r"```python\n(.*?)```", text, re.S)
    assert m, "README.md has no Python quick start"
    code = m.group(1)
    assert len(code.strip().splitlines()) <= 10
    exec(compile(code, "README.md", "exec"), {})
