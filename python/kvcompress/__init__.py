"""kvcompress: a language model's KV cache in a fixed number of bytes, with a
bounded attention error, from the project's C core (docs/python.md).

    import numpy as np, kvcompress
    cache = kvcompress.Cache(n_layers=2, n_heads=8, n_kv_heads=2, head_dim=64, budget=256)
    cache.append(0, k, v)          # k, v: (n_kv_heads, head_dim) float32, numpy or torch (CPU)
    out = cache.attend(0, q)       # q: (n_heads, head_dim) -> (n_heads, head_dim)

The defaults are the project's recommended configuration: sink-window with
int8 rows (docs/quality.md, "At equal bytes"). Every method, storage type and
budget spelling of the command line is accepted.
"""
from __future__ import annotations

from typing import Any, Optional, Union

import re

import numpy as np

from . import _core

__all__ = ["Cache", "KvcError", "methods", "dtypes", "RECOMMENDED", "sentence_ends", "spans_choose"]
# kvcompress.hf (transformers' Cache and attention, the kvpress press) imports
# torch and transformers: it is loaded only when asked for.
__version__ = "0.1.0"


class KvcError(RuntimeError):
    """A status of the C library that is not KVC_OK.

    Attributes: ``code`` (the kvc_status value, e.g. -1 for KVC_E_ARG) and
    ``message`` (what failed and kvc_status_str's sentence)."""

    @property
    def code(self) -> int:
        return int(self.args[0])

    @property
    def message(self) -> str:
        return str(self.args[1])

    def __str__(self) -> str:
        return f"{self.message} (kvc_status {self.code})"


_core.set_error_class(KvcError)

#: The project's recommended compressed cache (docs/quality.md).
RECOMMENDED = {"method": "sink-window", "dtype": "int8"}


def methods() -> list[dict[str, Any]]:
    """Every method of the registry: name, summary, kvpress name (or None),
    whether it observes attention, and its parameters (name, type, min, max,
    choices, default, help) as the command line spells them."""
    return _core.methods()


def dtypes() -> list[str]:
    """The storage types this build implements ("f32", "f16", "int8", ...)."""
    return _core.dtypes()


