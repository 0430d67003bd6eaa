"""The attention backend of kvcompress's vLLM plugin (kvcompress.vllm): the
pool's blocks hold, per (block, kv head, token), the core's key row then its
value row (kvc_row_bytes(dtype, head_dim) bytes each: int8 is d codes and an
f32 scale); keys and values are stored by the core's row kernel and read by
its batched attend (causal over a request's last positions). Imported by vLLM
only when the plugin is switched on.
"""
from __future__ import annotations

import dataclasses
import os

import numpy as np
import torch
from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend, CPUAttentionBackendImpl

from . import _core

DTYPE = os.environ.get("KVCOMPRESS_VLLM_DTYPE", "int8")
if DTYPE not in ("f16", "int8", "int4"):
    raise ValueError(f"KVCOMPRESS_VLLM_DTYPE={DTYPE!r}: want f16, int8 or int4")


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
        return dataclasses.replace(spec, dtype=torch.uint8, state_content_bytes=2 * rb)


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
        rb = self._rows(kv_cache)
        hq, hkv, d = self.num_heads, self.num_kv_heads, self.head_size
        group = hq // hkv
        block_size = kv_cache.shape[2]
        n_tok = attn_metadata.num_actual_tokens
        out3 = output[:n_tok].view(n_tok, hq, d)
        starts = attn_metadata.query_start_loc.tolist()
        lens = attn_metadata.seq_lens.tolist()
        for r, seq_len in enumerate(lens):
            q0, q1 = starts[r], starts[r + 1]
            if q1 <= q0:
                continue
            n_blocks = -(-seq_len // block_size)
            blocks = attn_metadata.block_table[r, :n_blocks].to(torch.int64)
            rows = kv_cache[blocks].permute(1, 0, 2, 3).reshape(hkv, n_blocks * block_size, -1)[:, :seq_len]
            q = query[q0:q1].float()
            for h in range(hkv):
                k = np.ascontiguousarray(rows[h, :, :rb].numpy())
                v = np.ascontiguousarray(rows[h, :, rb:2 * rb].numpy())
                qh = np.ascontiguousarray(q[:, h * group:(h + 1) * group].numpy())
                res = np.empty_like(qh)
                _core.attend_rows(DTYPE, k, v, qh, float(self.scale), bool(attn_metadata.causal), res)
                out3[q0:q1, h * group:(h + 1) * group] = torch.from_numpy(res).to(output.dtype)
        return output
