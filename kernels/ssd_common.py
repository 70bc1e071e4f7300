"""Argument checks shared by every implementation of the Mamba2 SSD ops (`ssd_decode/`,
`ssd_prefill/`), so the Triton wrappers, the CPU path and the float64 reference refuse the same
inputs with the same messages.

Layout (transformers' Mamba2 mixer, mamba2.md §2-§5): x [n, H, P] (the conv's x channels per
head), dt_raw [n, H] (in_proj's dt rows, before dt_bias and softplus), B/C [n, G, N] (head h reads
group h // (H/G)), A_log/dt_bias/D [H]; the state pool [S, H, P, N] (HF's `recurrent_states`)."""

from __future__ import annotations

import torch

from .common import STATE_DTYPES, state_dtype_name
from .errors import KernelInputError


def _require(cond: bool, msg: str) -> None:
    if not cond:
        raise KernelInputError(msg)


def check_ssd_args(
    x, dt_raw, B, C, A_log, dt_bias, D, state_pool, slots, *, packed: bool, allow_f64_pool: bool = False
) -> None:
    """Shape/dtype/device checks shared by decode ([B, H, P]) and packed prefill ([T, H, P])."""
    what = "T" if packed else "B"
    _require(x.dim() == 3, f"x must be [{what}, H, P], got shape {tuple(x.shape)}")
    n, H, P = x.shape
    _require(dt_raw.shape == (n, H), f"dt_raw must be [{what}, H] = {(n, H)}, got {tuple(dt_raw.shape)}")
    _require(B.dim() == 3 and B.shape[0] == n, f"B must be [{what}, G, N], got {tuple(B.shape)}")
    _require(C.shape == B.shape, f"C shape {tuple(C.shape)} != B shape {tuple(B.shape)}")
    G, N = B.shape[1:]
    _require(G >= 1 and H % G == 0, f"the groups of B/C ({G}) must divide the heads ({H})")
    for name, t in (("A_log", A_log), ("dt_bias", dt_bias), ("D", D)):
        _require(t.numel() == H, f"{name} has {t.numel()} elements, expected one per head ({H})")
    if not (allow_f64_pool and state_pool.dtype == torch.float64):
        state_dtype_name(state_pool.dtype)
    _require(
        state_pool.dim() == 4 and tuple(state_pool.shape[1:]) == (H, P, N),
        f"state_pool must be [S, H, P, N] = [S, {H}, {P}, {N}], got {tuple(state_pool.shape)}",
    )
    _require(state_pool.is_contiguous(), "state_pool must be contiguous")
    _require(slots.dim() == 1 and not slots.dtype.is_floating_point, "slots must be a 1-D integer tensor")
    devs = {t.device for t in (x, dt_raw, B, C, A_log, dt_bias, D, state_pool, slots)}
    _require(len(devs) == 1, f"all tensors must be on one device, got {sorted(map(str, devs))}")


def heads_of_groups(t: torch.Tensor, H: int) -> torch.Tensor:
    """B or C [n, G, N] expanded to [n, H, N]: head h reads group h // (H / G) (mamba2.md §3.4)."""
    return t.repeat_interleave(H // t.shape[1], dim=1)


__all__ = ["STATE_DTYPES", "check_ssd_args", "heads_of_groups"]
