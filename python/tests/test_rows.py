"""The row bindings of the vLLM plugin (kvcompress.vllm_backend):
_core.rows_store writes the core's own codes, _core.attend_rows attends a
query group over such rows, causal over the last positions."""
import numpy as np
import pytest

from kvcompress import KvcError, _core

SEED = 20261129


@pytest.mark.parametrize("dtype", ["f16", "int8", "int4"])
def test_causal_attend_equals_each_position_over_its_prefix(dtype):
    """One causal call over n rows for the last 5 positions gives the bits of
    5 calls, each over the rows up to its own position."""
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    d, n, n_pos, group = 64, 40, 5, 3
    rb = _core.row_bytes(dtype, d)
    k, v = (np.empty((n, rb), np.uint8) for _ in range(2))
    _core.rows_store(dtype, rng.standard_normal((n, d), dtype=np.float32), k)
    _core.rows_store(dtype, rng.standard_normal((n, d), dtype=np.float32), v)
    q = rng.standard_normal((n_pos, group, d), dtype=np.float32)
    whole = np.empty_like(q)
    _core.attend_rows(dtype, k, v, q, 0.125, True, whole)
    for p in range(n_pos):
        rows = n - n_pos + p + 1
        one = np.empty((1, group, d), np.float32)
        _core.attend_rows(dtype, k[:rows].copy(), v[:rows].copy(), q[p:p + 1].copy(), 0.125, False, one)
        assert np.array_equal(one[0], whole[p]), f"{dtype}: position {p}"


def test_rows_bindings_refuse_bad_input():
    k = np.zeros((4, _core.row_bytes("int8", 64)), np.uint8)
    with pytest.raises(KvcError, match="NaN"):
        _core.rows_store("int8", np.full((4, 64), np.nan, np.float32), k)
    with pytest.raises(KvcError, match="out wants"):
        _core.rows_store("int8", np.zeros((3, 64), np.float32), k)
    with pytest.raises(KvcError, match="per-token rows"):
        _core.rows_store("kivi4", np.zeros((4, 64), np.float32), k)
    q, out = np.zeros((5, 2, 64), np.float32), np.zeros((5, 2, 64), np.float32)
    with pytest.raises(KvcError, match="n_pos <= n"):
        _core.attend_rows("int8", k, k, q, 0.125, True, out)
    with pytest.raises(KvcError, match="beta"):
        _core.attend_rows("int8", k, k, q[:1], float("nan"), False, out[:1])


@pytest.mark.parametrize("window", [0, 40])
def test_attend_blocks_equals_attend_rows_over_each_requests_kept_tokens(window):
    """The plugin's per-layer attention over vLLM's pool layout
    [blocks][kv heads][block][key | value] gives, per request and kv head,
    the bits of attend_rows over the tokens it keeps: all of them, or (window
    40, sink 4, blocks of 16) the sink block and the blocks from the one
    holding the window's first token of the tokens computed before."""
    rng = np.random.default_rng(SEED)
    d, hkv, group, bs, n_blocks, dtype = 64, 2, 3, 16, 24, "int8"
    rb = _core.row_bytes(dtype, d)
    pool = np.empty((n_blocks, hkv, bs, 2 * rb), np.uint8)
    rows = np.empty((n_blocks * hkv * bs * 2, rb), np.uint8)
    _core.rows_store(dtype, rng.standard_normal((rows.shape[0], d), dtype=np.float32), rows)
    pool[:] = rows.reshape(n_blocks, hkv, bs, 2 * rb)
    lens = np.array([100, 37], np.int32)  # request 0 decodes one token; request 1 prefills 5
    starts = np.array([0, 1, 6], np.int32)
    table = np.zeros((2, 8), np.int32)
    table[0, :7] = rng.permutation(n_blocks)[:7]
    table[1, :3] = rng.permutation(n_blocks)[:3]
    q = rng.standard_normal((6, hkv * group, d), dtype=np.float32)
    out = np.empty_like(q)
    _core.attend_blocks(dtype, pool, table, lens, starts, q, out, 0.125, 4, window)
    for r in range(2):
        n_pos, length = starts[r + 1] - starts[r], lens[r]
        keep = np.arange(length)
        if window:
            first, last = -(-4 // bs), max(-(-4 // bs), (length - n_pos - window + 1) // bs)
            if last > first:
                keep = keep[(keep < first * bs) | (keep >= last * bs)]
        for h in range(hkv):
            tok = pool[table[r, keep // bs], h, keep % bs]
            ref = np.empty((n_pos, group, d), np.float32)
            _core.attend_rows(dtype, tok[:, :rb].copy(), tok[:, rb:].copy(),
                              q[starts[r]:starts[r + 1], h * group:(h + 1) * group].copy(), 0.125, True, ref)
            assert np.array_equal(ref, out[starts[r]:starts[r + 1], h * group:(h + 1) * group]), (r, h)
    bad = table.copy()
    bad[0, 0] = n_blocks
    with pytest.raises(KvcError, match="outside the pool"):
        _core.attend_blocks(dtype, pool, bad, lens, starts, q, out, 0.125, 4, window)
