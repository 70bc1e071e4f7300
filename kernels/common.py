"""Shared argument checks and dtype tables for every implementation of the KDA ops.

One place decides which pool dtypes exist and what a malformed call looks like, so the Triton
wrappers, the CPU path and the reference refuse the same inputs with the same messages."""

from __future__ import annotations

import torch

from .errors import FormatError, KernelInputError
from .formats import StateFormat, parse_format, storage_dtypes

# the 16/32-bit pool dtypes (also the intra-chunk rounding dtypes); every storage: formats.STORAGES
STATE_DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
_NAME_OF = {v: k for k, v in storage_dtypes().items()}


def state_dtype_name(dtype: torch.dtype) -> str:
    """'fp32' | 'fp16' | 'bf16' | 'fp8_e4m3' | 'fp8_e5m2' for a supported pool dtype; a clear error
    otherwise."""
    try:
        return _NAME_OF[dtype]
    except KeyError:
        raise KernelInputError(
            f"unsupported state pool dtype {dtype}; supported: "
            + ", ".join(f"{n} ({d})" for n, d in storage_dtypes().items())
        ) from None


def resolve_format(
    fmt: StateFormat | str | None, state_pool: torch.Tensor, positions: torch.Tensor | None, n: int
) -> StateFormat:
    """The launch's storage format (default: round to nearest in the pool's dtype), checked
    against the pool; stochastic rounding needs one sequence position per sequence (`n`)."""
    try:
        fmt = parse_format(state_pool.dtype if fmt is None else fmt)
    except FormatError as exc:
        raise KernelInputError(str(exc)) from None
    _require(
        fmt.pool_dtype == state_pool.dtype,
        f"state format {fmt.name} stores {fmt.pool_dtype}, but the pool is {state_pool.dtype}",
    )
    if fmt.rounding == "sr":
        _require(positions is not None, f"{fmt.name} (stochastic rounding) needs the positions of the stores")
        _require(
            positions.dim() == 1 and positions.numel() == n and not positions.dtype.is_floating_point,
            f"positions must be a 1-D integer tensor with one entry per sequence ({n})",
        )
        _require(positions.device == state_pool.device, "positions must be on the pool's device")
    return fmt


def resolve_state_dtype(name_or_dtype: str | torch.dtype) -> torch.dtype:
    """Map 'fp16' / torch.float16 / 'float16' to the torch dtype, refusing anything else."""
    if isinstance(name_or_dtype, torch.dtype):
        state_dtype_name(name_or_dtype)
        return name_or_dtype
    aliases = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "half": "fp16"}
    key = aliases.get(str(name_or_dtype), str(name_or_dtype))
    if key not in STATE_DTYPES:
        raise KernelInputError(f"unknown state dtype {name_or_dtype!r}; supported: {', '.join(STATE_DTYPES)}")
    return STATE_DTYPES[key]


def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise KernelInputError(msg)


def flat_a_log(A_log: torch.Tensor, H: int) -> torch.Tensor:
    """A_log as [H] (transformers stores it as [1, 1, H, 1])."""
    _require(A_log.numel() == H, f"A_log has {A_log.numel()} elements, expected one per head ({H})")
    return A_log.reshape(H)


def check_kda_args(
    q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, *, packed: bool, allow_f64_pool: bool = False
) -> None:
    """Shape/dtype/device checks shared by decode ([B,H,K]) and packed prefill ([T,H,K]).

    `allow_f64_pool`: the float64 reference may also carry an exact (float64) pool."""
    what = "T" if packed else "B"
    _require(q.dim() == 3, f"q must be [{what}, H, K], got shape {tuple(q.shape)}")
    n, H, K = q.shape
    V = v.shape[-1]
    _require(k.shape == q.shape, f"k shape {tuple(k.shape)} != q shape {tuple(q.shape)}")
    _require(g_raw.shape == q.shape, f"g_raw shape {tuple(g_raw.shape)} != q shape {tuple(q.shape)}")
    _require(v.dim() == 3 and v.shape[:2] == (n, H), f"v must be [{what}, H, V], got {tuple(v.shape)}")
    _require(
        beta_raw.shape == (n, H), f"beta_raw must be [{what}, H] = {(n, H)}, got {tuple(beta_raw.shape)}"
    )
    _require(dt_bias.numel() == H * K, f"dt_bias has {dt_bias.numel()} elements, expected H*K = {H * K}")
    flat_a_log(A_log, H)
    if not (allow_f64_pool and state_pool.dtype == torch.float64):
        state_dtype_name(state_pool.dtype)
    _require(
        state_pool.dim() == 4 and tuple(state_pool.shape[1:]) == (H, K, V),
        f"state_pool must be [S, H, K, V] = [S, {H}, {K}, {V}], got {tuple(state_pool.shape)}",
    )
    _require(state_pool.is_contiguous(), "state_pool must be contiguous")
    _require(slots.dim() == 1 and not slots.dtype.is_floating_point, "slots must be a 1-D integer tensor")
    devs = {t.device for t in (q, k, v, g_raw, beta_raw, dt_bias, state_pool, slots)}
    _require(len(devs) == 1, f"all tensors must be on one device, got {sorted(map(str, devs))}")


def check_varlen(
    cu_seqlens: torch.Tensor, has_initial_state: torch.Tensor, slots: torch.Tensor, T: int
) -> list[int]:
    """Checks the packed-batch arguments; returns cu_seqlens as a host list (read once: on a GPU
    each read is a device-to-host sync)."""
    _require(cu_seqlens.dim() == 1 and cu_seqlens.numel() >= 2, "cu_seqlens must be [N+1] with N >= 1")
    N = cu_seqlens.numel() - 1
    _require(slots.numel() == N, f"slots has {slots.numel()} entries, expected one per sequence ({N})")
    _require(
        has_initial_state.numel() == N,
        f"has_initial_state has {has_initial_state.numel()} entries, expected {N}",
    )
    cu = [int(x) for x in cu_seqlens.tolist()]
    _require(
        cu[0] == 0 and cu[-1] == T, f"cu_seqlens must start at 0 and end at T={T}, got {cu[0]}..{cu[-1]}"
    )
    _require(all(b >= a for a, b in zip(cu, cu[1:])), "cu_seqlens must be non-decreasing")
    return cu
