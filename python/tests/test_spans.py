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


def _cache(**kw):
    from kvcompress import Cache
    return Cache(2, 4, 2, 16, method="sink-window", budget=32, dtype="int8", seed=3,
                 **{"sink": 4, "window": 8, "protect": 25, "protect_radius": 1, **kw})


def _rows(n, seed):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, 2, 16)).astype(np.float32), rng.standard_normal((n, 2, 16)).astype(np.float32))


def test_extend_with_centres_is_append_then_mark_each_token():
    """extend(centres=...) leaves the state that appending token by token and
    marking token t - 1 after token t (Cache.mark's contract) leaves: equal
    checksums, through the pending last mark given at the next append."""
    k, v = _rows(40, 1)
    marks = np.zeros((40, 2), np.uint8)
    marks[12:15, 0] = 1
    marks[20:22] = 1
    fast, slow = _cache(), _cache()
    for layer in range(2):
        fast.extend(layer, k[:39], v[:39], centres=marks[:39])
        fast.append(layer, k[39], v[39])
        for t in range(40):
            slow.append(layer, k[t], v[t])
            if t > 0:
                for h in range(2):
                    slow.mark(layer, h, t - 1, bool(marks[t - 1, h]))
    assert fast.checksum() == slow.checksum()
    plain = _cache()  # and the marks did something: the key-outlier test's state differs
    for layer in range(2):
        plain.extend(layer, k, v)
    assert plain.checksum() != fast.checksum()


def test_extend_centres_one_row_per_token_go_to_every_head():
    k, v = _rows(30, 2)
    one = np.zeros(30, bool)
    one[10:13] = True
    a, b = _cache(), _cache()
    a.extend(0, k, v, centres=one)
    b.extend(0, k, v, centres=np.repeat(one[:, None], 2, axis=1).astype(np.uint8))
    assert a.checksum() == b.checksum()


def test_extend_centres_refusals_change_nothing():
    from kvcompress import Cache
    k, v = _rows(20, 3)
    c = _cache()
    before = c.checksum()
    with pytest.raises(TypeError):
        c.extend(0, k, v, centres=[0] * 20)  # a list: the type is checked, never guessed
    with pytest.raises(TypeError):
        c.extend(0, k, v, centres=np.zeros(20, np.int64))
    with pytest.raises(ValueError):
        c.extend(0, k, v, centres=np.zeros(19, np.uint8))
    with pytest.raises(ValueError):
        c.extend(0, k, v, centres=np.full(20, 2, np.uint8))
    assert c.checksum() == before
    bare = Cache(2, 4, 2, 16, method="sink-window", budget=64, dtype="int8", sink=4, window=8)
    before = bare.checksum()
    with pytest.raises(KvcError, match="protected spans"):
        bare.extend(0, k, v, centres=np.zeros(20, np.uint8))
    assert bare.checksum() == before


def test_plan_gives_what_spans_choose_wants():
    from kvcompress import spans_choose, sentence_ends
    p = _cache().plan
    # sink-window gives the budget left after sinks and spans to its window
    assert p["n_sink"] == 4 and p["n_protect"] == 8 and p["protect_radius"] == 1
    assert p["n_sink"] + p["n_window"] + p["n_protect"] + 1 + p["method_tokens"] == 32
    ends = sentence_ends(["a", " b", ".", " c", "!", " d", " e"])
    assert ends.tolist() == [3, 5, 7]
    marks = spans_choose(np.array([0, 0, 0, 9, 9, 1, 1], np.float32), ends, first=0, budget=4,
                         radius=p["protect_radius"])
    assert marks.tolist() == [0, 0, 0, 1, 1, 0, 0]


def test_sentence_ends_splits_at_a_surprising_capitalised_word():
    """A needle cut into a sentence ("... works are The pass key is 1.") is
    a span of its own when its capitalised first word is surprising (above
    mean + 1.5 sd of the prompt's surprisal); an unsurprising capital is not
    a split, nor is a surprising lower-case word."""
    from kvcompress import sentence_ends
    text = [" the", " works", " are", " The", " pass", " key", " is", " 1", ".", " Then", " more", " text", "."]
    s = np.array([0, 1, 1, 1, 9, 8, 7, 2, 3, 1, 1, 9, 1], np.float32)
    assert sentence_ends(text).tolist() == [9, 13]
    # s[1:]: mean 3.67, sd 3.32, the bar 8.65; " The" (1) is below it
    assert sentence_ends(text, s).tolist() == [9, 13]
    s[3] = 14  # " The" surprising (the bar moves to 11.1): the needle starts a span; " text" (9, lower case) not
    assert sentence_ends(text, s).tolist() == [3, 9, 13]
    with pytest.raises(ValueError):
        sentence_ends(text, s[:5])
    s[0] = np.nan
    with pytest.raises(ValueError):
        sentence_ends(text, s)
