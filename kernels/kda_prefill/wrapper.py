"""Python entry of the Triton chunked prefill: checks, the chunk table, scratch buffers and the launches
of one of the registered variants (`PREFILL_VARIANTS`, name -> implementation, as FLA's backend
registry), both with the same math (kernel.py's docstring) to fp32 rounding:
- "stream" (the default, `stream.py`): the chunk-local work in four launches of small programs and a
  state scan the compiler can pipeline, the output computed in the scan or by a sixth launch;
  1.5-2.1x the split variant on the H200 (results/bench/prefill-stream-h200/);
- "split" (`kernel.py`, five launches): the earlier variant, kept as a numerics floor (the same
  arm, the same math summed in another order: how far last bits move when only the kernel does).
`variant=` picks one (`evalkit.kernel_choice.KernelChoice.kda_prefill`). `dot_precision="bf16"`
(stream only) runs the production form: bf16 operands, as FLA-based servers compute."""

from __future__ import annotations

from collections.abc import Callable

import torch
import triton

from ..common import check_kda_args, check_varlen, flat_a_log, resolve_format
from ..errors import KernelInputError
from ..formats import StateFormat
from ..triton_launch import (
    block_table,
    check_triton_device,
    device_cu_seqlens,
    format_constexprs,
    launch_key,
    pool_arg,
)
from . import stream
from .kernel import gate_cumsum_kernel, intra_kernel, solve_wy_kernel, state_pass_kernel

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
# The stream variant's launch shapes (stream.py), per operand dtype ("fp32": tf32x3 products,
# "bf16": the production form): "order" (HEAD_FAST: the chunk-local launches' programs numbered head
# first, `stream.chunk_and_head`), "prep" (BKG gate columns per program, num_warps, the softplus's
# log "exact" or "approx" (`triton_common.kda_gate`; the bf16 form's as FLA's), the programs' order
# (`stream.prep_kernel`)), "diag" (BH heads per program, num_warps), "offdiag" (BKC columns per
# step, num_warps, num_stages, block pairs per program: "pair", "row", "chunk"), "inverse"
# (num_warps), "wu" (BKC columns per step, num_warps, num_stages), "scan" (BV, num_warps,
# num_stages, output fused into the scan), "output" (BV, num_warps, num_stages; only without a fused
# output), "output_order" (`stream.output_kernel`'s ORDER), "split" (the launches whose tf32x3
# products split their operands by bit arithmetic, `launch_precision`). Each is the fastest of the
# H200 sweeps at 32k (results/bench/prefill-stream-h200/README.md says which sweep chose each, and
# lists the forms measured slower and removed): head-first program order, the diagonal blocks per
# token, and the bf16 form's approximate gate (FLA's). The bf16 scan's BV 64 with three stages
# halves the programs (each chunk's W, Kd and Qg loaded by half as many): faster on one sequence and
# on many; one pipeline stage with 4 warps faults the GPU in the bf16 scan (undiagnosed), so its
# tile keeps three stages. tf32x3 scans spill with a fused output or BV > 16
# (kernels/compile_check.py; tests/test_kernels_compile.py bounds the spills); the bf16 scan's three
# stages need K <= 128 (shared memory).
# The fp32 form's last two entries were measured on an H100 (results/bench/prefill-split/, every
# output and state bit equal to the build before): the scan's products split their operands by bit
# arithmetic (the scan 7% faster; other launches no faster with it, the output slower), and the
# output launch numbers a chunk-head's V blocks side by side (the output 9% faster).
STREAM_TILES: dict[str, dict[str, tuple]] = {
    "fp32": {
        "order": (True,),
        "prep": (32, 4, "exact", "head"),
        "diag": (2, 1),
        "offdiag": (32, 1, 1, "pair"),
        "inverse": (1,),
        "wu": (32, 4, 1),
        "scan": (16, 4, 2, False),
        "output": (64, 4, 2),
        "output_order": ("head",),
        "split": ("scan",),
        "presplit": (False,),
    },
    "bf16": {
        "order": (True,),
        "prep": (32, 2, "approx", "column"),
        "diag": (2, 1),
        "offdiag": (128, 2, 1, "chunk"),
        "inverse": (1,),
        "wu": (128, 8, 1),
        "scan": (64, 4, 3, True),
        "output": (64, 4, 2),
        "output_order": ("chunk",),
        "split": (),
        "presplit": (False,),
    },
}
DOT_PRECISIONS = ("tf32x3", "ieee", "tf32", "bf16")
DOT_PRECISION = "tf32x3"  # ~fp32 accuracy on tensor cores; "ieee" = exact fp32 FMA (slower)


