"""kvcompress on device tensors: the server build's paged cache
(kvc_cuda_batch.h, docs/gpu.md) driven from torch (docs/python.md, "CUDA
tensors").

    import kvcompress.device as kd
    cache = kd.PagedCache(n_layers, n_heads, n_kv_heads, head_dim, method="sink-window",
                          dtype="int8", budget="25%f16", context=4096, device="cuda")
    out = cache.extend(layer, k, v, q, scaling)   # (1, Hkv, n, d), (1, Hkv, n, d), (1, Hq, n, d) -> (1, n, Hq, d)

The keys and values stay on the device: each step's rows are quantised there
into the slots the host chose (``kvc_cuda_batch_append``), and each layer's
queries are answered with one split launch (and a merge launch when a long
sequence is split over several blocks; ``kvc_cuda_batch_attend``). The host decides only slot numbers, so only the
methods whose decisions are slot arithmetic run here: ``exact`` (every token
in order; the pool grows) and ``sink-window`` (StreamingLLM: the first
``sink`` tokens and a ring over the rest of the budget, exactly the core's
stream: budget = sinks + window + the current token). The other methods decide
from the rows themselves on the host (docs/gpu.md, "What runs where"); they
are refused here with a message, and run on CPU tensors with
``kvcompress.hf.KvcCache``.

A prompt is read in one launch pair while it fits the budget (each position
is a virtual sequence whose page list is its kv head's, with its own row
count: causal by construction); past the budget a sink-window ring overwrites
rows that earlier positions still need, so the rest of a prompt goes one
position per launch pair.

Which build: ``backend()`` is "gpu" (``pip install -C
cmake.define.KVC_CUDA_GPU=ON .``: torch CUDA tensors), "simt" (``-C
cmake.define.KVC_PYTHON_SIMT=ON``: the same kernels on the CPU SIMT runtime,
over CPU tensors; CI's tests) or None (a plain install: no device path).
"""
from __future__ import annotations

import math
import threading
from typing import Optional, Union

import numpy as np
import torch

from . import RECOMMENDED, _budget_tokens, _core, _param_list

__all__ = ["METHODS", "MirroredCache", "PagedCache", "backend", "page_bytes"]

#: The methods whose decisions are slot arithmetic (see the module's text).
METHODS = ("exact", "sink-window")
PAGE_ROWS = 64
_ELEM = {torch.float32: 0, torch.float16: 1, torch.bfloat16: 2}


def backend() -> Optional[str]:
    """"gpu", "simt" or None: which CUDA table this package was built with."""
    return _core.cuda_backend


def page_bytes(dtype: str, head_dim: int) -> int:
    """Bytes of one page of 64 key rows, 64 value rows, their log-weights and
    roles (kvc_cuda_page_bytes); 0 for a type or dimension the pages refuse."""
    _need_backend()
    return int(_core.cuda_page_bytes(dtype, head_dim))


def _need_backend() -> None:
    if _core.cuda_backend is None:
        raise RuntimeError("this kvcompress was built without the CUDA table: reinstall with "
                           "pip install -C cmake.define.KVC_CUDA_GPU=ON . (a GPU) or "
                           "-C cmake.define.KVC_PYTHON_SIMT=ON (the CPU SIMT runtime)")


def _check_device(device: torch.device) -> None:
    if _core.cuda_backend == "gpu" and device.type != "cuda":
        raise ValueError(f"the GPU build's paged cache takes CUDA tensors; got {device}")
    if _core.cuda_backend == "simt" and device.type != "cpu":
        raise ValueError(f"the SIMT build runs its kernels on the CPU: it takes CPU tensors; got {device}")


