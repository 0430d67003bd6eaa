"""The attention backend of kvcompress's vLLM plugin (kvcompress.vllm): the
pool's blocks hold, per (block, kv head, token), the core's key row then its
value row (kvc_row_bytes(dtype, head_dim) bytes each: int8 is d codes and an
f32 scale); keys and values are stored by the core's row kernel and read by
its batched attend (causal over a request's last positions). Imported by vLLM
only when the plugin is switched on.

KVCOMPRESS_VLLM_METHOD=sink-window is the recommended configuration on
whole blocks: the sinks (KVCOMPRESS_VLLM_SINK, default 32 tokens), the
recent window (KVCOMPRESS_VLLM_WINDOW, default 1024) and protected spans
(KVCOMPRESS_VLLM_PROTECT, default 352 tokens, a quarter of the three; 0 for
none). The layers' spec is SinkWindowSpec, whose manager frees the blocks
between the sink blocks and the window once they are computed, but for the
protected ones, and whose admission ceiling is what it keeps. Protected
blocks: the attention runs the core's key-outlier test (kvc_outlier_flags,
the stream's protected-span test) on every prompt token of every layer and
kv head; each flag scores the blocks within KVCOMPRESS_VLLM_PROTECT_RADIUS
(default 25) tokens of its token, and of the blocks leaving the window the
manager keeps the best scored, up to the protect budget (ties: the earlier).
The attention reads exactly the blocks the manager keeps (the freed ones
stay in the worker's block table: it marks them -1). Blocks are whole: the
sinks are the first ceil(sink / block) blocks and the window starts at a
block boundary, so a little more than sink + window tokens are kept.
vLLM's blocks hold every kv head of a token, so only decisions made for all
heads at once map onto them (docs/vllm.md). The scores pass from the
attention to the manager in process memory: the scheduler and the worker
must share a process (tensor parallel 1 and VLLM_ENABLE_V1_MULTIPROCESSING=0,
without which vLLM's CPU build puts the worker in a process of its own); the
manager refuses to start otherwise.
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import torch
from vllm.utils.math_utils import cdiv
from vllm.v1.attention.backend import MultipleOf
from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend, CPUAttentionBackendImpl
from vllm.v1.core.single_type_kv_cache_manager import FullAttentionManager, register_all_kvcache_specs
from vllm.v1.kv_cache_interface import FullAttentionSpec
from vllm.v1.kv_cache_spec_registry import KVCacheSpecRegistry

from . import _core

DTYPE = os.environ.get("KVCOMPRESS_VLLM_DTYPE", "int8")
if DTYPE not in ("f16", "int8", "int4"):
    raise ValueError(f"KVCOMPRESS_VLLM_DTYPE={DTYPE!r}: want f16, int8 or int4")
METHOD = os.environ.get("KVCOMPRESS_VLLM_METHOD", "exact")
if METHOD not in ("exact", "sink-window"):
    raise ValueError(f"KVCOMPRESS_VLLM_METHOD={METHOD!r}: want exact or sink-window (the methods whose "
                     f"decisions are whole tokens of every kv head, which vLLM's blocks are)")


def _tokens(name: str, default: int, least: int) -> int:
    text = os.environ.get(name, str(default))
    if not text.isdigit() or int(text) < least:
        raise ValueError(f"{name}={text!r}: want a whole number of tokens, at least {least}")
    return int(text)


SINK = _tokens("KVCOMPRESS_VLLM_SINK", 32, 0)
WINDOW = _tokens("KVCOMPRESS_VLLM_WINDOW", 1024, 1)
PROTECT = _tokens("KVCOMPRESS_VLLM_PROTECT", 352, 0) if METHOD == "sink-window" else 0
RADIUS = _tokens("KVCOMPRESS_VLLM_PROTECT_RADIUS", 25, 0)
if PROTECT and not SINK:
    raise ValueError("KVCOMPRESS_VLLM_PROTECT wants KVCOMPRESS_VLLM_SINK >= 1: a request's first block, never "
                     "freed, names it between the attention and the manager")


class _Shared:
    """What the attention tells the manager, in this process's memory.

    score: physical block id -> flags (layer, kv head, token) whose span
           reaches into the block; dropped when the block is freed.
    kept:  a request's first block id -> the logical indices of the blocks
           it keeps in the gap (its protected blocks), as the manager last
           decided; read by the attention.
    carry: a request's first block id -> layer -> (its last <= 32 prompt
           keys, the outlier test's state per kv head), to continue the test
           across prefill chunks.
    attention_here: a KvcImpl was made in this process.
    first_layer, step_arrays: the layer that runs first in a step, and the
           block table, lengths and query starts it made for the others.
    """
    score: dict[int, int] = {}
    kept: dict[int, tuple[int, ...]] = {}
    carry: dict[int, dict[str, tuple[np.ndarray, np.ndarray]]] = {}
    attention_here = False
    first_layer: str | None = None
    step_arrays: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class SinkWindowSpec(FullAttentionSpec):
    """Full attention's spec that keeps the first sink_tokens and the last
    window_tokens of a request: what admission may count on."""

    # the defaults are the process's settings: vLLM's merge() of a group's
    # specs builds the class anew from the base fields only
    sink_tokens: int = SINK
    window_tokens: int = WINDOW
    protect_tokens: int = PROTECT

    def blocks_kept(self) -> int:
        """The blocks a request holds between steps once its window moves:
        sinks, protected blocks, the window's and the one it straddles."""
        return (cdiv(self.sink_tokens, self.block_size) + cdiv(self.protect_tokens, self.block_size) +
                cdiv(self.window_tokens, self.block_size) + 1)

    def max_memory_usage_bytes(self, vllm_config) -> int:
        """A request's peak: the blocks it keeps and one prefill chunk (read
        whole before the manager frees anything behind it); never more than
        full attention's."""
        if vllm_config.scheduler_config.async_scheduling:
            raise ValueError("kvcompress's sink-window frees blocks as a request's computed tokens say, which "
                             "asynchronous scheduling runs ahead of: turn it off")
        chunk = min(vllm_config.scheduler_config.max_num_batched_tokens, vllm_config.model_config.max_model_len)
        kept = self.blocks_kept() + cdiv(chunk, self.block_size)
        return min(super().max_memory_usage_bytes(vllm_config), kept * self.page_size_bytes)


