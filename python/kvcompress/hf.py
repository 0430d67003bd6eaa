"""kvcompress inside transformers and kvpress (docs/python.md).

    import kvcompress.hf as kvc_hf
    cache = kvc_hf.KvcCache.for_model(model, method="sink-window", budget="25%f16", context=4096)
    out = model.generate(ids, past_key_values=cache, max_new_tokens=32)

``KvcCache`` is a transformers ``Cache`` whose layers hold nothing in torch:
every token's keys and values go into the library's C cache, and the
attention function registered here as ``"kvcompress"`` answers each query
from it (``Cache.extend``: a prompt is read through the cache token by token,
causal by construction). Other caches (a ``DynamicCache``) are answered by
transformers' SDPA, so a model switched to ``"kvcompress"`` runs unchanged with
them. ``KvcPress`` is a kvpress press: exact prefill as kvpress does, then the
prompt's rows go into the library's cache, which answers the question and the
answer. On CPU tensors: batch size 1. On CUDA tensors (a package built with
the GPU table; CPU tensors in the SIMT build) ``KvcCache`` keeps the rows in
device pages (``paged=True``, the default there): every method, any batch,
left-padded prompts read through the attention mask
(``kvcompress.device.MirroredCache``); ``paged="slots"`` is the slot-arithmetic
path of exact and sink-window at batch 1 (``kvcompress.device.PagedCache``).
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import numpy as np
import torch
from transformers.cache_utils import Cache, CacheLayerMixin
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from . import Cache as KvcArena
from . import RECOMMENDED, sentence_ends, spans_choose

# kvpress, when installed, is imported before the attention function is
# registered: kvpress wraps every attention function registered when it is
# imported (its head-wise key masking), which ours does not need.
try:
    from kvpress.presses.base_press import BasePress, is_prefilling
except ImportError:  # kvpress not installed: KvcCache alone
    BasePress = object  # type: ignore[misc,assignment]
    is_prefilling = None  # type: ignore[assignment]

__all__ = ["ATTENTION", "KvcCache", "KvcLayer", "KvcMirroredLayer", "KvcPagedLayer", "KvcPress", "kvcompress_attention",
           "model_shape"]

#: The name under which the attention function is registered with transformers.
ATTENTION = "kvcompress"


def model_shape(config: Any) -> tuple[int, int, int, int]:
    """(n_layers, n_heads, n_kv_heads, head_dim) of a transformers config."""
    config = getattr(config, "text_config", None) or config
    n_heads = int(config.num_attention_heads)
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // n_heads
    return (int(config.num_hidden_layers), n_heads, int(getattr(config, "num_key_value_heads", None) or n_heads),
            int(head_dim))


def sliding_layers(config: Any) -> tuple[list[int], Optional[int]]:
    """The layers that attend only to a window of recent positions (Gemma 3's
    "sliding_attention") and that window, or ([], None)."""
    config = getattr(config, "text_config", None) or config
    types, window = getattr(config, "layer_types", None), getattr(config, "sliding_window", None)
    if not types or not window:
        return [], None
    return [i for i, t in enumerate(types) if t == "sliding_attention"], int(window)


class _Shared:
    """The C cache of a whole model and the point a kvpress pipeline may come
    back to (the compressed context): its length and snapshot. A model with
    sliding-window layers has a second cache for them (``sliding``), and
    ``local`` maps a model layer to its cache and its index there."""

    def __init__(self, arena: KvcArena, sliding: Optional[KvcArena] = None,
                 local: Optional[dict[int, tuple[KvcArena, int]]] = None) -> None:
        self.arena, self.sliding, self.local = arena, sliding, local
        self.mark_len: Optional[int] = None
        self.mark: Optional[tuple[bytes, ...]] = None
        self.dirty = False  # appended since the mark

    def arena_of(self, layer: int) -> tuple[Any, int]:
        """The cache holding model layer ``layer`` and the layer's index in it."""
        return (self.arena, layer) if self.local is None else self.local[layer]

    @property
    def arenas(self) -> list[Any]:
        return [self.arena] + ([self.sliding] if self.sliding is not None else [])

    def take_mark(self, length: int) -> None:
        self.mark_len, self.mark, self.dirty = length, tuple(a.to_bytes() for a in self.arenas), False

    def restore_mark(self) -> None:
        for a, snap in zip(self.arenas, self.mark):
            a.restore(snap)
        self.dirty = False

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arenas)


