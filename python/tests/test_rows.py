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


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("freed", [False, True])
def test_attend_blocks_equals_attend_rows_over_each_requests_kept_tokens(freed, threads):
    """The plugin's per-layer attention over vLLM's pool layout
    [blocks][kv heads][block][key | value] gives, per request and kv head,
    the bits of attend_rows over the tokens it keeps: all of them, or (freed)
    those of the blocks whose id is not -1 (blocks 1, 2 and 4 of request 0,
    the engine's evicted ones), whether one thread or several share the
    (request, kv head) items out (8 of them per helper thread: 3 threads
    use 2 here)."""
    rng = np.random.default_rng(SEED)
    d, hkv, group, bs, n_blocks, dtype = 64, 8, 3, 16, 48, "int8"
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
    read = table.copy()
    if freed:
        read[0, [1, 2, 4]] = -1
    q = rng.standard_normal((6, hkv * group, d), dtype=np.float32)
    out = np.empty_like(q)
    _core.attend_blocks(dtype, pool, read, lens, starts, q, out, 0.125, threads)
    for r in range(2):
        n_pos, length = starts[r + 1] - starts[r], lens[r]
        keep = np.arange(length)
        keep = keep[read[r, keep // bs] >= 0]
        assert len(keep) == (length - 3 * bs if freed and r == 0 else length)
        for h in range(hkv):
            tok = pool[table[r, keep // bs], h, keep % bs]
            ref = np.empty((n_pos, group, d), np.float32)
            _core.attend_rows(dtype, tok[:, :rb].copy(), tok[:, rb:].copy(),
                              q[starts[r]:starts[r + 1], h * group:(h + 1) * group].copy(), 0.125, True, ref)
            assert np.array_equal(ref, out[starts[r]:starts[r + 1], h * group:(h + 1) * group]), (r, h)
    bad = read.copy()
    bad[0, 0] = n_blocks
    with pytest.raises(KvcError, match="outside the pool"):
        _core.attend_blocks(dtype, pool, bad, lens, starts, q, out, 0.125, threads)
    bad = read.copy()
    bad[0, 6] = -1  # the block of request 0's query
    with pytest.raises(KvcError, match="own block"):
        _core.attend_blocks(dtype, pool, bad, lens, starts, q, out, 0.125, threads)
    with pytest.raises(KvcError, match="threads"):
        _core.attend_blocks(dtype, pool, read, lens, starts, q, out, 0.125, 0)


def test_outlier_flags_per_head_and_continued():
    """_core.outlier_flags over (n, heads, d) keys gives each head the flags
    of that head's keys alone, and two calls (the second with the first's
    last 32 keys as context) give those of one call; the planted needle is
    flagged in every head. Refusals change neither state nor flags."""
    rng = np.random.default_rng(SEED)
    print(f"seed {SEED}")
    n, h, d, needle = 300, 3, 64, 200
    keys = (0.3 * rng.standard_normal((n, h, d))).astype(np.float32)
    keys[:, :, 0] += 3.0
    keys[needle, :, 0] -= 6.0
    state, flags = np.zeros((h, 3)), np.zeros((n, h), np.uint8)
    _core.outlier_flags(keys, np.zeros((0, h, d), np.float32), state, flags)
    assert flags[needle].all()
    for j in range(h):
        one_state, one = np.zeros((1, 3)), np.zeros((n, 1), np.uint8)
        _core.outlier_flags(keys[:, j:j + 1].copy(), np.zeros((0, 1, d), np.float32), one_state, one)
        assert np.array_equal(one[:, 0], flags[:, j]) and np.array_equal(one_state[0], state[j])
    split_state, first, second = np.zeros((h, 3)), np.zeros((150, h), np.uint8), np.zeros((n - 150, h), np.uint8)
    _core.outlier_flags(keys[:150].copy(), np.zeros((0, h, d), np.float32), split_state, first)
    _core.outlier_flags(keys[150:].copy(), keys[118:150].copy(), split_state, second)
    assert np.array_equal(np.concatenate([first, second]), flags)
    np.testing.assert_allclose(split_state, state, rtol=1e-12)
    before, flags_before = state.copy(), flags.copy()
    bad = keys.copy()
    bad[5, 2, 7] = np.inf
    with pytest.raises(KvcError, match="NaN or Inf"):
        _core.outlier_flags(bad, np.zeros((0, h, d), np.float32), state, flags)
    with pytest.raises(KvcError, match="context"):
        _core.outlier_flags(keys, np.zeros((33, h, d), np.float32), state, flags)
    assert np.array_equal(state, before) and np.array_equal(flags, flags_before)


@pytest.mark.parametrize("dtype", ["f16", "int8", "int4"])
def test_rows_store_slots_writes_rows_stores_codes_at_the_slots(dtype):
    """_core.rows_store_slots puts, for each token with a slot, the codes
    rows_store makes of its key (half 0) or value (half 1) of every kv head
    at [slot // block, head, slot % block] of vLLM's pool layout, and
    nothing else: padding (slot -1) and the other half stay as they were.
    Refusals write nothing."""
    rng = np.random.default_rng(SEED)
    d, h, bs, n_blocks, n = 64, 3, 16, 6, 9
    rb = _core.row_bytes(dtype, d)
    pool = rng.integers(0, 256, (n_blocks, h, bs, 2 * rb), dtype=np.uint8)
    x = rng.standard_normal((n, h, d), dtype=np.float32)
    slots = rng.permutation(n_blocks * bs)[:n].astype(np.int64)
    slots[4] = -1
    for half in (0, 1):
        before = pool.copy()
        _core.rows_store_slots(dtype, x, pool, slots, half)
        expect = before.copy()
        for i in range(n):
            if slots[i] < 0:
                continue
            rows = np.empty((h, rb), np.uint8)
            _core.rows_store(dtype, x[i], rows)
            expect[slots[i] // bs, :, slots[i] % bs, half * rb:(half + 1) * rb] = rows
        assert np.array_equal(pool, expect), half
    before = pool.copy()
    bad = x.copy()
    bad[7, 1, 3] = np.nan
    with pytest.raises(KvcError, match="NaN"):
        _core.rows_store_slots(dtype, bad, pool, slots, 0)
    far = slots.copy()
    far[8] = n_blocks * bs
    with pytest.raises(KvcError, match="outside the pool"):
        _core.rows_store_slots(dtype, x, pool, far, 0)
    with pytest.raises(KvcError, match="half 0 or 1"):
        _core.rows_store_slots(dtype, x, pool, slots, 2)
    assert np.array_equal(pool, before)