def gap_blocks(sink_tokens: int, window_tokens: int, block_size: int, computed: int) -> tuple[int, int]:
    """The gap [first, last) of block indices a request no longer needs once
    `computed` of its tokens are computed: after the sink blocks, before the
    block holding the window's first token. The manager frees it; the
    attention skips it."""
    first = cdiv(sink_tokens, block_size)
    return first, max(first, (computed - window_tokens + 1) // block_size)


class SinkWindowManager(FullAttentionManager):
    """Frees the blocks of the gap as the window moves past them, but for the
    best scored ones, up to the protect budget."""

    #: blocks freed so far in this process (every layer group's; for tests and logs)
    freed_blocks = 0

    def __init__(self, kv_cache_spec, *args, **kwargs):
        super().__init__(kv_cache_spec, *args, **kwargs)
        if kv_cache_spec.protect_tokens and not _Shared.attention_here:
            raise RuntimeError("kvcompress's protected blocks need the scheduler and the attention in one process: "
                               "tensor parallel 1 and VLLM_ENABLE_V1_MULTIPROCESSING=0 (vLLM's CPU build otherwise "
                               "runs the worker in a process of its own); or KVCOMPRESS_VLLM_PROTECT=0 for "
                               "sink-window alone")

    def remove_skipped_blocks(self, request_id, processed_computed_tokens, num_prompt_tokens=None) -> None:
        spec = self.kv_cache_spec
        first, last = gap_blocks(spec.sink_tokens, spec.window_tokens, self.block_size, processed_computed_tokens)
        blocks = self.req_to_blocks.get(request_id)
        if not blocks or last <= first:
            return
        live = [i for i in range(first, min(last, len(blocks))) if blocks[i] is not self._null_block]
        if not live:
            return
        budget = cdiv(spec.protect_tokens, self.block_size)
        scored = [i for i in live if _Shared.score.get(blocks[i].block_id, 0) > 0]
        keep = set(sorted(scored, key=lambda i: (-_Shared.score[blocks[i].block_id], i))[:budget])
        freed = [blocks[i] for i in live if i not in keep]
        for i in live:
            if i not in keep:
                blocks[i] = self._null_block
        for b in freed:
            _Shared.score.pop(b.block_id, None)
        if spec.protect_tokens:
            _Shared.kept[blocks[0].block_id] = tuple(sorted(keep))
        if freed:
            self.block_pool.free_blocks(freed)
            SinkWindowManager.freed_blocks += len(freed)

    def free(self, request_id) -> None:
        blocks = self.req_to_blocks.get(request_id, ())
        if blocks and blocks[0] is not self._null_block:
            _Shared.kept.pop(blocks[0].block_id, None)
            _Shared.carry.pop(blocks[0].block_id, None)
        for b in blocks:
            if b is not self._null_block:
                _Shared.score.pop(b.block_id, None)
        super().free(request_id)


def register_specs() -> None:
    """SinkWindowSpec and its manager, after vLLM's own (the registry fills
    itself with the built-in specs only while it is empty)."""
    register_all_kvcache_specs(None)
    KVCacheSpecRegistry.register(SinkWindowSpec, SinkWindowManager, uniform_type_base_spec=FullAttentionSpec)


class KvcBackend(CPUAttentionBackend):
    """CPU_ATTN with the pool in the core's rows."""

    @staticmethod
    def get_impl_cls() -> type["KvcImpl"]:
        return KvcImpl

    @staticmethod
    def get_supported_kernel_block_sizes(kv_cache_spec=None):
        """Any multiple of 16 tokens (the core's attend reads rows, not
        vLLM's CPU kernel's 32-token tiles): finer blocks, finer eviction."""
        return [MultipleOf(16)]

    @classmethod
    def customize_spec(cls, spec):
        """The true bytes of a token per kv head: a key row and a value row."""
        if spec.head_size != getattr(spec, "head_size_v", spec.head_size):
            raise ValueError("kvcompress's vLLM backend wants equal key and value head sizes")
        rb = _core.row_bytes(DTYPE, spec.head_size)
        spec = dataclasses.replace(spec, dtype=torch.uint8, state_content_bytes=2 * rb)
        if METHOD == "sink-window" and type(spec) is FullAttentionSpec:
            fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.init}
            spec = SinkWindowSpec(**fields, sink_tokens=SINK, window_tokens=WINDOW, protect_tokens=PROTECT)
        return spec


