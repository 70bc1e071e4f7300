"""Python entry of the Triton chunked prefill: checks, the chunk table, scratch buffers, five launches."""

from __future__ import annotations

import torch
import triton

from ..common import check_kda_args, check_varlen, flat_a_log, resolve_format
from ..errors import KernelInputError
from ..formats import StateFormat
from ..triton_launch import check_triton_device, format_constexprs, launch_key, pool_arg
from .kernel import gate_cumsum_kernel, intra_kernel, output_kernel, solve_wy_kernel, state_pass_kernel

CHUNK = 64  # BT: the block solve is written for 4 sub-blocks of 16
SUB = 16  # BC
# (BV, num_warps) of the sequential state pass and of the output kernel; the benchmark sweeps them.
# Launch shapes, chosen from register/spill counts of sm_90 builds (kernels/compile_check.py);
# (BV, num_warps, num_stages[, BR rows per step]) for the V-blocked kernels: no register spills
# at K = V = 128. The benchmark sweeps alternatives.
STATE_PASS_TILE: tuple[int, int, int, int] = (32, 8, 2, 16)
OUTPUT_TILE: tuple[int, int, int] = (64, 8, 2)
GATE_WARPS = 8
INTRA_WARPS = 8
SOLVE_WARPS = 8
DOT_PRECISION = "tf32x3"  # ~fp32 accuracy on tensor cores; "ieee" = exact fp32 FMA (slower)


def chunk_table(cu: list[int], device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """(chunk_start [NC], chunk_end [NC], chunk_offsets [N], NC) for chunks of CHUNK tokens that
    restart at every sequence start."""
    starts, ends, offsets = [], [], []
    for bos, eos in zip(cu[:-1], cu[1:]):
        offsets.append(len(starts))
        for t in range(bos, eos, CHUNK):
            starts.append(t)
            ends.append(min(t + CHUNK, eos))
    as_t = lambda x: torch.tensor(x, dtype=torch.int32).to(device, non_blocking=True)
    return as_t(starts), as_t(ends), as_t(offsets), len(starts)


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
    chunk_size: int = CHUNK,
    intra_chunk_dtype: torch.dtype | None = None,
    fmt: StateFormat | str | None = None,
    sr_seed: int = 0,
    positions: torch.Tensor | None = None,
    out: torch.Tensor | None = None,
    rounding: str | None = None,
    dot_precision: str | None = None,
) -> torch.Tensor:
    """Packed variable-length prefill; see `evalkit.kernels.kda_prefill`. `rounding` overrides
    the format's rounding (e.g. 'rtz': a deliberately wrong build, tests of the twin check only)."""
    check_kda_args(q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, packed=True)
    check_varlen(cu_seqlens, has_initial_state, slots, q.shape[0])
    fmt = resolve_format(fmt, state_pool, positions, slots.numel())
    check_triton_device(state_pass_kernel, q)
    if chunk_size != CHUNK:
        raise KernelInputError(
            f"the Triton prefill uses chunks of {CHUNK} tokens, got chunk_size={chunk_size}"
        )
    if intra_chunk_dtype not in (None, torch.float32, torch.bfloat16):
        raise KernelInputError(
            f"intra_chunk_dtype must be None, torch.float32 or torch.bfloat16, got {intra_chunk_dtype}"
        )
    T, H, K = q.shape
    V = v.shape[-1]
    if K > 256 or V > 256:
        raise KernelInputError(f"head dims up to 256 are supported, got K={K}, V={V}")
    dev = q.device
    q, k, v, g_raw, beta_raw = (t.contiguous() for t in (q, k, v, g_raw, beta_raw))
    if out is None:
        out = torch.empty(T, H, V, dtype=q.dtype, device=dev)
    cu = [int(x) for x in cu_seqlens.tolist()]
    c_start, c_end, c_off, NC = chunk_table(cu, dev)
    prec = dot_precision or DOT_PRECISION
    BK, BVf = triton.next_power_of_2(K), triton.next_power_of_2(V)
    a_log = flat_a_log(A_log, H).contiguous()
    scale = K**-0.5
    f32 = dict(dtype=torch.float32, device=dev)

    G = torch.empty(T, H, K, **f32)
    Qg = torch.empty(T, H, K, **f32)
    Kd = torch.empty(T, H, K, **f32)
    EGl = torch.empty(max(NC, 1), H, K, **f32)
    Akk = torch.empty(T, H, CHUNK, **f32)
    Aqk = torch.empty(T, H, CHUNK, **f32)
    W = torch.empty(T, H, K, **f32)
    U = torch.empty(T, H, V, **f32)
    Vn = torch.empty(T, H, V, **f32)
    Hs = torch.empty(max(NC, 1), H, K, V, **f32)

    if NC > 0:
        gate_cumsum_kernel[(NC, H)](
            q, k, g_raw, a_log, dt_bias.contiguous(), G, Qg, Kd, EGl, c_start, c_end, scale,
            H=H, K=K, BT=CHUNK, BK=BK, num_warps=GATE_WARPS,
        )  # fmt: skip
        intra_kernel[(NC, H, CHUNK // SUB)](
            q, k, G, beta_raw, Akk, Aqk, c_start, c_end, scale,
            H=H, K=K, BT=CHUNK, BC=SUB, BK=BK, DOT_PREC=prec, num_warps=INTRA_WARPS,
        )  # fmt: skip
        solve_wy_kernel[(NC, H)](
            k, v, G, beta_raw, Akk, W, U, c_start, c_end,
            H=H, K=K, V=V, BT=CHUNK, BC=SUB, BK=BK, BV=BVf, DOT_PREC=prec, num_warps=SOLVE_WARPS,
        )  # fmt: skip
    bv, nw, ns, br = STATE_PASS_TILE
    bv = min(bv, BVf)
    N = len(cu) - 1
    state_pass_kernel[(N * H, triton.cdiv(V, bv))](
        Kd, EGl, W, U, Vn, Hs, pool_arg(state_pool), slots.contiguous(),
        positions.contiguous() if positions is not None else slots, launch_key(fmt, sr_seed),
        cu_seqlens.to(torch.int32).contiguous(), c_off, has_initial_state.to(torch.int32).contiguous(),
        H=H, K=K, V=V, BT=CHUNK, BK=BK, BV=bv, BR=br, DOT_PREC=prec, **format_constexprs(fmt, rounding),
        INTRA_BF16=intra_chunk_dtype == torch.bfloat16, num_warps=nw, num_stages=ns,
    )  # fmt: skip
    if NC > 0:
        bvo, nwo, nso = OUTPUT_TILE
        bvo = min(bvo, BVf)
        output_kernel[(NC, H, triton.cdiv(V, bvo))](
            Qg, Aqk, Vn, Hs, out, c_start, c_end,
            H=H, K=K, V=V, BT=CHUNK, BK=BK, BV=bvo, DOT_PREC=prec, num_warps=nwo, num_stages=nso,
        )  # fmt: skip
    return out
