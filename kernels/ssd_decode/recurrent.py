"""Decode-mode numerics of the Mamba2 SSD for a whole block of teacher-forced tokens, one launch.

What an engine's decode does per token (`ssd_decode`): load the stored state (widened exactly),
update it in fp32, read y = S C + D x, store the state in the pool's format. A drift run in decode
mode over 32k tokens called that step once per token, layer and arm (minutes of launch overhead).
This kernel walks the block's tokens inside one program per (head, block of BP state rows) and,
after every token, replaces its register copy of the state by the stored form widened back —
the decode step's store and next load — with the decode kernel's arithmetic, tile (BP, VEC,
num_warps) and stochastic-rounding hash (key, the token's position, the element's index), so
the numbers are those of the token-by-token decode in every storage format (tests compare the
two bit for bit). One sequence per launch, as a drift session holds one.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..common import resolve_format
from ..errors import KernelInputError
from ..formats import StateFormat
from ..ssd_common import check_ssd_args
from ..triton_common import load_state, store_state, widen_state
from ..triton_launch import check_triton_device, format_constexprs, launch_key, pool_arg
from .kernel import softplus, ssd_step
from .wrapper import NUM_WARPS, launch_tile


@triton.jit(do_not_specialize=["sr_key", "pos_last"])
def ssd_recurrent_kernel(
    x,
    dt_raw,
    b_in,
    c_in,
    a_log,
    dt_bias,
    d_skip,
    pool,
    slot,
    y,
    T,
    pos_last,
    sr_key,
    HAS_INIT: tl.constexpr,
    H: tl.constexpr,
    G: tl.constexpr,
    P: tl.constexpr,
    N: tl.constexpr,
    BP: tl.constexpr,
    BN: tl.constexpr,
    VEC: tl.constexpr,
    STORAGE: tl.constexpr,
    MANT_BITS: tl.constexpr,
    ROUNDING: tl.constexpr,
):
    i_h = tl.program_id(0).to(tl.int64)
    i_p = tl.program_id(1)
    i_g = i_h // (H // G)
    o_p = i_p * BP + tl.arange(0, BP)
    o_n = tl.arange(0, BN)
    o_n = (o_n // VEC) * VEC + (o_n % VEC)  # the decode kernel's contiguity along N
    m_p = o_p < P
    m_n = o_n < N
    m_s = m_p[:, None] & m_n[None, :]
    p_s = pool + (slot * H + i_h) * P * N + o_p[:, None] * N + o_n[None, :]
    if HAS_INIT:
        b_s = load_state(p_s, m_s, STORAGE)
    else:
        b_s = tl.zeros([BP, BN], dtype=tl.float32)
    b_bias = tl.load(dt_bias + i_h).to(tl.float32)
    b_a = -tl.exp(tl.load(a_log + i_h).to(tl.float32))
    b_d = tl.load(d_skip + i_h).to(tl.float32)
    elem = (i_h * P + o_p[:, None]) * N + o_n[None, :]
    for t in range(0, T):
        i_th = t * H + i_h
        i_tg = t * G + i_g
        b_x = tl.load(x + i_th * P + o_p, mask=m_p, other=0.0).to(tl.float32)
        b_B = tl.load(b_in + i_tg * N + o_n, mask=m_n, other=0.0).to(tl.float32)
        b_C = tl.load(c_in + i_tg * N + o_n, mask=m_n, other=0.0).to(tl.float32)
        b_dt = softplus(tl.load(dt_raw + i_th).to(tl.float32) + b_bias)
        b_s, b_y = ssd_step(b_s, b_x, b_B, b_C, b_dt, b_a, b_d)
        tl.store(y + i_th * P + o_p, b_y.to(y.dtype.element_ty), mask=m_p)
        # the decode step's store and the next step's load: the stored form, widened exactly
        pos = pos_last - (T - 1 - t)
        b_s = widen_state(store_state(b_s, elem, pos, sr_key, STORAGE, MANT_BITS, ROUNDING), STORAGE)
    # already in the stored form: storing it again gives the same values
    tl.store(p_s, store_state(b_s, elem, pos_last, sr_key, STORAGE, MANT_BITS, ROUNDING), mask=m_s)


def ssd_recurrent_rounded(
    x,
    dt_raw,
    B,
    C,
    A_log,
    dt_bias,
    D,
    state_pool,
    slot: int,
    has_initial_state: bool,
    *,
    fmt: StateFormat | str | None = None,
    sr_seed: int = 0,
    position_last: int | None = None,
) -> torch.Tensor:
    """T tokens of one sequence (x [T, H, P], dt_raw [T, H], B/C [T, G, N]); pool slot `slot`
    ([S, H, P, N] in `fmt`'s pool dtype) is updated in place, its state stored after every token
    as `ssd_decode` stores it; `position_last` is the last token's sequence position (stochastic
    rounding hashes each token's). Returns y [T, H, P]."""
    T = x.shape[0]
    slots = torch.tensor([int(slot)], device=x.device)
    check_ssd_args(x, dt_raw, B, C, A_log, dt_bias, D, state_pool, slots, packed=False)
    positions = None if position_last is None else torch.tensor([int(position_last)], device=x.device)
    fmt = resolve_format(fmt, state_pool, positions, 1)
    if not 0 <= int(slot) < state_pool.shape[0]:
        raise KernelInputError(f"slot {slot} is outside the pool's {state_pool.shape[0]} slots")
    check_triton_device(ssd_recurrent_kernel, x)
    _, H, P = x.shape
    G, N = B.shape[1:]
    x, dt_raw, B, C = (t.contiguous() for t in (x, dt_raw, B, C))
    y = torch.empty(T, H, P, dtype=x.dtype, device=x.device)
    if T == 0:
        return y
    tile = launch_tile(P, N)
    ssd_recurrent_kernel[(H, triton.cdiv(P, tile["BP"]))](
        x,
        dt_raw,
        B,
        C,
        A_log.reshape(H).contiguous(),
        dt_bias.reshape(H).contiguous(),
        D.reshape(H).contiguous(),
        pool_arg(state_pool),
        int(slot),
        y,
        T,
        int(position_last or 0),
        launch_key(fmt, sr_seed),
        HAS_INIT=bool(has_initial_state),
        H=H,
        G=G,
        P=P,
        N=N,
        **tile,
        **format_constexprs(fmt),
        num_warps=NUM_WARPS,
    )
    return y


def decode_loop(
    step,
    x,
    dt_raw,
    B,
    C,
    A_log,
    dt_bias,
    D,
    state_pool,
    slot: torch.Tensor,
    *,
    fmt: StateFormat | str | None = None,
    sr_seed: int = 0,
    position_last: int | torch.Tensor | None = None,
) -> torch.Tensor:
    """What the one-launch kernel stands for: `step` (an `ssd_decode`) once per token of the block,
    each store at its token's position (`position_last` is the last token's). Returns y [T, H, P]."""
    T = x.shape[0]
    last = None if position_last is None else torch.as_tensor(position_last, device=x.device).reshape(1)
    ys = []
    for t in range(T):
        store = {}
        if fmt is not None:
            pos = None if last is None else last - (T - 1 - t)
            store = {"fmt": fmt, "sr_seed": sr_seed, "positions": pos}
        r = slice(t, t + 1)
        ys.append(step(x[r], dt_raw[r], B[r], C[r], A_log, dt_bias, D, state_pool, slot, **store)[0])
    return torch.stack(ys) if ys else x.new_empty(x.shape)


def check_against_decode_loop(
    H: int = 128, G: int = 8, P: int = 64, N: int = 128, T: int = 64, device: str = "cuda", seed: int = 0
) -> dict:
    """This kernel against `evalkit.kernels.ssd_decode` once per token on the same random inputs,
    per pool format (fp32, fp16, bf16, a 3-bit mantissa, fp8, fp16 with stochastic rounding);
    `bit_identical` says whether states and outputs equal the loop's to the last bit (they do under
    the interpreter: tests); `ok`, as the KDA kernel's check, when fp32 agrees to 1e-5 and each
    rounded state is closer to the loop's than a quarter of the rounding's effect. A GPU drift run
    calls this first and falls back to the loop."""
    from .. import ssd_decode  # the public function (dispatching to the decode kernel)
    from ..rounding import decode_format, round_to_format

    g = torch.Generator(device="cpu").manual_seed(seed)

    def rnd(*shape, scale=1.0, shift=0.0):
        return (torch.randn(*shape, generator=g) * scale + shift).to(device)

    x, dt_raw = rnd(T, H, P, scale=2.0), rnd(T, H, shift=-2.0)
    B, C = rnd(T, G, N), rnd(T, G, N)
    A_log, dt_bias, D = rnd(H, scale=0.5), rnd(H, scale=0.5), rnd(H)
    init = rnd(1, H, P, N)
    exact = init.clone()
    ssd_recurrent_rounded(x, dt_raw, B, C, A_log, dt_bias, D, exact, 0, True)  # fp32: never rounded
    out: dict = {"shape": {"T": T, "H": H, "G": G, "P": P, "N": N}, "ok": True}
    last = 1000 + T - 1  # the block's last position (stochastic rounding hashes each token's)
    slot = torch.tensor([0], device=device)
    for name in ("fp32", "fp16", "bf16", "m3", "fp8_e4m3", "fp16-sr"):
        start = round_to_format(init, name, sr_seed=7, positions=torch.tensor([last - T], device=device))
        loop, fused = start.clone(), start.clone()
        y_loop = decode_loop(ssd_decode, x, dt_raw, B, C, A_log, dt_bias, D, loop, slot,
                             fmt=name, sr_seed=7, position_last=last)  # fmt: skip
        y = ssd_recurrent_rounded(
            x, dt_raw, B, C, A_log, dt_bias, D, fused, 0, True, fmt=name, sr_seed=7, position_last=last
        )
        rec = {
            "bit_identical": bool(torch.equal(_bits(fused), _bits(loop)) and torch.equal(y, y_loop)),
            "state_vs_loop": _rel(decode_format(fused), decode_format(loop)),
            "out_vs_loop": _rel(y, y_loop),
            "effect": _rel(decode_format(loop), exact),
        }
        if name == "fp32":
            rec["ok"] = rec["state_vs_loop"] < 1e-5 and rec["out_vs_loop"] < 1e-5
        else:  # as the KDA check: an occasional flipped rounding, far below the effect itself
            rec["ok"] = rec["effect"] > 0 and rec["state_vs_loop"] < 0.25 * rec["effect"]
        out[name] = rec
        out["ok"] = out["ok"] and rec["ok"]
    return out


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


def _bits(pool: torch.Tensor) -> torch.Tensor:
    """The pool's raw bits (NaN == NaN, -0 != +0)."""
    return pool.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[pool.element_size()])