class KvcImpl(CPUAttentionBackendImpl):
    """Writes rows with the core's row kernel; attends with the core."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        _Shared.attention_here = True

    def do_kv_cache_update(self, layer, key, value, kv_cache, slot_mapping) -> None:
        """The new tokens' key and value rows, stored by the core's row
        kernel straight into the pool at their slots (padding: slot -1)."""
        if not kv_cache.is_contiguous():
            raise NotImplementedError("kvcompress's backend writes the pool in place: want a contiguous one")
        n = slot_mapping.shape[0]
        h, d = self.num_kv_heads, self.head_size
        slots = slot_mapping[:n].to(torch.int64).contiguous().numpy()
        pool = kv_cache.numpy()
        for half, x in enumerate((key, value)):
            _core.rows_store_slots(DTYPE, x[:n].detach().float().contiguous().view(n, h, d).numpy(), pool, slots, half)

    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output, output_scale=None,
                output_block_scale=None):
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("fused output quantisation is not supported by kvcompress's backend")
        if attn_metadata is None:  # warming up
            return output
        hq, d = self.num_heads, self.head_size
        n_tok = attn_metadata.num_actual_tokens
        if output.dtype != torch.float32:
            raise NotImplementedError("kvcompress's vLLM backend attends float32 models (dtype='float32')")
        q = query[:n_tok].float().contiguous().view(n_tok, hq, d)
        out3 = output[:n_tok].view(n_tok, hq, d)
        res = out3 if out3.is_contiguous() else torch.empty_like(q)
        n_req = attn_metadata.seq_lens.shape[0]
        block_size = kv_cache.shape[2]
        table, seq, starts = self._step_arrays(layer.layer_name, attn_metadata, n_req, block_size)
        if PROTECT and key is not None:
            self._score_prompt_keys(layer.layer_name, key, seq, starts, n_req, table, block_size)
        # the (request, kv head) items over torch's threads (vLLM's CPU build sets them to its cores)
        _core.attend_blocks(DTYPE, kv_cache.contiguous().numpy(), table, seq, starts, q.numpy(), res.numpy(),
                            float(self.scale), torch.get_num_threads())
        if res is not out3:
            out3.copy_(res)
        return output

    def _step_arrays(self, layer_name, attn_metadata, n_req: int, block_size: int):
        """The step's block table as the attention reads it (the blocks the
        manager freed marked -1: its gap, but for the protected blocks it
        kept), sequence lengths and query starts, as int32 arrays. Made by
        the first layer of each step; the others reuse them (the manager
        decides between steps only)."""
        if _Shared.first_layer is None:
            _Shared.first_layer = layer_name
        if layer_name != _Shared.first_layer and _Shared.step_arrays is not None:
            return _Shared.step_arrays
        table = attn_metadata.block_table[:n_req].to(torch.int32).numpy().copy()
        seq = attn_metadata.seq_lens[:n_req].to(torch.int32).contiguous().numpy()
        starts = attn_metadata.query_start_loc[:n_req + 1].to(torch.int32).contiguous().numpy()
        if METHOD == "sink-window":
            for r in range(n_req):
                computed = int(seq[r]) - int(starts[r + 1] - starts[r])
                first, last = gap_blocks(SINK, WINDOW, block_size, computed)
                if last > first:
                    keep = [i for i in _Shared.kept.get(int(table[r, 0]), ()) if first <= i < last]
                    saved = table[r, keep].copy()
                    table[r, first:last] = -1
                    table[r, keep] = saved
        _Shared.step_arrays = (table, seq, starts)
        return _Shared.step_arrays

    def _score_prompt_keys(self, layer_name, key, seq, starts, n_req: int, table: np.ndarray, block_size: int) -> None:
        """The outlier test on this layer's new prompt keys (requests with
        more than one new token: prefill chunks), continued from the
        request's previous chunk; each flag adds one to the score of every
        block its span (RADIUS tokens either side) reaches and that is read."""
        h, d = self.num_kv_heads, self.head_size
        for r in range(n_req):
            q0, q1 = int(starts[r]), int(starts[r + 1])
            rid = int(table[r, 0])
            if q1 - q0 <= 1:  # decoding: its prompt is done
                _Shared.carry.pop(rid, None)
                continue
            computed = int(seq[r]) - (q1 - q0)
            layers = _Shared.carry.setdefault(rid, {})
            if computed == 0:
                layers.pop(layer_name, None)
            context, state = layers.get(layer_name, (np.zeros((0, h, d), np.float32), np.zeros((h, 3))))
            keys = np.ascontiguousarray(key[q0:q1].detach().float().reshape(q1 - q0, h, d).numpy())
            flags = np.empty((q1 - q0, h), np.uint8)
            _core.outlier_flags(keys, context, state, flags)
            layers[layer_name] = (np.ascontiguousarray(np.concatenate([context, keys])[-32:]), state)
            counts = flags.sum(axis=1)
            for i in np.flatnonzero(counts):
                pos = computed + int(i)
                lo, hi = max(0, pos - RADIUS) // block_size, min(int(seq[r]) - 1, pos + RADIUS) // block_size
                for b in range(lo, hi + 1):
                    if table[r, b] >= 0:
                        bid = int(table[r, b])
                        _Shared.score[bid] = _Shared.score.get(bid, 0) + int(counts[i])