def _param_list(params: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for name, value in params.items():
        out += [name.replace("_", "-"), str(value)]
    return out


def _budget_tokens(budget: Union[int, str], *, method: str, dtype: str, head_dim: int, n_streams: int,
                   context: Optional[int], params: list[str]) -> int:
    """Tokens per (layer, kv head) stream for one of the command line's budget
    spellings: N tokens, P% of the context, P%f16 of an f16 exact cache's
    bytes for the context, or N{B,KiB,MiB,GiB} for the whole cache."""
    if isinstance(budget, (int, np.integer)) and not isinstance(budget, bool):
        return int(budget)
    if not isinstance(budget, str):
        raise TypeError(f"budget: want an int or a string, got {type(budget).__name__}")
    # the core's grammar, the command line's (kvc_budget.h): ValueError names what is wrong
    tokens, nbytes = _core.budget_per_stream(budget, head_dim, context or 0, n_streams)
    if tokens:
        return int(tokens)
    got = int(_core.stream_budget_for_bytes(method, dtype, head_dim, nbytes, params))
    if got == 0:  # as the command line says it (kvc_budget_resolve)
        raise ValueError(f"budget {budget!r} gives {nbytes} B per stream, too few for any {method} budget in "
                         f"{dtype} rows (its sinks, window and spans included)")
    return got


def _whole_cache_bytes(budget: Union[int, str]) -> Optional[float]:
    """The bytes of a whole-cache spelling ("96KiB", "4096B"), else None."""
    if not isinstance(budget, str):
        return None
    m = re.fullmatch(r"([0-9]+(?:\.[0-9]*)?(?:[eE][0-9]+)?)(B|KiB|MiB|GiB)", budget.strip())
    if m is None:
        return None
    return float(m.group(1)) * {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[m.group(2)]


def _as_rows(x: Any, name: str) -> np.ndarray:
    """float32, C-contiguous, on the CPU: no copy when it already is one."""
    if hasattr(x, "detach"):  # a torch tensor
        x = x.detach()
        if getattr(x, "device", None) is not None and x.device.type != "cpu":
            raise ValueError(f"{name}: a {x.device.type} tensor; this build attends on the CPU")
        x = x.float().numpy()  # float() is the tensor itself when it is float32
    return np.ascontiguousarray(x, dtype=np.float32)


def _index(x: Any, name: str) -> int:
    """A layer, head or token index: an int (not a bool, which Python would
    take as 0 or 1)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"{name}: want an int, got {type(x).__name__}")
    return int(x)


def _check_out(out: Any, shape: tuple, name: str, *inputs: np.ndarray) -> None:
    """``out`` is written in place by C: a float32, C-contiguous, writeable
    array of exactly ``shape`` that shares no memory with the inputs.
    Anything else is refused (never converted: a converted copy would be
    written and the caller's array left untouched)."""
    if isinstance(out, np.ndarray):
        if out.dtype != np.float32:
            raise TypeError(f"{name}: dtype {out.dtype}; want float32 (written in place, never converted)")
        if not out.flags.c_contiguous:
            raise ValueError(f"{name}: not C-contiguous (a strided or Fortran-order array cannot be written in place)")
        if not out.flags.writeable:
            raise ValueError(f"{name}: read-only")
        for x in inputs:
            if np.may_share_memory(out, x):
                raise ValueError(f"{name}: shares memory with an input")
    elif hasattr(out, "detach") and hasattr(out, "is_contiguous"):  # a torch tensor
        if str(out.dtype) != "torch.float32":
            raise TypeError(f"{name}: dtype {out.dtype}; want torch.float32 (written in place, never converted)")
        if out.device.type != "cpu":
            raise ValueError(f"{name}: a {out.device.type} tensor; this build attends on the CPU")
        if not out.is_contiguous():
            raise ValueError(f"{name}: not contiguous")
    else:
        raise TypeError(f"{name}: want a numpy array (or a CPU torch tensor), got {type(out).__name__}")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"{name}: shape {tuple(out.shape)}; want {tuple(shape)}")


def _centres(x: Any, n: int, n_kv_heads: int) -> np.ndarray:
    """extend's centres as (n, n_kv_heads) uint8 0/1: checked, never guessed."""
    if not isinstance(x, np.ndarray) or x.dtype not in (np.bool_, np.uint8):
        raise TypeError(f"centres: want a bool or uint8 numpy array, got {type(x).__name__} "
                        f"{getattr(x, 'dtype', '')}".rstrip())
    if x.ndim == 1:
        x = np.repeat(x[:, None], n_kv_heads, axis=1)
    if x.shape != (n, n_kv_heads):
        raise ValueError(f"centres: want ({n},) or ({n}, {n_kv_heads}), got {x.shape}")
    x = np.ascontiguousarray(x.astype(np.uint8, copy=False))
    if x.size and x.max() > 1:
        raise ValueError("centres: want 0 or 1")
    return x


def sentence_ends(token_texts: Any, surprisal: Any = None, split_sigma: float = 1.5) -> np.ndarray:
    """Span ends for ``spans_choose`` from each token's text: a token whose
    text holds ``.``, ``!``, ``?`` or a line break ends a sentence; the last
    span ends at the last token. (n,) texts -> (spans,) uint32, strictly
    increasing, the last equal to n.

    With ``surprisal`` (n,), a span also starts at a capitalised word (a
    token that is a space and an ASCII capital letter on) whose surprisal is
    above the prompt's mean by more than ``split_sigma`` standard deviations
    (token 0 left out of both): text inserted mid-sentence (a needle cut
    into prose) then is a span of its own instead of diluting its mean with
    the sentence it interrupts (docs/quality.md, "Prose at KVzip's level").
    The C core's ``kvc_sentence_ends`` does the work."""
    texts = [str(t) for t in token_texts]
    if not texts:
        raise ValueError("sentence_ends: no tokens")
    s = None
    if surprisal is not None:
        s = np.ascontiguousarray(np.asarray(surprisal, dtype=np.float32))
        if s.shape != (len(texts),):
            raise ValueError(f"sentence_ends: surprisal of shape {s.shape} for {len(texts)} tokens")
        if not np.isfinite(s).all():
            raise ValueError("sentence_ends: a surprisal is not finite")
    return _core.sentence_ends(texts, s, float(split_sigma))


def spans_choose(scores: Any, span_end: Any, *, first: int, budget: int, radius: int) -> np.ndarray:
    """Whole spans for the protected rows by per-token scores (kvc_spans_choose,
    allocation-free in C): spans by falling mean score, each taken while its
    tokens plus 2 * radius fit in what is left of ``budget``; spans starting
    before ``first`` (the sinks) skipped. scores (n,) finite, span_end as
    ``sentence_ends`` gives. Returns (n,) uint8 marks, 1 on the chosen spans'
    tokens: ``Cache.extend``'s centres. ``Cache.plan`` gives first
    (``n_sink``), budget (``n_protect``) and radius (``protect_radius``)."""
    sc = np.ascontiguousarray(np.asarray(scores, dtype=np.float32))
    ends = np.ascontiguousarray(np.asarray(span_end, dtype=np.uint32))
    if sc.ndim != 1 or ends.ndim != 1:
        raise ValueError("spans_choose: scores and span_end are 1-D")
    marks = np.zeros(sc.shape[0], dtype=np.uint8)
    _core.spans_choose(sc, ends, int(first), int(budget), int(radius), marks)
    return marks


def _check_finite(x: np.ndarray, name: str, rows_per_token: int) -> None:
    """KvcError(KVC_E_NONFINITE) naming the first token with a NaN or Inf,
    before anything is appended."""
    bad = ~np.isfinite(x.reshape(x.shape[0], -1)).all(axis=1)
    if bad.any():
        t = int(np.argmax(bad))
        raise KvcError(-4, f"extend: {name} of token {t} holds a NaN or Inf; nothing was appended")


class Cache:
    """A KV cache for ``n_layers`` x ``n_kv_heads`` streams, each keeping at
    most ``budget`` tokens by ``method`` in ``dtype`` rows, in one arena of
    ``nbytes`` bytes fixed at construction.

    Parameters
    ----------
    n_layers, n_heads, n_kv_heads, head_dim : model shape (n_heads a multiple of n_kv_heads).
    method : a registry name (``kvcompress.methods()``), default "sink-window".
    budget : tokens per stream (int or "512"), "25%" of ``context``, "25%f16" of an
        f16 exact cache's bytes for ``context``, or bytes of the whole cache ("96KiB":
        ``nbytes`` stays within them, the cache's own header included).
    context : tokens the caller will append (for the share spellings).
    dtype : storage type, default "int8" (``kvcompress.dtypes()``).
    seed : the counter-based generator's seed (randomised methods).
    **params : method parameters by their command-line names ("subgen_t" or "subgen-t").

    Threads: every method holds the object's lock for its whole call (the C
    core runs without the GIL), so calls on one Cache from several threads
    take turns; different Caches run in parallel (docs/threads.md).
    """

    def __init__(self, n_layers: int, n_heads: int, n_kv_heads: int, head_dim: int, *,
                 method: str = RECOMMENDED["method"], budget: Union[int, str] = 1024,
                 context: Optional[int] = None, dtype: str = RECOMMENDED["dtype"], seed: int = 1,
                 **params: Any) -> None:
        plist = _param_list(params)
        tokens = _budget_tokens(budget, method=method, dtype=dtype, head_dim=head_dim,
                                n_streams=n_layers * n_kv_heads, context=context, params=plist)
        self._c = _core.Cache(n_layers, n_heads, n_kv_heads, head_dim, method, tokens, dtype, seed, plist)
        # bytes of the whole cache ("96KiB"): the streams get an even share, and
        # the cache's own header (its stream table) must fit too: one token
        # fewer per stream frees more than the header takes
        whole = _whole_cache_bytes(budget)
        while whole is not None and self._c.arena_bytes() > whole and tokens > 1:
            tokens -= 1
            self._c = _core.Cache(n_layers, n_heads, n_kv_heads, head_dim, method, tokens, dtype, seed, plist)
        self.method, self.dtype, self.budget = method, dtype, tokens

    @classmethod
    def from_bytes(cls, snapshot: bytes) -> "Cache":
        """A cache restored from ``to_bytes()``'s snapshot (validated first:
        a corrupted snapshot raises KvcError, it is never used)."""
        self = cls.__new__(cls)
        self._c = _core.Cache(bytes(snapshot))
        self.method, self.dtype, self.budget = self._c.method, self._c.dtype, self._c.budget
        return self

    def to_bytes(self) -> bytes:
        """The whole arena: the cache, position-independent and portable."""
        return self._c.snapshot()

    def append(self, layer: int, k: Any, v: Any) -> None:
        """Appends one token's keys and values of ``layer``: (n_kv_heads, head_dim) each."""
        self._c.append(_index(layer, "layer"), _as_rows(k, "k"), _as_rows(v, "v"))

    def attend(self, layer: int, q: Any, out: Optional[np.ndarray] = None) -> np.ndarray:
        """Attention of ``layer`` for one position: q (n_heads, head_dim) -> (n_heads, head_dim) float32.
        ``out``, if given, is a C-contiguous, writeable float32 array of that
        shape, written in place (anything else raises TypeError or ValueError:
        it is never converted)."""
        layer = _index(layer, "layer")
        qr = _as_rows(q, "q")
        shape = (self._c.n_heads, self._c.head_dim)
        if out is None:
            out = np.empty(shape, dtype=np.float32)
        else:
            _check_out(out, shape, "out", qr)
        self._c.attend(layer, qr, out)
        return out

    def extend(self, layer: int, k: Any, v: Any, q: Any = None, out: Optional[np.ndarray] = None,
               centres: Any = None) -> Optional[np.ndarray]:
        """Appends ``n`` tokens of ``layer`` in order: k, v (n, n_kv_heads, head_dim).
        With ``q`` (n, n_heads, head_dim), each token's queries attend right after
        the token is appended (a prompt read through the cache, causal by
        construction) and the (n, n_heads, head_dim) outputs are returned
        (written into ``out`` when given). One call into C for the whole prompt.
        The methods that score the attention they receive (H2O, TOVA) see it.
        Without ``q`` the tokens go in as one prompt (kvc_cache_prefill): the
        same state as appending them one by one, except that balancekv-prefill
        with ``bkv-mode="offline"`` compresses its part of the prompt there, as
        BalanceKV's authors do (that mode needs its prompt this way).

        ``centres`` (n,) or (n, n_kv_heads), bool or uint8 0/1: which tokens
        are protected-span centres (``mark`` for each token and head, in place
        of the key-outlier test), e.g. ``spans_choose``'s marks. The tokens then
        go in one by one, each marked once the next is appended; the last
        one's mark is given at the layer's next ``append``/``extend``. Needs a
        cache with protected spans (``protect`` > 0): KvcError otherwise.

        On an input error (a shape, a NaN or Inf anywhere in k, v or q, an
        ``out`` that is not a float32 C-contiguous array of the right shape,
        centres of the wrong shape, type or values) nothing changes. A refusal by the cache itself (KVC_E_CAPACITY: an
        exact store that fills) leaves the tokens before it appended, in
        every head, as a loop of appends would; the error names the token."""
        layer = _index(layer, "layer")
        kr, vr = _as_rows(k, "k"), _as_rows(v, "v")
        for name, x in (("k", kr), ("v", vr)):
            if x.ndim == 3 and x.shape[0] > 0:
                _check_finite(x, name, 1)
        marks = None
        if centres is not None:
            marks = _centres(centres, kr.shape[0] if kr.ndim == 3 else -1, self._c.n_kv_heads)
        if q is None:
            if out is not None:
                raise ValueError("extend: out without q (the outputs are the queries' attention)")
            self._c.extend(layer, kr, vr, None, None, marks)
            return None
        qr = _as_rows(q, "q")
        if qr.ndim == 3 and qr.shape[0] > 0:
            _check_finite(qr, "q", 1)
        if out is None:
            out = np.empty(qr.shape, dtype=np.float32)
        else:
            _check_out(out, qr.shape, "out", kr, vr, qr)
        self._c.extend(layer, kr, vr, qr, out, marks)
        return out

    @property
    def plan(self) -> dict[str, int]:
        """What every stream's budget turned into: ``n_sink``, ``n_window``,
        ``n_protect`` (tokens of protected spans), ``protect_radius``,
        ``method_tokens`` (tokens per stream; ``spans_choose`` wants the
        sinks, the protected budget and the radius)."""
        return self._c.plan()

    def prefill_queries(self, layer: int, q: Any) -> None:
        """The prompt's last queries (n, n_heads, head_dim) for the query-aware
        methods (SnapKV's observation window), given before the prompt is
        appended; the other methods ignore them."""
        self._c.prefill_queries(_index(layer, "layer"), _as_rows(q, "q"))

    def mark(self, layer: int, kv_head: int, token: int, centre: bool = True) -> None:
        """Decides whether an appended token of (layer, kv_head) is a
        protected-span centre (centre=True) or not, replacing the key-outlier
        test's verdict on it (kvc_cache_mark): the caller's own scores (e.g.
        KVzip's) choose what the protected spans keep. The token must be in
        the window (appended, followed by one more append, not yet evicted)
        and the cache configured with protected spans; otherwise KvcError,
        and nothing changes. A sink is accepted as is."""
        if not isinstance(centre, (bool, np.bool_)):
            raise TypeError(f"centre: want a bool, got {type(centre).__name__}")
        self._c.mark(_index(layer, "layer"), _index(kv_head, "kv_head"), _index(token, "token"), bool(centre))

    def restore(self, snapshot: bytes) -> None:
        """Puts back a ``to_bytes()`` snapshot of this cache (validated first:
        a corrupted or foreign snapshot raises KvcError and changes nothing)."""
        self._c.restore(bytes(snapshot))

    @property
    def observes(self) -> bool:
        """Whether the method scores the attention its rows receive (H2O, TOVA):
        its queries must then go through ``attend``/``extend``."""
        return self._c.observes()

    @property
    def nbytes(self) -> int:
        """Bytes of the arena (everything the cache holds)."""
        return self._c.arena_bytes()

    def usage(self) -> dict[str, int]:
        """Rows and row bytes in use now and at their peak."""
        e, pe, b, pb = self._c.usage()
        return {"elements": e, "peak_elements": pe, "bytes": b, "peak_bytes": pb}

    def checksum(self) -> int:
        """The cache's checksum (equal for equal states, across machines)."""
        return self._c.checksum()

    @property
    def shape(self) -> tuple[int, int, int, int]:
        """(n_layers, n_heads, n_kv_heads, head_dim)."""
        return (self._c.n_layers, self._c.n_heads, self._c.n_kv_heads, self._c.head_dim)
