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
