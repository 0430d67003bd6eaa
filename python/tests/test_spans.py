"""_core.spans_choose (kvc_spans_choose): whole spans for the protected rows
from per-token scores, as the press and a decoder call it."""
import numpy as np
import pytest

from kvcompress import KvcError, _core


def test_spans_by_falling_mean_within_the_budget():
    """Three sentences of means 1, 3 and 2: with room for 6 tokens and radius
    1 the second (3 tokens + 2) is taken, the third (2 + 2) no longer fits,
    the first is in the sinks; nothing else is marked."""
    scores = np.array([1, 1, 3, 3, 3, 2, 2, 0], np.float32)
    ends = np.array([2, 5, 7, 8], np.uint32)
    marks = np.full(8, 9, np.uint8)
    _core.spans_choose(scores, ends, 1, 6, 1, marks)
    assert marks.tolist() == [0, 0, 1, 1, 1, 0, 0, 0]
    _core.spans_choose(scores, ends, 1, 9, 1, marks)  # room for both
    assert marks.tolist() == [0, 0, 1, 1, 1, 1, 1, 0]


def test_spans_refusals_write_nothing():
    scores = np.array([1, np.nan, 3], np.float32)
    marks = np.full(3, 9, np.uint8)
    with pytest.raises(KvcError):
        _core.spans_choose(scores, np.array([1, 3], np.uint32), 0, 5, 0, marks)
    with pytest.raises(KvcError):
        _core.spans_choose(np.zeros(3, np.float32), np.array([2, 2], np.uint32), 0, 5, 0, marks)
    with pytest.raises(KvcError, match="as long as"):
        _core.spans_choose(np.zeros(3, np.float32), np.array([3], np.uint32), 0, 5, 0, marks[:2])
    assert marks.tolist() == [9, 9, 9]