def _pages_for(budget: Union[int, str], *, dtype: str, head_dim: int, n_entries: int,
               context: Optional[int]) -> int:
    """Pages per (layer, kv head) for a budget spelling: N tokens, P% of the
    context, P%f16 of an f16 exact cache's bytes for the context, or
    N{B,KiB,MiB,GiB} for the whole cache. A token budget takes whole pages;
    a byte budget takes the pages that fit in it."""
    pb = page_bytes(dtype, head_dim)
    if isinstance(budget, (int, np.integer)) and not isinstance(budget, bool):
        if budget < 1:
            raise ValueError(f"budget {budget}: want at least one token")
        return -(-int(budget) // PAGE_ROWS)
    if not isinstance(budget, str):
        raise TypeError(f"budget: want an int or a string, got {type(budget).__name__}")
    # the core's grammar (kvc_budget.h), as Cache and the command line read it
    tokens, per_entry = _core.budget_per_stream(budget, head_dim, context or 0, n_entries)
    if tokens:
        return -(-int(tokens) // PAGE_ROWS)
    pages = int(per_entry // pb)
    if pages < 1:
        raise ValueError(f"budget '{budget}' is {per_entry:.0f} bytes per kv head: less than one page ({pb} bytes)")
    return pages


def _check_step(cache, b: int, n: int, k: torch.Tensor, v: torch.Tensor, q: torch.Tensor, scaling: float) -> None:
    """k, v (b, n_kv_heads, n, head_dim) and q (b, n_heads, n, head_dim) on
    the cache's device in a type the kernels read, and a positive finite
    scaling; ValueError naming what is wrong otherwise."""
    want = (b, cache.n_kv_heads, n, cache.head_dim)
    for name, t, shape in (("k", k, want), ("v", v, want), ("q", q, (b, cache.n_heads, n, cache.head_dim))):
        if tuple(t.shape) != shape:
            raise ValueError(f"{name}: want shape {shape}, got {tuple(t.shape)}")
        if t.device != cache.device:
            raise ValueError(f"{name} is on {t.device}; the cache's pages are on {cache.device}")
        if t.dtype not in _ELEM:
            raise ValueError(f"{name}: want float32, float16 or bfloat16, got {t.dtype}")
    if not (math.isfinite(scaling) and scaling > 0):
        raise ValueError(f"scaling {scaling}: want finite and > 0")


class _Layer:
    """One layer's pool (its kv heads' pages; entry h's j-th page is page
    h + n_kv_heads * j), the rows it has seen and the C object over them."""

    def __init__(self, cache: "PagedCache", pages: int) -> None:
        self.cache, self.pages_per_entry, self.seen = cache, 0, 0
        self.pool: Optional[torch.Tensor] = None
        self.core: Optional[_core.PagedLayer] = None
        self.beta: Optional[float] = None
        self._grow(pages)

    def _grow(self, pages: int) -> None:
        c = self.cache
        n_pages = pages * c.n_kv_heads
        pool = torch.empty(n_pages * c.page_bytes + 256, dtype=torch.uint8, device=c.device)
        if self.pool is not None:  # the old pages keep their numbers: a copy into the front
            old = self.pages_per_entry * c.n_kv_heads * c.page_bytes
            self._region(pool, n_pages)[:old].copy_(self._region(self.pool, self.n_pages)[:old])
        self.pool, self.pages_per_entry, self.n_pages = pool, pages, n_pages
        if self.core is not None:
            self.core.set_pool(self._address(), n_pages)

    def _region(self, pool: torch.Tensor, n_pages: int) -> torch.Tensor:
        at = (-pool.data_ptr()) % 256  # the pool's 256-byte alignment
        return pool[at:at + n_pages * self.cache.page_bytes]

    def _address(self) -> int:
        return self._region(self.pool, self.n_pages).data_ptr()

    def slot(self, h: int, row: int) -> int:
        return (h + self.cache.n_kv_heads * (row // PAGE_ROWS)) * PAGE_ROWS + row % PAGE_ROWS


class PagedCache:
    """A model's keys and values in device pages, one sequence (batch 1).

    n_layers, n_heads, n_kv_heads, head_dim : the model's shape (head_dim 64
        or 128; n_heads / n_kv_heads at most 16).
    method : "exact" or "sink-window" (``METHODS``).
    dtype : row storage: "f16", "int8" (the default, the recommended
        configuration's) or "int4".
    budget : sink-window's rows per kv head (sinks, window and the current
        token): N tokens, "P%" of ``context``, "P%f16" of an f16 exact cache's
        bytes for ``context``, or "N{B,KiB,MiB,GiB}" for the whole cache;
        whole pages of 64 rows. exact: the pages first reserved (the pool
        grows by doubling).
    sink : sink-window's first tokens kept (0 .. budget - 1), 32 by default
        as in the core.
    device : where the pages live (the build's: CUDA for "gpu", CPU for "simt").
    """

    def __init__(self, n_layers: int, n_heads: int, n_kv_heads: int, head_dim: int, *,
                 method: str = "sink-window", dtype: str = "int8", budget: Union[int, str] = "25%f16",
                 context: Optional[int] = None, sink: int = 32,
                 device: Optional[Union[str, torch.device]] = None) -> None:
        _need_backend()
        if method not in METHODS:
            raise ValueError(f"method '{method}' decides from the rows on the host: the device path runs "
                             f"{', '.join(METHODS)} (use CPU tensors and kvcompress.hf.KvcCache for the others)")
        if n_heads % n_kv_heads or not 1 <= n_heads // n_kv_heads <= _core.cuda_max_group:
            raise ValueError(f"{n_heads} query heads over {n_kv_heads} kv heads: want a group of "
                             f"1 .. {_core.cuda_max_group}")
        device = torch.device(device if device is not None else ("cuda" if _core.cuda_backend == "gpu" else "cpu"))
        _check_device(device)
        self.n_layers, self.n_heads, self.n_kv_heads, self.head_dim = n_layers, n_heads, n_kv_heads, head_dim
        self.method, self.dtype, self.device = method, dtype, device
        self.page_bytes = page_bytes(dtype, head_dim)
        if self.page_bytes == 0:
            raise ValueError(f"the pages store f16, int8 or int4 rows of dimension 64 or 128; "
                             f"got {dtype} at {head_dim}")
        n_entries = n_layers * n_kv_heads
        if method == "exact":  # a budget only reserves pages: exact keeps every position
            pages = 1 if budget is None else _pages_for(budget, dtype=dtype, head_dim=head_dim,
                                                        n_entries=n_entries, context=context)
            self.budget = None
        else:
            pages = _pages_for(budget, dtype=dtype, head_dim=head_dim, n_entries=n_entries, context=context)
            self.budget = pages * PAGE_ROWS  # whole pages: the rows the budget pays for
            if not 0 <= sink < self.budget:
                raise ValueError(f"sink {sink}: want 0 .. {self.budget - 1} (the budget is {self.budget} rows)")
        self.sink = sink
        self.layers = [_Layer(self, pages) for _ in range(n_layers)]
        self._host = np.zeros(0, dtype=np.uint8)
        self._work: Optional[torch.Tensor] = None

    @property
    def nbytes(self) -> int:
        """Bytes of the pages: every row, scale, weight and role the cache holds."""
        return sum(layer.n_pages for layer in self.layers) * self.page_bytes

    def seen(self, layer: int) -> int:
        """Positions layer ``layer`` has been given."""
        return self.layers[layer].seen

    def _row(self, t: int) -> int:
        """The row position t is stored in: exact keeps every position; the
        ring after the sinks overwrites the oldest window row."""
        if self.budget is None or t < self.budget:
            return t
        return self.sink + (t - self.sink) % (self.budget - self.sink)

    def rows(self, layer: int, kv_head: int) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        """The rows the next attend of (layer, kv head) would read, as stored
        (dequantised; float32, on the CPU), and the positions they hold, in
        row order: for tests and inspection."""
        lay = self.layers[layer]
        n = lay.seen if self.budget is None else min(lay.seen, self.budget)
        positions = list(range(n))
        if self.budget is not None and lay.seen > self.budget:
            for t in range(self.budget, lay.seen):
                positions[self._row(t)] = t
        host = lay._region(lay.pool, lay.n_pages).cpu()
        slots = [lay.slot(kv_head, r) for r in range(n)]
        k, v = _core.paged_rows(self.dtype, self.head_dim, host.data_ptr(), host.numel(), slots)
        return torch.from_numpy(k), torch.from_numpy(v), positions

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor, q: torch.Tensor, scaling: float) -> torch.Tensor:
        """Appends the n positions of k, v (1, n_kv_heads, n, head_dim) and
        answers each position's queries q (1, n_heads, n, head_dim) after its
        own row: out (1, n, n_heads, head_dim) in q's dtype, scores scaled by
        ``scaling``. Tensors: float32, float16 or bfloat16 on the cache's
        device, the last dimension contiguous."""
        n = k.shape[2]
        _check_step(self, 1, n, k, v, q, scaling)
        k, v, q = (t if t.stride(-1) == 1 else t.contiguous() for t in (k, v, q))
        lay = self.layers[layer]
        if lay.core is None:
            lay.core = _core.PagedLayer(self.dtype, self.head_dim, self.n_kv_heads, self.n_heads // self.n_kv_heads,
                                        float(scaling), lay._address(), lay.n_pages)
        elif scaling != lay.beta:
            lay.core.set_beta(float(scaling))
        lay.beta = scaling
        if self.budget is None:  # exact: room for every position
            need = -(-(lay.seen + n) // PAGE_ROWS)
            if need > lay.pages_per_entry:
                lay._grow(max(need, 2 * lay.pages_per_entry))
        out = torch.empty((n, self.n_heads, self.head_dim), dtype=q.dtype, device=self.device)
        # positions that fit before the ring wraps go in one launch pair, the rest one by one
        whole = n if self.budget is None else max(0, min(n, self.budget - lay.seen))
        if whole:
            self._step(lay, 0, whole, k, v, q, out)
        for i in range(whole, n):
            self._step(lay, i, 1, k, v, q, out)
        return out.unsqueeze(0)

    def _step(self, lay: _Layer, i0: int, m: int, k: torch.Tensor, v: torch.Tensor, q: torch.Tensor,
              out: torch.Tensor) -> None:
        """Positions i0 .. i0 + m - 1 of the call: appended, then attended as
        m virtual sequences, each over the rows up to its own."""
        hkv, t0 = self.n_kv_heads, lay.seen
        slots = [lay.slot(h, self._row(t0 + i)) for i in range(m) for h in range(hkv)]
        slots_dev = torch.tensor(slots, dtype=torch.int32, device=self.device)
        stream = torch.cuda.current_stream(self.device).cuda_stream if self.device.type == "cuda" else 0

        def view(t: torch.Tensor) -> _core.DevTensor:  # (1, heads, n, d) from position i0 as [m][heads][d]
            return _core.DevTensor(t[0, :, i0].data_ptr(), _ELEM[t.dtype], t.stride(2), t.stride(1))

        lay.core.append(m, slots_dev.data_ptr(), view(k), view(v), stream)
        lay.seen += m
        cap = self.budget if self.budget is not None else t0 + m
        n_rows = np.array([min(t0 + i + 1, cap) for i in range(m) for _ in range(hkv)], dtype=np.int32)
        # every position's page list is its kv head's: entry h's j-th page is h + hkv * j
        P = lay.pages_per_entry
        ids = np.tile((np.arange(hkv, dtype=np.int32)[:, None] + hkv * np.arange(P, dtype=np.int32)).ravel(), m)
        indptr = np.arange(m * hkv + 1, dtype=np.int32) * P
        tables = torch.from_numpy(np.concatenate([indptr, ids])).to(self.device)
        max_pages = int(((n_rows.astype(np.int64) + PAGE_ROWS - 1) // PAGE_ROWS).sum())
        hb = lay.core.plan_host_bytes(m, max_pages)
        wb = lay.core.workspace_bytes(m, max_pages)
        if self._host.nbytes < hb:
            self._host = np.zeros(hb, dtype=np.uint8)
        if self._work is None or self._work.numel() < wb + 256:
            self._work = torch.empty(wb + 256, dtype=torch.uint8, device=self.device)
        work = self._work.data_ptr() + (-self._work.data_ptr()) % 256
        o = _core.DevTensor(out[i0].data_ptr(), _ELEM[out.dtype], out.stride(0), out.stride(1))
        # The plan's copy from self._host is from pageable memory, which CUDA
        # stages before cudaMemcpyAsync returns, so the next step may reuse
        # the buffer without a synchronisation (CUDA runtime API, "API
        # synchronization behavior").
        lay.core.attend(m, n_rows, max_pages, self._host.ctypes.data, self._host.nbytes, work, wb,
                        tables.data_ptr(), tables[m * hkv + 1:].data_ptr(), view(q), o, stream)


class MirroredCache:
    """Every method on the device pages, for a batch of sequences: the core
    decides on the host, the device stores the rows and attends
    (docs/gpu.md, "The mirror"; docs/python.md, "CUDA tensors").

    Each sequence of the batch has its own C cache configured exactly as
    ``kvcompress.Cache(n_layers, n_heads, n_kv_heads, head_dim, method=...,
    budget=..., ...)`` would be, so a sequence's evictions, merges and weights
    are those of the host path at batch 1. Every step, the step's keys and
    values are copied to the host (float32) and appended there; each
    (layer, sequence, kv head) stream's mirror (kvc_mirror.h) says which rows,
    weights and roles changed, and those edits go to the layer's device pages
    (``kvc_cuda_batch_put_rows`` / ``_set_rows``, the same codes as the host's
    rows); one plan and one attend per position answer every sequence. H2O,
    TOVA and SnapKV get the attention mass from the device
    (``kvc_cuda_batch_attend_mass``) and observe it on the host.

    n_layers, n_heads, n_kv_heads, head_dim : the model's shape (head_dim 64
        or 128; n_heads / n_kv_heads at most 16).
    batch : sequences (1 .. 65535); None: the batch of the first ``extend``.
    method, budget, context, dtype, seed, **params : ``kvcompress.Cache``'s
        (every method but KIVI4's plan, whose channel blocks no page holds;
        dtype "f16", "int8" or "int4").
    device : where the pages live (the build's: CUDA for "gpu", CPU for "simt").

    Memory: ``nbytes`` of device pages (each stream gets whole pages for its
    mirror's slots: the view's rows and the current token) and ``host_bytes``
    of host state (the caches, mirrors and journals).
    Threads: calls on one MirroredCache take turns (its lock is held while the
    GIL is released); different ones run in parallel.
    """

    def __init__(self, n_layers: int, n_heads: int, n_kv_heads: int, head_dim: int, *,
                 batch: Optional[int] = None, method: str = RECOMMENDED["method"],
                 budget: Union[int, str] = 1024, context: Optional[int] = None,
                 dtype: str = RECOMMENDED["dtype"], seed: int = 1,
                 device: Optional[Union[str, torch.device]] = None, **params) -> None:
        _need_backend()
        device = torch.device(device if device is not None else ("cuda" if _core.cuda_backend == "gpu" else "cpu"))
        _check_device(device)
        if n_heads % n_kv_heads or not 1 <= n_heads // n_kv_heads <= _core.cuda_max_group:
            raise ValueError(f"{n_heads} query heads over {n_kv_heads} kv heads: want a group of "
                             f"1 .. {_core.cuda_max_group}")
        plist = _param_list(params)
        self.budget = _budget_tokens(budget, method=method, dtype=dtype, head_dim=head_dim,
                                     n_streams=n_layers * n_kv_heads, context=context, params=plist)
        self.n_layers, self.n_heads, self.n_kv_heads, self.head_dim = n_layers, n_heads, n_kv_heads, head_dim
        self.method, self.dtype, self.device, self.seed = method, dtype, device, seed
        self._params = plist
        self._c: Optional[_core.MirroredCache] = None
        self._seen = [0] * n_layers
        # the C object's lock covers its calls; this one covers the Python state around them (the
        # object made at the first extend, the position counts), which threads would otherwise race on
        self._lock = threading.Lock()
        self.batch: Optional[int] = None
        if batch is not None:
            self._make(batch)

    def _make(self, batch: int) -> None:
        if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or not 1 <= batch <= 65535:
            raise ValueError(f"batch {batch!r}: want 1 .. 65535 sequences")
        self._c = _core.MirroredCache(self.n_layers, self.n_heads, self.n_kv_heads, self.head_dim, int(batch),
                                      self.method, self.budget, self.dtype, self.seed, self._params)
        self.batch = int(batch)

    @property
    def nbytes(self) -> int:
        """Bytes of the device pages (0 before the batch is known)."""
        return self._c.nbytes if self._c is not None else 0

    @property
    def host_bytes(self) -> int:
        """Bytes of host state: the sequences' caches, the mirrors, the journals."""
        return self._c.host_bytes if self._c is not None else 0

    def seen(self, layer: int) -> int:
        """Positions (padding included) layer ``layer`` has been given."""
        return self._seen[layer]

    @property
    def observes_mass(self) -> bool:
        """The method observes the attention mass its rows receive (H2O,
        TOVA, SnapKV): the device computes it, the host observes it."""
        if self._c is not None:
            return bool(self._c.observes)
        return any(m["observes"] for m in _core.methods() if m["name"] == self.method)

    def usage(self, sequence: int) -> list[int]:
        """Sequence ``sequence``'s host cache: elements held, at peak, and their
        bytes (``kvcompress.Cache.usage``)."""
        return self._c.usage(sequence)

    def checksum(self, sequence: int) -> int:
        """kvc_cache_checksum of sequence ``sequence``'s host cache (tests:
        equal to a ``kvcompress.Cache`` given the same tokens)."""
        return self._c.checksum(sequence)

    def extend(self, layer: int, k: torch.Tensor, v: torch.Tensor, q: torch.Tensor, scaling: float,
               real: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Appends the n positions of k, v (batch, n_kv_heads, n, head_dim)
        and answers each position's queries q (batch, n_heads, n, head_dim)
        after its own row: out (batch, n, n_heads, head_dim) in q's dtype,
        scores scaled by ``scaling``. ``real`` (batch, n), 1 for a token and 0
        for padding (a left-padded prompt): padding never enters a cache and
        its output is 0. Tensors: float32, float16 or bfloat16 on the cache's
        device, the last dimension contiguous. Bad input raises and leaves
        every cache as it was."""
        if k.dim() != 4:
            raise ValueError(f"k: want (batch, n_kv_heads, n, head_dim), got shape {tuple(k.shape)}")
        b, n = k.shape[0], k.shape[2]
        _check_step(self, b, n, k, v, q, scaling)
        if real is None:
            mask = np.ones((b, n), dtype=np.uint8)
        else:
            if tuple(real.shape) != (b, n):
                raise ValueError(f"real: want shape {(b, n)}, got {tuple(real.shape)}")
            r = real.detach().cpu()
            if r.is_floating_point() or r.is_complex() or not bool(((r == 0) | (r == 1)).all()):
                raise ValueError("real: want 0 (padding) or 1 (a token) per position, as an integer or bool tensor")
            mask = np.ascontiguousarray(r.numpy().astype(np.uint8))
        with self._lock:
            if self._c is None:
                self._make(b)
            elif b != self.batch:
                raise ValueError(f"a batch of {b}; this cache holds {self.batch} sequences")
        q = q if q.stride(-1) == 1 else q.contiguous()
        # the rows the core appends: float32 on the host, [batch][n][kv head][d]
        kh = np.ascontiguousarray(k.detach().permute(0, 2, 1, 3).float().cpu().numpy())
        vh = np.ascontiguousarray(v.detach().permute(0, 2, 1, 3).float().cpu().numpy())
        out = torch.zeros((b, n, self.n_heads, self.head_dim), dtype=q.dtype, device=self.device)
        stream = torch.cuda.current_stream(self.device).cuda_stream if self.device.type == "cuda" else 0
        qv = _core.DevTensor(q.data_ptr(), _ELEM[q.dtype], q.stride(0), q.stride(1))
        ov = _core.DevTensor(out.data_ptr(), _ELEM[out.dtype], out.stride(0), out.stride(2))
        self._c.extend(layer, kh, vh, mask, qv, q.stride(2), ov, out.stride(1), float(scaling), stream)
        with self._lock:
            self._seen[layer] += n
        return out