class _Rows:
    """What ``layer.keys`` gives: the shape of the rows a layer has seen and
    slicing along the sequence, so that code written for DynamicLayer
    (``keys[:, :, :n]`` to drop an answer, kvpress's pipeline) works; the rows
    themselves live in the C cache."""

    def __init__(self, shape: tuple[int, int, int, int]) -> None:
        self.shape = torch.Size(shape)

    def __getitem__(self, index: Any) -> "_Rows":
        if not (isinstance(index, tuple) and len(index) == 3 and all(i == slice(None) for i in index[:2])
                and isinstance(index[2], slice) and index[2].start in (None, 0) and index[2].step in (None, 1)):
            raise NotImplementedError("a kvcompress layer's rows are in its C cache: only [:, :, :n] is supported")
        n = self.shape[2] if index[2].stop is None else min(int(index[2].stop), self.shape[2])
        return _Rows((self.shape[0], self.shape[1], n, self.shape[3]))


class KvcLayer(CacheLayerMixin):
    """One model layer's view of the C cache: counts the positions it has
    seen and hands the step's keys and values to the attention function."""

    is_compileable = False
    is_sliding = False

    def __init__(self, shared: _Shared, layer_idx: int, seen: int = 0) -> None:
        super().__init__()
        self.shared, self.layer_idx, self.seen = shared, layer_idx, seen
        self.pending: Optional[tuple[torch.Tensor, torch.Tensor]] = None
        self.is_initialized = True

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        pass

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor,
               cache_kwargs: Optional[dict[str, Any]] = None) -> tuple[torch.Tensor, torch.Tensor]:
        if self.pending is not None:
            raise RuntimeError(f"layer {self.layer_idx}: the previous step's keys never reached the attention "
                               f"function: load or switch the model with attn_implementation='{ATTENTION}'")
        if key_states.shape[0] != 1 and not getattr(self, "batch_ok", False):
            raise ValueError(f"a kvcompress cache on the CPU holds one sequence; got a batch of "
                             f"{key_states.shape[0]} (KvcCache(paged=True) serves a batch on the device path)")
        self.pending = (key_states, value_states)
        # What the model's attention receives: empty tensors on the meta device
        # that point at this layer. The "kvcompress" attention answers from the
        # C cache; any other attention fails loudly on them (a tensor on the
        # meta device) instead of attending over this step's tokens alone.
        shape = (key_states.shape[0], key_states.shape[1], 0, key_states.shape[3])
        key_marker = torch.empty(shape, dtype=key_states.dtype, device="meta")
        value_marker = torch.empty(shape, dtype=value_states.dtype, device="meta")
        key_marker._kvcompress_layer = self
        return key_marker, value_marker

    def attend(self, query: torch.Tensor, scaling: Optional[float],
               real: Optional[torch.Tensor] = None) -> torch.Tensor:
        """The pending tokens appended, each followed by its queries' attend:
        (1, n_heads, L, d) -> (1, L, n_heads, d). ``real`` (1, L): the
        attention mask's columns of these positions; padding (0) is not
        appended and its output is 0."""
        k, v = self.pending
        self.pending = None
        n, d = k.shape[2], query.shape[-1]
        scale = (scaling if scaling is not None else 1.0 / math.sqrt(d)) * math.sqrt(d)  # the core's beta is 1/sqrt(d)
        q = query[0].transpose(0, 1).float()
        if scale != 1.0:
            q = q * scale
        keep = None if real is None or bool(real.all()) else real[0].to("cpu", torch.bool)
        kt, vt = k[0].transpose(0, 1), v[0].transpose(0, 1)
        if keep is not None:
            kt, vt, q = kt[keep], vt[keep], q[keep]
        res = torch.zeros((n, q.shape[1], d), dtype=query.dtype)
        if kt.shape[0]:
            arena, local = self.shared.arena_of(self.layer_idx)
            out = torch.from_numpy(arena.extend(local, kt, vt, q)).to(query.dtype)
            res = out if keep is None else res.index_put_((keep,), out)
        self.seen += n
        self.shared.dirty = True
        return res.unsqueeze(0)

    def get_mask_sizes(self, cache_position: torch.Tensor) -> tuple[int, int]:
        return self.seen + cache_position.shape[0], 0

    def get_seq_length(self) -> int:
        return self.seen

    def get_max_cache_shape(self) -> int:
        return -1

    @property
    def keys(self) -> _Rows:
        return _Rows((1, self.shared.arena.shape[2], self.seen, self.shared.arena.shape[3]))

    @keys.setter
    def keys(self, rows: Any) -> None:
        self._truncate(rows)

    values = keys

    def _truncate(self, rows: Any) -> None:
        if rows is None:  # CacheLayerMixin.__init__'s empty layer
            return
        n = rows.shape[2]
        if n == self.seen:
            return
        sh = self.shared
        if n != sh.mark_len or sh.mark is None:
            raise NotImplementedError(f"layer {self.layer_idx}: a compressed cache cannot drop tokens except back "
                                      f"to its compressed context ({sh.mark_len} positions); asked for {n}")
        if sh.dirty:
            sh.restore_mark()  # every layer at once, back to the mark
        self.seen = n

    def reset(self) -> None:
        raise NotImplementedError("a kvcompress cache is not reset in place: make a new one")


