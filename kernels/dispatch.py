"""The one Triton/CPU dispatcher: the public functions (`evalkit.kernels.kda_decode`, ...) and the
fp32-twin check both pick an op's implementation here.

- CUDA tensors -> the op's Triton wrapper (`<op folder>/wrapper.py`);
- CPU tensors -> its float32 torch implementation (`kernels.cpu`), unless the environment has
  TRITON_INTERPRET=1, in which case the Triton kernels run in Triton's CPU interpreter (tests).

The Triton modules are imported lazily, on first use, so importing the package never needs a GPU
and TRITON_INTERPRET only has to be set before the first Triton call. The CPU implementation is
looked up on `kernels.cpu` at each call (a benchmark may wrap it there)."""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable

import torch

from . import cpu

# op -> the folder holding its Triton wrapper
OP_FOLDERS = {
    "kda_decode": "kda_decode",
    "kda_prefill": "kda_prefill",
    "causal_conv1d_prefill": "short_conv",
    "causal_conv1d_decode": "short_conv",
    "gated_rmsnorm": "gated_rmsnorm",
    "moe_combine": "moe_combine",
    "moe_gemm": "moe_gemm",
    "rms_norm": "rms_norm",
    "swiglu": "swiglu",
    "ssd_decode": "ssd_decode",
    "ssd_prefill": "ssd_prefill",
}
# GPU-only op -> the folder holding its Triton wrapper: the model layers keep their torch form
# for the CPU and call these through `triton_implementation` on CUDA tensors
GPU_OP_FOLDERS = {
    "mla_decode_attention": "mla_decode",
    "mla_prefill_attention": "mla_prefill",
}
# kda_decode / kda_prefill(q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, ...) and
# ssd_decode / ssd_prefill(x, dt_raw, B, C, A_log, dt_bias, D, state_pool, slots, ...): the position
# of state_pool; the seven layer inputs come before it
KDA_POOL_ARG = 7


def use_triton(t: torch.Tensor) -> bool:
    """True when a call on tensor `t` goes to Triton (CUDA, or CPU under TRITON_INTERPRET=1)."""
    return t.is_cuda or os.environ.get("TRITON_INTERPRET", "0") == "1"


def triton_implementation(op: str) -> Callable:
    """The op's Triton wrapper (it also takes the build options `rounding`, and `config` for decode)."""
    folder = OP_FOLDERS.get(op) or GPU_OP_FOLDERS[op]
    return getattr(importlib.import_module(f"{__package__}.{folder}.wrapper"), op)


def implementation(op: str, t: torch.Tensor) -> Callable:
    """The implementation of `op` for a call whose tensors are like `t` (see the module docstring)."""
    return triton_implementation(op) if use_triton(t) else getattr(cpu, op)