def chunk_table(cu: list[int], device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """(chunk_start [NC], chunk_end [NC], chunk_offsets [N], NC) for chunks of CHUNK tokens that
    restart at every sequence start (`triton_launch.block_table`, cached and shared)."""
    return block_table(tuple(cu), CHUNK, str(device))


DEFAULT_VARIANT = "stream"


def resolve_variant(variant: str | None) -> str:
    """The keyword, else DEFAULT_VARIANT."""
    v = DEFAULT_VARIANT if variant is None else variant
    if v not in PREFILL_VARIANTS:
        raise KernelInputError(f"variant must be one of {', '.join(PREFILL_VARIANTS)}, got {v!r}")
    return v


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
    variant: str | None = None,
) -> torch.Tensor:
    """Packed variable-length prefill; see `evalkit.kernels.kda_prefill`. `rounding` overrides
    the format's rounding (e.g. 'rtz': a deliberately wrong build, tests of the twin check only).
    `cu_seqlens` may be a CPU tensor: its values are needed on the host (the chunk table), and
    reading a device tensor is a sync that leaves the GPU idle through this function's preamble.
    `variant`: a `PREFILL_VARIANTS` name (the module docstring); None: DEFAULT_VARIANT."""
    variant = resolve_variant(variant)
    check_kda_args(q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots, packed=True)
    cu = check_varlen(cu_seqlens, has_initial_state, slots, q.shape[0])
    fmt = resolve_format(fmt, state_pool, positions, slots.numel())
    check_triton_device(state_pass_kernel, q)
    prec = dot_precision or DOT_PRECISION
    if prec not in DOT_PRECISIONS or (prec == "bf16" and variant != "stream"):
        raise KernelInputError(
            f"dot_precision must be one of {', '.join(DOT_PRECISIONS)} ('bf16': variant 'stream' only), "
            f"got {prec!r} with variant {variant!r}"
        )
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
    if prec == "bf16" and K > 128:  # its scan's pipeline stages would not fit in shared memory
        raise KernelInputError(f"dot_precision='bf16' supports K up to 128, got K={K}: use the fp32 form")
    dev = q.device
    q, k, v, g_raw, beta_raw = (t.contiguous() for t in (q, k, v, g_raw, beta_raw))
    if out is None:
        out = torch.empty(T, H, V, dtype=q.dtype, device=dev)
    c_start, c_end, c_off, NC = chunk_table(cu, dev)
    if cu_seqlens.device != dev:  # given on the host: read without a sync, uploaded once per batch
        cu_seqlens = device_cu_seqlens(tuple(cu), str(dev))
    inputs = (q, k, v, g_raw, beta_raw, A_log, dt_bias)
    scan_args = (state_pool, slots, cu_seqlens, has_initial_state, positions, fmt, sr_seed, rounding)
    table = (c_start, c_end, c_off, NC)
    return PREFILL_VARIANTS[variant](inputs, table, out, *scan_args, intra_chunk_dtype, prec=prec)


def stream_prefill(inputs, table, out, *scan_args, prec: str = DOT_PRECISION) -> torch.Tensor:
    """The "stream" variant: `stream_local`, then `stream_scan`."""
    c_start, c_end, c_off, NC = table
    c = stream_local(*inputs, c_start, c_end, NC, prec=prec)
    return stream_scan(c, out, c_start, c_end, c_off, NC, *scan_args, prec=prec)