class KvcPagedLayer(KvcLayer):
    """One model layer of a ``kvcompress.device.PagedCache``: the step's keys
    and values go into device pages and the queries are answered there
    (exact and sink-window, batch 1; docs/python.md, "CUDA tensors")."""

    def attend(self, query: torch.Tensor, scaling: Optional[float],
               real: Optional[torch.Tensor] = None) -> torch.Tensor:
        if real is not None and not bool(real.all()):
            raise ValueError("the slot-arithmetic paged cache reads no attention mask: use paged=True "
                             "(kvcompress.device.MirroredCache) for padded prompts")
        k, v = self.pending
        self.pending = None
        d = query.shape[-1]
        out = self.shared.arena.extend(self.layer_idx, k, v, query,
                                       scaling if scaling is not None else 1.0 / math.sqrt(d))
        self.seen += k.shape[2]
        return out

    @property
    def keys(self) -> _Rows:
        pc = self.shared.arena  # a PagedCache (batch 1) or a MirroredCache (its batch, once known)
        return _Rows((getattr(pc, "batch", None) or 1, pc.n_kv_heads, self.seen, pc.head_dim))

    @keys.setter
    def keys(self, rows: Any) -> None:
        if rows is not None and rows.shape[2] != self.seen:
            raise NotImplementedError(f"layer {self.layer_idx}: a paged kvcompress cache cannot drop tokens")

    values = keys


class KvcMirroredLayer(KvcPagedLayer):
    """One model layer of a ``kvcompress.device.MirroredCache``: any method,
    a batch, padding read from the attention mask (docs/python.md, "CUDA
    tensors")."""

    batch_ok = True

    def attend(self, query: torch.Tensor, scaling: Optional[float],
               real: Optional[torch.Tensor] = None) -> torch.Tensor:
        k, v = self.pending
        self.pending = None
        d = query.shape[-1]
        out = self.shared.arena.extend(self.layer_idx, k, v, query,
                                       scaling if scaling is not None else 1.0 / math.sqrt(d), real=real)
        self.seen += k.shape[2]
        return out


def _padding_mask(*args: Any, attention_mask: Optional[torch.Tensor] = None, **kwargs: Any) -> Any:
    """transformers' SDPA mask, carrying the 2D padding mask (batch, seen +
    L) it was made from: the "kvcompress" attention reads which of a step's
    positions are tokens. No mask (None) means no padding."""
    mask = sdpa_mask(*args, attention_mask=attention_mask, **kwargs)
    if mask is not None and attention_mask is not None and attention_mask.dim() == 2:
        mask._kvcompress_padding = attention_mask
    return mask


def _step_padding(attention_mask: Any, n: int) -> Optional[torch.Tensor]:
    """(batch, n): 1 where this step's position is a token, 0 where padding;
    None when the mask says nothing of padding."""
    padding = getattr(attention_mask, "_kvcompress_padding", None)
    if padding is None:
        return None
    return padding[:, -n:].to(torch.bool)


