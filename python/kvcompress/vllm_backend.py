"""The attention backend of kvcompress's vLLM plugin (kvcompress.vllm): the
pool's blocks hold, per (block, kv head, token), the core's key row then its
value row (kvc_row_bytes(dtype, head_dim) bytes each: int8 is d codes and an
f32 scale); keys and values are stored by the core's row kernel and read by
its batched attend (causal over a request's last positions). Imported by vLLM
only when the plugin is switched on.

KVCOMPRESS_VLLM_METHOD=sink-window (with KVCOMPRESS_VLLM_SINK, default 32,
and KVCOMPRESS_VLLM_WINDOW, default 1024, tokens) frees whole blocks as they
leave the window: the layers' spec is SinkWindowSpec, whose manager frees
the blocks between the sink blocks and the window once they are computed,
and whose admission ceiling is what it keeps. The attention reads the same
blocks (the freed ones stay in the worker's block table: it skips them).
Blocks are whole: the sinks are the first ceil(sink / block) blocks and the
window starts at a block boundary, so a little more than sink + window
tokens are kept. vLLM's blocks hold every kv head of a token, so only
methods that decide per token for all heads map onto them: sink-window does;
exact keeps everything (the default).
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import torch
from vllm.utils.math_utils import cdiv
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


def _tokens(name: str, default: int) -> int:
    text = os.environ.get(name, str(default))
    if not text.isdigit() or int(text) < (0 if name.endswith("SINK") else 1):
        raise ValueError(f"{name}={text!r}: want a whole number of tokens")
    return int(text)


SINK = _tokens("KVCOMPRESS_VLLM_SINK", 32)
WINDOW = _tokens("KVCOMPRESS_VLLM_WINDOW", 1024)


@dataclasses.dataclass(frozen=True, kw_only=True)
class SinkWindowSpec(FullAttentionSpec):
    """Full attention's spec that keeps the first sink_tokens and the last
    window_tokens of a request: what admission may count on."""

    # the defaults are the process's settings: vLLM's merge() of a group's
    # specs builds the class anew from the base fields only
    sink_tokens: int = SINK
    window_tokens: int = WINDOW

    def max_memory_usage_bytes(self, vllm_config) -> int:
        """A request's peak: the sink and window blocks, one block the
        window straddles, and one prefill chunk (read whole before the
        manager frees anything behind it); never more than full attention's."""
        chunk = min(vllm_config.scheduler_config.max_num_batched_tokens, vllm_config.model_config.max_model_len)
        kept = (cdiv(self.sink_tokens, self.block_size) + cdiv(self.window_tokens, self.block_size) + 1 +
                cdiv(chunk, self.block_size))
        return min(super().max_memory_usage_bytes(vllm_config), kept * self.page_size_bytes)


def kept_blocks(sink_tokens: int, window_tokens: int, block_size: int, computed: int) -> tuple[int, int]:
    """The gap [first, last) of block indices a request no longer needs once
    `computed` of its tokens are computed: after the sink blocks, before the
    block holding the window's first token. The manager frees it; the
    attention skips it."""
    first = cdiv(sink_tokens, block_size)
    return first, max(first, (computed - window_tokens + 1) // block_size)


class SinkWindowManager(FullAttentionManager):
    """Frees the blocks of the gap as the window moves past them."""

    #: blocks freed so far in this process (every layer group's; for tests and logs)
    freed_blocks = 0

    def remove_skipped_blocks(self, request_id, processed_computed_tokens, num_prompt_tokens=None) -> None:
        spec = self.kv_cache_spec
        first, last = kept_blocks(spec.sink_tokens, spec.window_tokens, self.block_size, processed_computed_tokens)
        if last > first and request_id in self.req_to_blocks:
            blocks = self.req_to_blocks[request_id]
            before = sum(b is self._null_block for b in blocks)
            self._remove_blocks_in_range(request_id, first, min(last, len(blocks)))
            SinkWindowManager.freed_blocks += sum(b is self._null_block for b in blocks) - before


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

    @classmethod
    def customize_spec(cls, spec):
        """The true bytes of a token per kv head: a key row and a value row."""
        if spec.head_size != getattr(spec, "head_size_v", spec.head_size):
            raise ValueError("kvcompress's vLLM backend wants equal key and value head sizes")
        rb = _core.row_bytes(DTYPE, spec.head_size)
        spec = dataclasses.replace(spec, dtype=torch.uint8, state_content_bytes=2 * rb)
        if METHOD == "sink-window" and type(spec) is FullAttentionSpec:
            fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec) if f.init}
            spec = SinkWindowSpec(**fields, sink_tokens=SINK, window_tokens=WINDOW)
        return spec


class KvcImpl(CPUAttentionBackendImpl):
    """Writes rows with the core's row kernel; attends with the core."""

    def _rows(self, kv_cache: torch.Tensor) -> int:
        return _core.row_bytes(DTYPE, self.head_size)

    def do_kv_cache_update(self, layer, key, value, kv_cache, slot_mapping) -> None:
        rb = self._rows(kv_cache)
        n = slot_mapping.shape[0]
        slots = slot_mapping[:n].to(torch.int64)
        keep = slots >= 0
        if not bool(keep.any()):
            return
        slots = slots[keep]
        h, d = self.num_kv_heads, self.head_size
        block_size = kv_cache.shape[2]
        rows = []
        for x in (key[:n][keep], value[:n][keep]):
            xs = np.ascontiguousarray(x.detach().float().reshape(-1, d).numpy())
            out = np.empty((xs.shape[0], rb), dtype=np.uint8)
            _core.rows_store(DTYPE, xs, out)
            rows.append(torch.from_numpy(out).view(-1, h, rb))
        blocks, offsets = slots // block_size, slots % block_size
        heads = torch.arange(h)
        kv_cache[blocks[:, None], heads[None, :], offsets[:, None], :rb] = rows[0]
        kv_cache[blocks[:, None], heads[None, :], offsets[:, None], rb:2 * rb] = rows[1]

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
        _core.attend_blocks(DTYPE, kv_cache.contiguous().numpy(),
                            attn_metadata.block_table[:n_req].to(torch.int32).contiguous().numpy(),
                            attn_metadata.seq_lens.to(torch.int32).contiguous().numpy(),
                            attn_metadata.query_start_loc[:n_req + 1].to(torch.int32).contiguous().numpy(),
                            q.numpy(), res.numpy(), float(self.scale),
                            SINK if METHOD == "sink-window" else 0, WINDOW if METHOD == "sink-window" else 0)
        if res is not out3:
            out3.copy_(res)
        return output