def split_prefill(
    inputs,
    table,
    out,
    state_pool,
    slots,
    cu_seqlens,
    has_initial_state,
    positions,
    fmt,
    sr_seed,
    rounding,
    intra_chunk_dtype,
    *,
    prec: str = DOT_PRECISION,
) -> torch.Tensor:
    """The "split" variant: `chunk_local` (launches 1-3), the state pass, then the output kernel."""
    c_start, c_end, c_off, NC = table
    q, v = inputs[0], inputs[2]
    T, H, K = q.shape
    V = v.shape[-1]
    cu = cu_seqlens.tolist()
    BK, BVf = triton.next_power_of_2(K), triton.next_power_of_2(V)
    f32 = dict(dtype=torch.float32, device=q.device)
    c = chunk_local(*inputs, c_start, c_end, NC, prec=prec)
    Kd, EGl, W, U, Qg, Aqk = c["Kd"], c["EGl"], c["W"], c["U"], c["Qg"], c["Aqk"]
    Vn = torch.empty(T, H, V, **f32)
    Hs = torch.empty(max(NC, 1), H, K, V, **f32)

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
        stream.output_kernel[(NC, H, triton.cdiv(V, bvo))](
            Qg, Aqk, Vn, Hs, out, c_start, c_end,
            H=H, K=K, V=V, BT=CHUNK, BK=BK, BV=bvo, DOT_PREC=prec, ORDER="chunk", num_warps=nwo,
            num_stages=nso,
        )  # fmt: skip
    return out


def chunk_local(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g_raw: torch.Tensor,
    beta_raw: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    c_start: torch.Tensor,
    c_end: torch.Tensor,
    NC: int,
    *,
    prec: str = DOT_PRECISION,
) -> dict[str, torch.Tensor]:
    """The split variant's launches 1-3, everything that is local to a chunk: G, Qg, Kd, EGl
    (kernel 1) and Akk, Aqk, W, U (kernels 2+3), fp32. Inputs contiguous."""
    T, H, K = q.shape
    V = v.shape[-1]
    dev = q.device
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
    return {"G": G, "Qg": Qg, "Kd": Kd, "EGl": EGl, "Akk": Akk, "Aqk": Aqk, "W": W, "U": U}


def solve_precision(prec: str) -> str:
    """The input precision of the inverse's block products: tf32 in the production form (as FLA's),
    else the products' own."""
    return "tf32" if prec == "bf16" else prec


def launch_precision(prec: str, tiles: dict, launch: str) -> str:
    """The dot precision one stream launch is built with: "tf32x3-bits" where the tile's "split"
    names it (kernels/tf32x3.py: Triton's tf32x3 products with a cheaper split, the same bits for
    finite operands), else prec."""
    return "tf32x3-bits" if prec == "tf32x3" and launch in tiles["split"] else prec


def scan_presplit(prec: str, tiles: dict) -> bool:
    """Whether `wu_kernel` writes Kd as its tf32x3 halves, chunk-transposed, for the scan (the
    tile's "presplit"; tf32x3 products only). The same products as "tf32x3-bits", but not the same
    last bits on the GPU (results/bench/prefill-presplit/): off by default."""
    return prec == "tf32x3" and tiles["presplit"][0]


def operand_kind(prec: str) -> str:
    """The STREAM_TILES key of a dot precision: "bf16" operands, or fp32 ones (tf32x3, ieee, tf32)."""
    return "bf16" if prec == "bf16" else "fp32"


