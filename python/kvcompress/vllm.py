"""kvcompress as a vLLM plugin (docs/vllm.md).

Installing kvcompress next to vLLM 0.32 registers an entry point of vLLM's
"vllm.general_plugins" group, which vLLM runs in each of its processes. It
changes nothing unless ``KVCOMPRESS_VLLM=1``: then the CPU attention backend
(vLLM selects CPU_ATTN on CPU whatever was asked for) is replaced by
``kvcompress.vllm_backend.KvcBackend``, whose pool holds the core's rows
(``KVCOMPRESS_VLLM_DTYPE``: int8, the default, int4 or f16) and whose
attention is the core's batched attend over them. vLLM sizes its pool from
the bytes the backend declares per token. ``KVCOMPRESS_VLLM_METHOD=sink-window``
adds the recommended configuration on whole blocks: sinks, a recent window
and protected blocks, the others freed as the window passes
(kvcompress.vllm_backend).
"""
from __future__ import annotations

import os

#: The vLLM version the plugin is tested with (its hooks are internal and move).
VLLM_VERSION = "0.32.0"


def enabled() -> bool:
    """KVCOMPRESS_VLLM=1 switches the plugin on."""
    return os.environ.get("KVCOMPRESS_VLLM", "") == "1"


def register() -> None:
    """vLLM's plugin hook: override CPU_ATTN when switched on."""
    if not enabled():
        return
    import vllm
    if vllm.__version__ != VLLM_VERSION:
        raise RuntimeError(f"kvcompress's vLLM plugin is tested with vLLM {VLLM_VERSION}; this is "
                           f"{vllm.__version__} (unset KVCOMPRESS_VLLM to run vLLM without it)")
    from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend
    register_backend(AttentionBackendEnum.CPU_ATTN, "kvcompress.vllm_backend.KvcBackend")
    from .vllm_backend import register_specs
    register_specs()