def kvcompress_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                         attention_mask: Optional[torch.Tensor], dropout: float = 0.0,
                         scaling: Optional[float] = None, **kwargs: Any) -> tuple[torch.Tensor, None]:
    """transformers' attention interface: keys from a kvcompress layer are
    answered by the C cache; any other cache's by transformers' SDPA."""
    layer = getattr(key, "_kvcompress_layer", None)
    if layer is None:
        # the registry's "sdpa" as it is now, not the bare function: kvpress
        # wraps every registered attention (its head-wise key masking, which
        # KVzip's ragged per-head budgets need), and a model switched to this
        # attention by one press must still mask keys for the next press
        # (calling the bare function silently kept every key KVzip evicted)
        sdpa = ALL_ATTENTION_FUNCTIONS.get("sdpa", sdpa_attention_forward)
        return sdpa(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    if query.device.type != "cpu" and not isinstance(layer, KvcPagedLayer):
        raise ValueError(f"a kvcompress.Cache attends on the CPU; the query is on {query.device} "
                         f"(KvcCache.for_model(..., paged=True) keeps CUDA tensors on the device)")
    return layer.attend(query, scaling, _step_padding(attention_mask, query.shape[2])), None


ALL_ATTENTION_FUNCTIONS.register(ATTENTION, kvcompress_attention)
ALL_MASK_ATTENTION_FUNCTIONS.register(ATTENTION, _padding_mask)


def _use_kvcompress_attention(model: Any) -> None:
    if model.config._attn_implementation != ATTENTION:
        model.set_attn_implementation(ATTENTION)


class KvcCache(Cache):
    """A transformers ``Cache`` in the library's fixed arena: ``nbytes`` bytes,
    set at construction, whatever the sequence length.

    Make it with ``KvcCache.for_model(model, ...)``: the model is switched to
    the ``"kvcompress"`` attention (other caches keep SDPA). ``method``,
    ``budget``, ``context``, ``dtype``, ``seed`` and method parameters are
    ``kvcompress.Cache``'s.

    paged : False, the C cache on the CPU (batch 1); True, the device path for
        every method and any batch (``kvcompress.device.MirroredCache``:
        each sequence decides as the CPU path would alone); "slots", the
        slot-arithmetic device path of exact and sink-window
        (``kvcompress.device.PagedCache``, batch 1)."""

    def __init__(self, n_layers: int, n_heads: int, n_kv_heads: int, head_dim: int, *,
                 paged: Union[bool, str] = False, **kvc: Any) -> None:
        if paged not in (False, True, "slots"):
            raise ValueError(f"paged={paged!r}: want False, True or 'slots'")
        if paged == "slots":
            from .device import PagedCache
            self.shared = _Shared(PagedCache(n_layers, n_heads, n_kv_heads, head_dim, **kvc))
            layer = KvcPagedLayer
        elif paged:
            from .device import MirroredCache
            self.shared = _Shared(MirroredCache(n_layers, n_heads, n_kv_heads, head_dim, **kvc))
            layer = KvcMirroredLayer
        else:
            self.shared = _Shared(KvcArena(n_layers, n_heads, n_kv_heads, head_dim, **kvc))
            layer = KvcLayer
        super().__init__(layers=[layer(self.shared, i) for i in range(n_layers)])

    @classmethod
    def for_model(cls, model: Any, paged: Optional[Union[bool, str]] = None, **kvc: Any) -> "KvcCache":
        """paged: keep the rows in device pages (``kvcompress.device``); by
        default when the model is on a CUDA device, with the model's device."""
        _use_kvcompress_attention(model)
        device = next(model.parameters()).device
        if paged is None:
            paged = device.type == "cuda"
        if paged:
            kvc.setdefault("device", device)
        return cls(*model_shape(model.config), paged=paged, **kvc)

    @property
    def arena(self) -> KvcArena:
        """The underlying ``kvcompress.Cache``."""
        return self.shared.arena

    @property
    def nbytes(self) -> int:
        """Bytes of the arena: everything the cache holds."""
        return self.shared.arena.nbytes


def prompt_surprisal(model: Any, hidden: torch.Tensor, ids: torch.Tensor, chunk: int = 256) -> np.ndarray:
    """-log p(token t | tokens before it) for each prompt token (0 for the
    first), from the last hidden states (n, hidden) through the model's
    output layer, ``chunk`` positions at a time (the vocabulary's logits for
    the whole prompt at once would be n x vocab floats)."""
    head = model.get_output_embeddings()
    cap = getattr(getattr(model.config, "text_config", None) or model.config, "final_logit_softcapping", None)
    n = hidden.shape[0]
    out = np.zeros(n, dtype=np.float32)
    with torch.no_grad():
        for a in range(0, n - 1, chunk):
            b = min(a + chunk, n - 1)
            logits = head(hidden[a:b]).float()
            if cap:
                logits = torch.tanh(logits / cap) * cap
            lp = torch.log_softmax(logits, dim=-1)
            out[a + 1:b + 1] = (-lp.gather(1, ids[a + 1:b + 1, None].to(lp.device))[:, 0]).cpu().numpy()
    return out


def _queries(module: torch.nn.Module, hidden_states: torch.Tensor, kwargs: dict) -> torch.Tensor:
    """The layer's post-RoPE queries (1, n_heads, L, d), as kvpress's own
    query-aware presses compute them."""
    from kvpress.utils import get_prerope_query_states
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    q = get_prerope_query_states(module, hidden_states)
    cos, sin = kwargs["position_embeddings"]
    q, _ = apply_rotary_pos_emb(q, q, cos, sin)
    return q


@dataclass
class KvcPress(BasePress):
    """A kvpress press that puts the prompt into the library's cache.

    kvpress prefills exactly; after each layer this press appends the layer's
    keys and values to its C cache in token order (the method evicts, weighs
    and quantises as it streams), then replaces the layer in kvpress's cache,
    so that the question and the answer are answered by the library's attend.

    method, dtype : the library's (``kvcompress.methods()``, ``dtypes()``).
    compression_ratio : kvpress's ratio r: the cache gets (1 - r) of an f16
        exact cache's bytes for the prompt, what a kvpress press at ratio r
        keeps in f16 rows.
    budget : instead of the ratio, any ``kvcompress.Cache`` budget spelling
        ("25%f16", "96KiB", tokens); the prompt is the context.
    params : method parameters by their command-line names.
    observe_queries : for SnapKV-like methods, the prompt's last queries
        given first (question-agnostic: the prompt's own end).
    protect_marks : what picks the protected spans' tokens (``params``
        ``protect`` > 0): "outliers", the stream's key-outlier test (the
        library's default); "sentences", whole sentences of the prompt by
        falling mean surprisal (-log p of each token given the ones before,
        from the prefill's own last hidden states through the model's output
        layer), chosen by ``kvcompress.spans_choose`` and given to every
        stream as centres (``kvcompress.sentence_ends`` with the surprisal:
        docs/quality.md, "Prose at KVzip's level"). With "sentences",
        ``protect`` defaults to 50, ``protect_radius`` to 1 and ``sink`` to 4
        (the best of protect 25/50 x sink 4/32 on 1k-token GPL-3 prompts at
        3.125-10% of f16 bytes; the spans then hold the needle, the window
        the prompt's end).
    tokenizer : the model's tokenizer, for "sentences" (a sentence ends at a
        token whose text holds ``.``, ``!``, ``?`` or a line break); by
        default loaded from ``model.config.name_or_path``.
    """

    method: str = RECOMMENDED["method"]
    dtype: str = RECOMMENDED["dtype"]
    compression_ratio: float = 0.0
    budget: Optional[Union[int, str]] = None
    params: dict = field(default_factory=dict)
    observe_queries: int = 32
    seed: int = 1
    protect_marks: str = "outliers"
    tokenizer: Any = None

    def __post_init__(self) -> None:
        if not 0.0 <= self.compression_ratio < 1.0:
            raise ValueError(f"compression_ratio {self.compression_ratio}: want 0 <= r < 1")
        if self.protect_marks not in ("outliers", "sentences"):
            raise ValueError(f"protect_marks {self.protect_marks!r}: want 'outliers' or 'sentences'")
        if self.protect_marks == "sentences":
            self.params = {"protect": 50, "protect_radius": 1, "sink": 4, **self.params}
            if float(str(self.params["protect"]).rstrip("%")) <= 0:
                raise ValueError("protect_marks='sentences' needs protected spans: params protect > 0")
        self.shared: Optional[_Shared] = None
        self._model: Any = None
        self.last_marks: Optional[np.ndarray] = None  # "sentences": the last prompt's protected tokens (n,) 0/1
        self._deferred: dict[int, tuple] = {}  # "sentences": each layer's rows wait for the prompt's surprisal

    def post_init_from_model(self, model: Any) -> None:
        _use_kvcompress_attention(model)
        self._model = model

    @contextmanager
    def __call__(self, model: Any) -> Any:
        """kvpress's hooks on every attention layer, and for "sentences" one
        on the language model itself: it runs once the prompt has gone through
        every layer, scores the prompt's tokens and then fills the cache."""
        with super().__call__(model):
            handle = None
            if self.protect_marks == "sentences":
                base = model.model.language_model if hasattr(model.model, "language_model") else model.model
                handle = base.register_forward_hook(self._prompt_read, with_kwargs=True)
            try:
                yield
            finally:
                if handle is not None:
                    handle.remove()
                self._deferred.clear()

    def _budget(self) -> Union[int, str]:
        if self.budget is not None:
            return self.budget
        return f"{100.0 * (1.0 - self.compression_ratio):.6f}%f16"

    def forward_hook(self, module: torch.nn.Module, input: Any, kwargs: dict, output: Any) -> Any:
        hidden_states = kwargs["hidden_states"]
        cache = kwargs["past_key_values"]
        q_len = hidden_states.shape[1]
        idx = module.layer_idx
        if isinstance(cache.layers[idx], KvcLayer) or not is_prefilling(kwargs["cache_position"], q_len):
            return output
        layer = cache.layers[idx]
        keys, values = layer.keys, layer.values  # (1, n_kv_heads, L, d)
        if keys.shape[0] != 1:
            raise ValueError(f"KvcPress compresses one sequence; got a batch of {keys.shape[0]}")
        if keys.device.type != "cpu":
            raise ValueError(f"KvcPress streams into the C cache on the CPU; the keys are on {keys.device} "
                             f"(on CUDA, KvcCache.for_model keeps exact and sink-window rows in device pages)")
        if self.shared is None or idx == 0:
            self.shared = self._make_caches(module.config, q_len)
        arena, local = self.shared.arena_of(idx)
        k, v = keys[0].transpose(0, 1), values[0].transpose(0, 1)
        scale = module.scaling * math.sqrt(k.shape[-1])
        q_all = q_last = None
        if arena.observes:  # the method scores the attention each token's rows receive: the prompt's queries
            q_all = _queries(module, hidden_states, kwargs)[0].transpose(0, 1) * scale
        elif self.observe_queries > 0:
            q_last = _queries(module, hidden_states[:, -self.observe_queries:], {
                "position_embeddings": tuple(t[:, -self.observe_queries:] for t in kwargs["position_embeddings"])})
            q_last = q_last[0].transpose(0, 1) * scale
        if self.protect_marks == "sentences" and arena is self.shared.arena:  # the marks need the whole prompt
            self._deferred[idx] = (cache, k, v, q_all, q_last, q_len)          # read: _prompt_read fills the cache
            return output
        self._fill(cache, idx, k, v, q_all, q_last, q_len, None)
        return output

    def _make_caches(self, config: Any, q_len: int) -> _Shared:
        """The C caches for a prompt of q_len tokens. A model whose layers all
        attend to every position gets one cache of the press's budget. With
        sliding-window layers (Gemma 3: window W), those hold what they can
        attend to and no more: a sink-window cache of the last W positions
        (no sinks, no spans; in the press's dtype), or fewer when the budget
        per layer is smaller; the global layers share the rest of the bytes,
        so the whole stays within (1 - r) of the f16 exact cache's bytes of
        every layer (docs/python.md, "kvpress")."""
        n_layers, n_heads, n_kv, d = model_shape(config)
        params = dict(self.params)
        if self.method.endswith("-prefill"):  # the prefill methods compress the prompt: its length
            params.setdefault("prefix_len", q_len)
        slid, window = sliding_layers(config)
        kw = dict(method=self.method, dtype=self.dtype, context=q_len, seed=self.seed, **params)
        if not slid:
            return _Shared(KvcArena(n_layers, n_heads, n_kv, d, budget=self._budget(), **kw))
        if self.budget is not None:
            raise ValueError("KvcPress: a model with sliding-window layers takes its budget as compression_ratio "
                             "(the bytes are split between sliding and global layers)")
        glob = [i for i in range(n_layers) if i not in slid]
        total = (1.0 - self.compression_ratio) * q_len * n_layers * n_kv * 2 * d * 2  # f16 bytes of every layer
        per_layer = total / n_layers
        sliding = KvcArena(len(slid), n_heads, n_kv, d, method="sink-window", dtype=self.dtype, budget=window,
                           context=q_len, sink=0)
        if sliding.nbytes > per_layer * len(slid):  # not even the window fits: the largest that does
            sliding = KvcArena(len(slid), n_heads, n_kv, d, method="sink-window", dtype=self.dtype,
                               budget=f"{int(per_layer * len(slid))}B", context=q_len, sink=0)
        rest = int(total - sliding.nbytes)
        arena = KvcArena(len(glob), n_heads, n_kv, d, budget=f"{rest}B", **kw)
        local = {i: (arena, j) for j, i in enumerate(glob)}
        local.update({i: (sliding, j) for j, i in enumerate(slid)})
        return _Shared(arena, sliding, local)

    def _fill(self, cache: Any, idx: int, k: torch.Tensor, v: torch.Tensor, q_all: Optional[torch.Tensor],
              q_last: Optional[torch.Tensor], q_len: int, centres: Optional[np.ndarray]) -> None:
        """One layer's prompt into the C cache; the layer replaced by its view."""
        arena, local = self.shared.arena_of(idx)
        if arena is not self.shared.arena:  # a sliding-window layer: its recent positions, no spans
            q_all = q_last = centres = None
        if q_all is not None:
            arena.extend(local, k, v, q_all, centres=centres)
        else:
            if q_last is not None:
                arena.prefill_queries(local, q_last)
            arena.extend(local, k, v, centres=centres)
        cache.layers[idx] = KvcLayer(self.shared, idx, seen=q_len)
        if all(isinstance(layer, KvcLayer) for layer in cache.layers):  # the compressed context: kvpress's
            self.shared.take_mark(q_len)                                # pipeline comes back to it

    def _prompt_read(self, module: torch.nn.Module, args: Any, kwargs: dict, output: Any) -> Any:
        """"sentences": the prompt's surprisal from the last hidden states, the
        sentences chosen for the protected spans, then every layer's rows."""
        if not self._deferred:
            return output
        ids = kwargs.get("input_ids")
        if ids is None and args:
            ids = args[0]
        if ids is None:
            raise ValueError("KvcPress(protect_marks='sentences') needs the prompt's input_ids")
        ids = ids[0]
        hidden = output.last_hidden_state if hasattr(output, "last_hidden_state") else output[0]
        n = hidden.shape[1]
        if ids.shape[0] != n:
            raise ValueError(f"KvcPress: {ids.shape[0]} input ids for {n} hidden states")
        scores = prompt_surprisal(self._model, hidden[0], ids)
        tok = self.tokenizer
        if tok is None:
            from transformers import AutoTokenizer
            tok = self.tokenizer = AutoTokenizer.from_pretrained(self._model.config.name_or_path)
        ends = sentence_ends([tok.decode([i]) for i in ids.tolist()], scores)  # each token's own text
        plan = self.shared.arena.plan
        marks = spans_choose(scores, ends, first=plan["n_sink"], budget=plan["n_protect"],
                             radius=plan["protect_radius"])
        self.last_marks = marks
        for idx in sorted(self._deferred):
            cache, k, v, q_all, q_last, q_len = self._deferred[idx]
            self._fill(cache, idx, k, v, q_all, q_last, q_len, marks)
        self._deferred.clear()
        return output

    @property
    def nbytes(self) -> int:
        """Bytes of the last prompt's cache (0 before the first)."""
        return self.shared.nbytes if self.shared is not None else 0
