"""Python entry of the Triton SSD decode step: checks, tile, launch."""

from __future__ import annotations

import torch
import triton

from ..common import resolve_format
from ..formats import StateFormat
from ..ssd_common import check_ssd_args
from ..triton_launch import check_triton_device, format_constexprs, launch_key, pool_arg
from .kernel import ssd_decode_kernel

BP = 16  # state rows per program
VEC = 4  # contiguity along N, the same for every pool dtype (see kernel.py)
NUM_WARPS = 4  # every format: the fp32 twin must lay the state tile out the same way (compile_check)


def launch_tile(P: int, N: int) -> dict:
    """BP, BN, VEC of a launch at head dims P x N: the layout, hence the summation order, that the
    decode step and drift's one-launch loop (recurrent.py) must share."""
    BN = triton.next_power_of_2(N)
    return {"BP": min(BP, triton.next_power_of_2(P)), "BN": BN, "VEC": min(VEC, BN)}


def ssd_decode(
    x,
    dt_raw,
    B,
    C,
    A_log,
    dt_bias,
    D,
    state_pool,
    slots,
    *,
    fmt: StateFormat | str | None = None,
    sr_seed: int = 0,
    positions: torch.Tensor | None = None,
    rounding: str | None = None,
) -> torch.Tensor:
    """One token per sequence; see `evalkit.kernels.ssd_decode`. `rounding` overrides the
    format's rounding (a deliberately wrong build: tests and `verify-kernels --self-test`)."""
    check_ssd_args(x, dt_raw, B, C, A_log, dt_bias, D, state_pool, slots, packed=False)
    fmt = resolve_format(fmt, state_pool, positions, x.shape[0])
    check_triton_device(ssd_decode_kernel, x)
    n, H, P = x.shape
    G, N = B.shape[1:]
    x, dt_raw, B, C = (t.contiguous() for t in (x, dt_raw, B, C))
    y = torch.empty(n, H, P, dtype=x.dtype, device=x.device)
    if n == 0:
        return y
    tile = launch_tile(P, N)
    ssd_decode_kernel[(n * H, triton.cdiv(P, tile["BP"]))](
        x,
        dt_raw,
        B,
        C,
        A_log.reshape(H).contiguous(),
        dt_bias.reshape(H).contiguous(),
        D.reshape(H).contiguous(),
        pool_arg(state_pool),
        slots.contiguous(),
        positions.contiguous() if positions is not None else slots,
        y,
        launch_key(fmt, sr_seed),
        H=H,
        G=G,
        P=P,
        N=N,
        **tile,
        **format_constexprs(fmt, rounding),
        num_warps=NUM_WARPS,
    )
    return y