def stream_local(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g_raw: torch.Tensor,
    beta_raw: torch.Tensor,
    A_log: torch.Tensor,
    dt_bias: torch.Tensor,
    c_start: torch.Tensor,
    c_end: torch.Tensor,
    NC: int,
    *,
    prec: str = DOT_PRECISION,
) -> dict[str, torch.Tensor]:
    """The stream variant's launches 1-5 (`stream.py`): G, EGl, RQ, RK, Akk fp32 and Aqk, Tinv, W,
    U, Qg, Kd in the operand dtype (bf16 when prec == "bf16", else fp32). Inputs contiguous."""
    T, H, K = q.shape
    V = v.shape[-1]
    dev = q.device
    BK, BVf = triton.next_power_of_2(K), triton.next_power_of_2(V)
    f32 = dict(dtype=torch.float32, device=dev)
    op = dict(dtype=torch.bfloat16 if prec == "bf16" else torch.float32, device=dev)
    tiles = STREAM_TILES[operand_kind(prec)]
    presplit = scan_presplit(prec, tiles)
    # presplit: Kd^T chunk-transposed, its low half beside (`wu_kernel`)
    kd_shape = (max(NC, 1), H, K, CHUNK) if presplit else (T, H, K)
    c = {
        "G": torch.empty(T, H, K, **f32),
        "EGl": torch.empty(max(NC, 1), H, K, **f32),
        "RQ": torch.empty(T, H, **f32),
        "RK": torch.empty(T, H, **f32),
        "Akk": torch.empty(T, H, CHUNK, **f32),
        "Aqk": torch.empty(T, H, CHUNK, **op),
        "Tinv": torch.empty(T, H, CHUNK, **op),
        "W": torch.empty(T, H, K, **op),
        "U": torch.empty(T, H, V, **op),
        "Qg": torch.empty(T, H, K, **op),
        "Kd": torch.empty(kd_shape, **op),
    }
    if presplit:
        c["Kdlo"] = torch.empty(kd_shape, **op)
    if NC == 0:
        return c
    G, RQ, RK, Akk, Aqk = c["G"], c["RQ"], c["RK"], c["Akk"], c["Aqk"]
    head_fast = tiles["order"][0] and NC <= 65535  # chunks on the last grid axis: at most 65535

    def grid(*axes):  # (chunks, ..., heads), or (heads, ..., chunks) head first
        return (axes[-1], *axes[1:-1], axes[0]) if head_fast else axes

    bkg, nwp, gate, order = tiles["prep"]
    bkg = min(bkg, BK)
    order = order if NC <= 65535 else "chunk"  # chunks on grid axis 1 or 2: at most 65535
    prep_grid = {"head": (H, triton.cdiv(K, bkg), NC), "chunk": (NC, triton.cdiv(K, bkg), H),
                 "column": (triton.cdiv(K, bkg), NC, H)}[order]  # fmt: skip
    stream.prep_kernel[prep_grid](
        g_raw, flat_a_log(A_log, H).contiguous(), dt_bias.contiguous(), G, c["EGl"], c_start, c_end,
        H=H, K=K, BT=CHUNK, BKG=bkg, APPROX_GATE=gate == "approx", ORDER=order, num_warps=nwp,
    )  # fmt: skip
    bh, nwd = tiles["diag"]  # BH heads per program, num_warps
    stream.diag_kernel[(NC * CHUNK, triton.cdiv(H, bh))](
        q, k, G, beta_raw, RQ, RK, Aqk, Akk, c_start, c_end, K**-0.5,
        H=H, K=K, BT=CHUNK, BC=SUB, BK=BK, BH=bh, num_warps=nwd,
    )  # fmt: skip
    bkc, nwo, nso, group = tiles["offdiag"]
    stream.offdiag_kernel[grid(NC, stream.OFFDIAG_PROGRAMS[group], H)](
        q, k, G, beta_raw, RQ, RK, Akk, Aqk, c_start, c_end,
        H=H, K=K, BT=CHUNK, BC=SUB, BK=BK, BKC=max(16, min(bkc, BK)),
        DOT_PREC=launch_precision(prec, tiles, "offdiag"), GROUP=group,
        HEAD_FAST=head_fast, num_warps=nwo, num_stages=nso,
    )  # fmt: skip
    (nwi,) = tiles["inverse"]
    stream.inverse_kernel[grid(NC, H)](
        Akk, Aqk, c["Tinv"], c_start, c_end,
        H=H, BT=CHUNK, BC=SUB, SOLVE_PREC=launch_precision(solve_precision(prec), tiles, "inverse"),
        HEAD_FAST=head_fast, num_warps=nwi,
    )  # fmt: skip
    bkc, nww, nsw = tiles["wu"]
    stream.wu_kernel[grid(NC, H)](
        q, k, v, G, beta_raw, RQ, RK, c["Tinv"], c["W"], c["U"], c["Qg"], c["Kd"],
        c.get("Kdlo", c["Kd"]), c_start, c_end,
        H=H, K=K, V=V, BT=CHUNK, BK=BK, BV=BVf, BKC=max(16, min(bkc, BK, BVf)),
        DOT_PREC=launch_precision(prec, tiles, "wu"), HEAD_FAST=head_fast,
        PRESPLIT=presplit, num_warps=nww, num_stages=nsw,
    )  # fmt: skip
    return c


