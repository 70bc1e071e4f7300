"""KDA kernels (installed as `evalkit.kernels`): one op per folder, each with its Triton kernel,
Python wrapper and naive reference; the state pool's storage format (`formats.StateFormat`: fp32,
fp16, bf16, fp8, mN x rtne/sr/rtz) is a build constant, defined bit for bit by `rounding`.

Public entry points dispatch on the tensors' device:
- CUDA tensors -> the Triton kernels;
- CPU tensors -> `evalkit.kernels.cpu` (float32 torch: chunked prefill, recurrent decode), unless
  the environment has TRITON_INTERPRET=1, in which case the Triton kernels run in Triton's CPU
  interpreter (tests).

The Triton modules are imported lazily, on first use, so importing this package never needs a GPU
and TRITON_INTERPRET only has to be set before the first Triton call."""

from __future__ import annotations

import os

# The format vocabulary needs no torch (a light install parses arms); everything else does.
from .errors import FormatError, KernelError, KernelInputError, TwinMismatch
from .formats import StateFormat, parse_format

try:
    import torch
except ModuleNotFoundError:  # the `engine` extra is not installed: formats only
    torch = None

if torch is not None:
    from . import cpu

    # The op subpackages share names with the public functions below. Import them first so that the
    # function definitions win the package attribute (a later `from .kda_decode.wrapper import ...`
    # finds the subpackage in sys.modules and does not rebind it). Their __init__ imports nothing heavy.
    from . import gated_rmsnorm as _gated_rmsnorm_pkg  # noqa: F401
    from . import kda_decode as _kda_decode_pkg  # noqa: F401
    from . import kda_prefill as _kda_prefill_pkg  # noqa: F401
    from . import short_conv as _short_conv_pkg  # noqa: F401
    from .common import STATE_DTYPES, resolve_state_dtype, state_dtype_name
    from .rounding import round_to_format
    from .twin_check import TwinChecker

__all__ = [
    "STATE_DTYPES",
    "FormatError",
    "KernelError",
    "KernelInputError",
    "StateFormat",
    "TwinChecker",
    "TwinMismatch",
    "causal_conv1d_decode",
    "causal_conv1d_prefill",
    "gated_rmsnorm",
    "kda_decode",
    "kda_prefill",
    "parse_format",
    "resolve_state_dtype",
    "round_to_format",
    "state_dtype_name",
    "use_triton",
]


def use_triton(t: torch.Tensor) -> bool:
    """True when a call on tensor `t` goes to Triton (CUDA, or CPU under TRITON_INTERPRET=1)."""
    return t.is_cuda or os.environ.get("TRITON_INTERPRET", "0") == "1"


def kda_decode(
    q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, *, fmt=None, sr_seed=0, positions=None
) -> torch.Tensor:
    """One KDA token per sequence over a state pool updated in place at `slots`; returns o [B, H, V].

    `fmt`: the pool's `StateFormat` (or its name; default: round to nearest in the pool's dtype).
    Stochastic rounding also takes `sr_seed` (the launch's seed, e.g. the layer index) and
    `positions` [B] (each sequence's position of the token whose state is stored)."""
    if use_triton(q):
        from .kda_decode.wrapper import kda_decode as impl
    else:
        impl = cpu.kda_decode
    store = dict(fmt=fmt, sr_seed=sr_seed, positions=positions)
    return impl(q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, **store)


def kda_prefill(
    q,
    k,
    v,
    g_raw,
    beta_raw,
    A_log,
    dt_bias,
    state_pool,
    slots,
    cu_seqlens,
    has_initial_state,
    *,
    chunk_size: int = 64,
    intra_chunk_dtype: torch.dtype | None = None,
    fmt=None,
    sr_seed: int = 0,
    positions: torch.Tensor | None = None,
) -> torch.Tensor:
    """Packed variable-length KDA prefill; final states stored to pool[slots], rounded once the
    `fmt` way (see `kda_decode`; `positions` [N]: each sequence's last token position)."""
    if use_triton(q):
        from .kda_prefill.wrapper import kda_prefill as impl
    else:
        impl = cpu.kda_prefill
    return impl(
        q,
        k,
        v,
        g_raw,
        beta_raw,
        A_log,
        dt_bias,
        state_pool,
        slots,
        cu_seqlens,
        has_initial_state,
        chunk_size=chunk_size,
        intra_chunk_dtype=intra_chunk_dtype,
        fmt=fmt,
        sr_seed=sr_seed,
        positions=positions,
    )


def causal_conv1d_prefill(x, weight, conv_pool, slots, cu_seqlens, has_initial_state) -> torch.Tensor:
    """Depthwise causal conv + SiLU over packed sequences; conv_pool [S, C, W-1] updated in place."""
    if use_triton(x):
        from .short_conv.wrapper import causal_conv1d_prefill as impl
    else:
        impl = cpu.causal_conv1d_prefill
    return impl(x, weight, conv_pool, slots, cu_seqlens, has_initial_state)


def causal_conv1d_decode(x, weight, conv_pool, slots) -> torch.Tensor:
    """One new input column per sequence x [B, C]; conv_pool shifted in place."""
    if use_triton(x):
        from .short_conv.wrapper import causal_conv1d_decode as impl
    else:
        impl = cpu.causal_conv1d_decode
    return impl(x, weight, conv_pool, slots)


def gated_rmsnorm(o, gate, weight, eps: float) -> torch.Tensor:
    """fp32 RMSNorm over the last dim x weight x sigmoid(gate), returned in o's dtype."""
    if use_triton(o):
        from .gated_rmsnorm.wrapper import gated_rmsnorm as impl
    else:
        impl = cpu.gated_rmsnorm
    return impl(o, gate, weight, eps)
