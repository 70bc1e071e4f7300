"""The float64 oracle, by op name: every op's token-by-token reference (each lives in its op's
folder, `<op>/reference.py`), with the kernels' signatures; it updates the pools in place the same
way and returns float64 outputs (cast them yourself to compare like with like). The per-token
pieces (gate, l2norm, step, store) are in `kda_decode/reference.py`."""

from __future__ import annotations

from .gated_rmsnorm.reference import gated_rmsnorm
from .kda_decode.reference import kda_decode
from .kda_prefill.reference import kda_prefill
from .mla_prefill.reference import mla_prefill_attention
from .moe_combine.reference import moe_combine
from .moe_gemm.reference import moe_gemm
from .rms_norm.reference import rms_norm
from .short_conv.reference import causal_conv1d_decode, causal_conv1d_prefill
from .ssd_decode.reference import ssd_decode
from .ssd_prefill.reference import ssd_prefill
from .swiglu.reference import swiglu

__all__ = [
    "causal_conv1d_decode",
    "causal_conv1d_prefill",
    "gated_rmsnorm",
    "kda_decode",
    "kda_prefill",
    "mla_prefill_attention",
    "moe_combine",
    "moe_gemm",
    "rms_norm",
    "ssd_decode",
    "ssd_prefill",
    "swiglu",
]