def stream_scan(
    c: dict[str, torch.Tensor],
    out: torch.Tensor,
    c_start: torch.Tensor,
    c_end: torch.Tensor,
    c_off: torch.Tensor,
    NC: int,
    state_pool: torch.Tensor,
    slots: torch.Tensor,
    cu_seqlens: torch.Tensor,
    has_initial_state: torch.Tensor,
    positions: torch.Tensor | None,
    fmt: StateFormat,
    sr_seed: int,
    rounding: str | None,
    intra_chunk_dtype: torch.dtype | None,
    *,
    prec: str = DOT_PRECISION,
) -> torch.Tensor:
    """The stream variant's launch 5 (and 6 without a fused output) over `stream_local`'s tensors."""
    T, H, K = c["W"].shape
    V = c["U"].shape[-1]
    BK, BVf = triton.next_power_of_2(K), triton.next_power_of_2(V)
    tiles = STREAM_TILES[operand_kind(prec)]
    bv, nw, ns, fuse = tiles["scan"]
    bv = min(bv, BVf)
    op = c["W"].dtype
    presplit = scan_presplit(prec, tiles)
    Vn = Hs = out  # placeholders the fused build never touches
    if not fuse:
        Vn = torch.empty(T, H, V, dtype=op, device=out.device)
        Hs = torch.empty(max(NC, 1), H, K, V, dtype=op, device=out.device)
    N = cu_seqlens.numel() - 1
    pos = positions.contiguous() if positions is not None else slots
    stream.scan_kernel[(N * H, triton.cdiv(V, bv))](
        c["Kd"], c["EGl"], c["W"], c.get("Kdlo", c["Kd"]), c["U"], c["Qg"], c["Aqk"], Vn, Hs, out,
        pool_arg(state_pool),
        slots.contiguous(), pos, launch_key(fmt, sr_seed),
        cu_seqlens.to(torch.int32).contiguous(), c_off, has_initial_state.to(torch.int32).contiguous(),
        H=H, K=K, V=V, BT=CHUNK, BKH=max(16, BK // 2), BV=bv,
        DOT_PREC=launch_precision(prec, tiles, "scan"),
        **format_constexprs(fmt, rounding),
        INTRA_BF16=intra_chunk_dtype == torch.bfloat16, FUSE_OUT=bool(fuse),
        PRESPLIT=presplit, num_warps=nw, num_stages=ns,
    )  # fmt: skip
    if not fuse and NC > 0:
        bvo, nwo, nso = tiles["output"]
        bvo = min(bvo, BVf)
        (order,) = tiles["output_order"]
        order = order if NC <= 65535 else "chunk"  # chunks on grid axis 1: at most 65535
        nvo = triton.cdiv(V, bvo)
        out_grid = (nvo * H, NC) if order == "head" else (NC, H, nvo)
        stream.output_kernel[out_grid](
            c["Qg"], c["Aqk"], Vn, Hs, out, c_start, c_end,
            H=H, K=K, V=V, BT=CHUNK, BK=BK, BV=bvo, DOT_PREC=launch_precision(prec, tiles, "output"),
            ORDER=order, num_warps=nwo, num_stages=nso,
        )  # fmt: skip
    return out


# the registered prefill variants, name -> implementation (`kda_prefill(variant=...)`; the names
# `evalkit.kernel_choice.PREFILL_VARIANTS` offers)
PREFILL_VARIANTS: dict[str, Callable[..., torch.Tensor]] = {"stream": stream_prefill, "split": split_prefill}
