"""KDA kernels (installed as `evalkit.kernels`): one op per folder; the state pool's storage
format (`formats.StateFormat`: fp32, fp16, bf16, fp8, mN x rtne/sr/rtz) is a build constant,
defined bit for bit by `rounding`.

Public entry points dispatch on the tensors' device (`dispatch.py`): CUDA tensors -> the Triton
kernels; CPU tensors -> `evalkit.kernels.cpu` (float32 torch), or the Triton kernels in Triton's
CPU interpreter under TRITON_INTERPRET=1 (tests). Each op's folder holds its Triton kernel and
wrapper, CPU implementation, float64 reference (`evalkit.kernels.reference` by name) and naive form.
This package imports nothing from the rest of evalkit: it is the lowest layer."""

from __future__ import annotations

# The format vocabulary needs no torch (a light install parses arms); everything else does.
from .errors import FormatError, KernelError, KernelInputError, TwinMismatch
from .formats import StateFormat, parse_format

try:
    import torch
except ModuleNotFoundError:  # the `engine` extra is not installed: formats only
    torch = None

if torch is not None:
    from . import cpu  # noqa: F401 - the CPU backend by op name (kernels.cpu)

    # The op subpackages share names with the public functions below. Import them first so that the
    # function definitions win the package attribute (a later `from .kda_decode.wrapper import ...`
    # finds the subpackage in sys.modules and does not rebind it). Their __init__ imports nothing heavy.
    from . import gated_rmsnorm as _gated_rmsnorm_pkg  # noqa: F401
    from . import kda_decode as _kda_decode_pkg  # noqa: F401
    from . import kda_prefill as _kda_prefill_pkg  # noqa: F401
    from . import moe_combine as _moe_combine_pkg  # noqa: F401
    from . import rms_norm as _rms_norm_pkg  # noqa: F401
    from . import short_conv as _short_conv_pkg  # noqa: F401
    from . import ssd_decode as _ssd_decode_pkg  # noqa: F401
    from . import ssd_prefill as _ssd_prefill_pkg  # noqa: F401
    from . import swiglu as _swiglu_pkg  # noqa: F401
    from .common import STATE_DTYPES, resolve_state_dtype, state_dtype_name
    from .dispatch import implementation, triton_implementation, use_triton
    from .mla_decode import MLA_DECODE_SPLIT
    from .rounding import round_to_format
    from .ssd_prefill import SSD_PREFILL_BLOCK
    from .twin_check import TwinChecker

__all__ = [
    "MLA_DECODE_SPLIT",
    "SSD_PREFILL_BLOCK",
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
    "moe_combine",
    "moe_gemm",
    "parse_format",
    "resolve_state_dtype",
    "rms_norm",
    "round_to_format",
    "ssd_decode",
    "ssd_prefill",
    "state_dtype_name",
    "swiglu",
    "triton_implementation",
    "use_triton",
]


def kda_decode(
    q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, *, fmt=None, sr_seed=0, positions=None
) -> torch.Tensor:
    """One KDA token per sequence over a state pool updated in place at `slots`; returns o [B, H, V].

    `fmt`: the pool's `StateFormat` (or its name; default: round to nearest in the pool's dtype).
    Stochastic rounding also takes `sr_seed` (the launch's seed, e.g. the layer index) and
    `positions` [B] (each sequence's position of the token whose state is stored)."""
    impl = implementation("kda_decode", q)
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
        fmt=fmt,
        sr_seed=sr_seed,
        positions=positions,
    )


def _prefill_implementation(op: str, x, triton_options: dict, kernel: str):
    """The prefill `op` for `x`'s device; `triton_options` name a choice of `kernel`, which the
    CPU's float32 form does not have: refused there."""
    impl = implementation(op, x)
    if triton_options and impl is getattr(cpu, op):
        raise KernelInputError(
            f"{', '.join(sorted(triton_options))}: a choice of {kernel} (GPU, or "
            "TRITON_INTERPRET=1); the CPU runs its float32 form"
        )
    return impl


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
    **triton_options,
) -> torch.Tensor:
    """Packed variable-length KDA prefill; final states stored to pool[slots], rounded once the
    `fmt` way (see `kda_decode`; `positions` [N]: each sequence's last token position).
    `triton_options` (`variant`, `dot_precision`: `kda_prefill/wrapper.py`) choose the Triton
    kernel; the CPU's float32 form has none and refuses them."""
    impl = _prefill_implementation("kda_prefill", q, triton_options, "the Triton prefill kernel")
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
        **triton_options,
    )


