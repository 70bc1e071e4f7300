"""The CPU backend, by op name: every op's float32 torch implementation (each lives in its op's
folder, `<op>/cpu.py`), with the Triton wrappers' signatures. The dispatcher (`dispatch.py`) and
the tests reach them through this one namespace."""

from __future__ import annotations

from .gated_rmsnorm.cpu import gated_rmsnorm
from .kda_decode.cpu import kda_decode
from .kda_prefill.cpu import kda_prefill
from .moe_combine.cpu import moe_combine
from .moe_gemm.cpu import moe_gemm
from .rms_norm.cpu import rms_norm
from .short_conv.cpu import causal_conv1d_decode, causal_conv1d_prefill
from .ssd_decode.cpu import ssd_decode
from .ssd_prefill.cpu import ssd_prefill
from .swiglu.cpu import swiglu

__all__ = [
    "causal_conv1d_decode",
    "causal_conv1d_prefill",
    "gated_rmsnorm",
    "kda_decode",
    "kda_prefill",
    "moe_combine",
    "moe_gemm",
    "rms_norm",
    "ssd_decode",
    "ssd_prefill",
    "swiglu",
]