def causal_conv1d_prefill(
    x, weight, conv_pool, slots, cu_seqlens, has_initial_state, bias=None, groups: int = 1
) -> torch.Tensor:
    """Depthwise causal conv (+ `bias` [C], Mamba2's) + SiLU over packed sequences x [T, C] (rows
    may be strided, channels adjacent); conv_pool [S, C, W-1] updated in place. Returns [T, C], or
    with `groups` > 1 [groups, T, C // groups] (each group of channels contiguous)."""
    impl = implementation("causal_conv1d_prefill", x)
    return impl(x, weight, conv_pool, slots, cu_seqlens, has_initial_state, **_conv_options(bias, groups))


def causal_conv1d_decode(x, weight, conv_pool, slots, bias=None, groups: int = 1) -> torch.Tensor:
    """One new input column per sequence x [B, C] (+ `bias` [C] before the SiLU); conv_pool shifted
    in place. Returns [B, C], or [groups, B, C // groups] as the prefill does."""
    impl = implementation("causal_conv1d_decode", x)
    return impl(x, weight, conv_pool, slots, **_conv_options(bias, groups))


def _conv_options(bias, groups: int) -> dict:
    """Only the options given: the shorter call every KDA/GDN layer made before them (and wrappers
    take) stays the same."""
    return {**({"bias": bias} if bias is not None else {}), **({"groups": groups} if groups != 1 else {})}


def gated_rmsnorm(o, gate, weight, eps: float) -> torch.Tensor:
    """fp32 RMSNorm over the last dim x weight x sigmoid(gate), returned in o's dtype."""
    return implementation("gated_rmsnorm", o)(o, gate, weight, eps)


def moe_combine(ys, inv, w, dtype) -> torch.Tensor:
    """MoE output rows: out[t] = sum_j w[t, j] ys[inv[t, j]] (fp32, top-k in order) in `dtype`."""
    return implementation("moe_combine", ys)(ys, inv, w, dtype)


def moe_gemm(x, w, offs) -> torch.Tensor:
    """The MoE experts' grouped GEMM for few rows per expert (a decode step): y[r] = x[r] @ w[e]^T
    for the rows of expert e (sorted by expert; offs int32 [E] their cumulative ends), fp32 sums,
    in x's dtype; a row's result does not depend on the other rows."""
    return implementation("moe_gemm", x)(x, w, offs)


def rms_norm(x, weight, eps: float) -> torch.Tensor:
    """transformers' RMSNorm: x normalised in fp32, rounded to x's dtype, times weight (one Triton
    pass on the GPU, whose sum of squares may differ from torch's in the last bit)."""
    return implementation("rms_norm", x)(x, weight, eps)


def swiglu(gu) -> torch.Tensor:
    """silu(g) * u for gu = [g | u] along the last dim, each step rounded to gu's dtype as torch does."""
    return implementation("swiglu", gu)(gu)


def ssd_decode(
    x, dt_raw, B, C, A_log, dt_bias, D, state_pool, slots, *, fmt=None, sr_seed=0, positions=None
) -> torch.Tensor:
    """One Mamba2 SSD token per sequence (`ssd_common` gives the layout): per head
    S <- exp(dt A) S + dt x (x) B, y = S C + D x, with dt = softplus(dt_raw + dt_bias) and
    A = -exp(A_log); pool [S, H, P, N] updated in place at `slots`, stored the `fmt` way (see
    `kda_decode`); returns y [B, H, P] in x's dtype."""
    return implementation("ssd_decode", x)(
        x, dt_raw, B, C, A_log, dt_bias, D, state_pool, slots, fmt=fmt, sr_seed=sr_seed, positions=positions
    )


def ssd_prefill(
    x,
    dt_raw,
    B,
    C,
    A_log,
    dt_bias,
    D,
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
    **triton_options,
) -> torch.Tensor:
    """Packed variable-length Mamba2 SSD prefill over [T, H, P]; each sequence's final state stored
    to pool[slots] once, rounded the `fmt` way (`positions` [N]: each sequence's last position);
    `intra_chunk_dtype` rounds the carried state every `chunk_size` tokens too (see `kda_prefill`).
    `triton_options` (`variant`: `ssd_prefill/wrapper.py`) choose the Triton kernel; the CPU
    refuses them."""
    impl = _prefill_implementation("ssd_prefill", x, triton_options, "the Triton SSD prefill")
    return impl(
        x,
        dt_raw,
        B,
        C,
        A_log,
        dt_bias,
        D,
        state_pool,
        slots,
        cu_seqlens,
        has_initial_state,
        chunk_size=chunk_size,
        intra_chunk_dtype=intra_chunk_dtype,
        fmt=fmt,
        sr_seed=sr_seed,
        positions=positions,
        **triton_options,
    )
