"""Decode-mode numerics for a whole block of teacher-forced tokens in one Triton launch.

`kda_decode` run once per token is what an engine's decode does: load the stored state (widened
exactly), update it in fp32, read o = Sᵀq from the updated state, store it rounded to the pool
dtype. For a drift run over 64k tokens that is 64k launches per KDA layer and arm (minutes of
launch overhead for a 20-layer model). This kernel walks the block's tokens inside one program
per (head, block of value columns) and rounds its register copy of the state to the pool dtype
after every token, exactly where the decode kernel stores and reloads it: the same gate, norms,
update order and tile layout (BV, num_warps and VEC of the decode wrapper's `decode_config`),
so the numbers are those of a token-by-token decode (tests check it against the decode loop).
It is its own kernel, not the decode kernel called per token: the token loop must run inside
the program, where the state stays in registers between tokens.

Only one sequence per launch (a drift session holds one); the state is loaded from the pool slot
(or zeros) and stored back once at the end, already rounded.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..errors import KernelInputError
from ..triton_common import kda_gate, l2norm_vec, round_state
from .kernel import delta_rule, tile_offsets
from .wrapper import decode_config

# the pool dtypes this kernel stores (round to nearest only)
_NAMES = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}


@triton.jit
def _recurrent_rounded_kernel(
    q,
    k,
    v,
    g_raw,
    beta_raw,
    a_log,
    dt_bias,
    pool,
    slot,
    o,
    T,
    scale,
    HAS_INIT: tl.constexpr,
    H: tl.constexpr,
    K: tl.constexpr,
    V: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    VEC: tl.constexpr,
    STATE_DTYPE: tl.constexpr,
):
    i_v = tl.program_id(0)
    i_h = tl.program_id(1).to(tl.int64)
    o_k, o_v = tile_offsets(i_v, BK, BV, VEC)  # the decode kernel's layout
    m_k = o_k < K
    m_v = o_v < V
    m_s = m_k[:, None] & m_v[None, :]
    p_s = pool + (slot * H + i_h) * K * V + o_k[:, None] * V + o_v[None, :]
    if HAS_INIT:
        b_s = tl.load(p_s, mask=m_s, other=0.0).to(tl.float32)
    else:
        b_s = tl.zeros([BK, BV], dtype=tl.float32)
    b_bias = tl.load(dt_bias + i_h * K + o_k, mask=m_k, other=0.0).to(tl.float32)
    b_a = tl.load(a_log + i_h).to(tl.float32)
    for t in range(0, T):
        i_th = t * H + i_h
        b_q = tl.load(q + i_th * K + o_k, mask=m_k, other=0.0).to(tl.float32)
        b_k = tl.load(k + i_th * K + o_k, mask=m_k, other=0.0).to(tl.float32)
        b_gr = tl.load(g_raw + i_th * K + o_k, mask=m_k, other=0.0).to(tl.float32)
        b_beta = tl.sigmoid(tl.load(beta_raw + i_th).to(tl.float32))
        b_v = tl.load(v + i_th * V + o_v, mask=m_v, other=0.0).to(tl.float32)
        b_g = tl.where(m_k, kda_gate(b_gr, b_bias, b_a), 0.0)
        b_q = l2norm_vec(b_q) * scale
        b_k = l2norm_vec(b_k)
        b_s, b_o = delta_rule(b_s, b_q, b_k, b_g, b_beta, b_v)
        tl.store(o + i_th * V + o_v, b_o.to(o.dtype.element_ty), mask=m_v)
        # the decode kernel's store + next load: round to the pool dtype, widen exactly
        b_s = round_state(b_s, STATE_DTYPE, False).to(tl.float32)
    tl.store(p_s, round_state(b_s, STATE_DTYPE, False), mask=m_s)


def kda_recurrent_rounded(
    q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slot: int, has_initial_state: bool
) -> torch.Tensor:
    """T tokens of one sequence, q/k/g_raw [T, H, K], v [T, H, V], beta_raw [T, H]; the state of
    pool slot `slot` ([S, H, K, V], any of fp32/fp16/bf16) is updated in place; returns o [T, H, V]."""
    T, H, K = q.shape
    V = v.shape[-1]
    name = _NAMES.get(state_pool.dtype)
    if name is None:
        raise KernelInputError(f"unsupported state pool dtype {state_pool.dtype}")
    if state_pool.shape[1:] != (H, K, V) or not state_pool.is_contiguous():
        raise KernelInputError(
            f"state_pool must be contiguous [S, {H}, {K}, {V}], got {tuple(state_pool.shape)}"
        )
    q, k, v, g_raw, beta_raw = (x.contiguous() for x in (q, k, v, g_raw, beta_raw))
    o = torch.empty(T, H, V, dtype=q.dtype, device=q.device)
    if T == 0:
        return o
    tile = decode_config(state_pool.dtype, V)  # the decode launch's layout: the same sums over K
    BV, nw = tile.BV, tile.num_warps
    grid = (triton.cdiv(V, BV), H)
    _recurrent_rounded_kernel[grid](
        q,
        k,
        v,
        g_raw,
        beta_raw,
        A_log.reshape(H).contiguous(),
        dt_bias.contiguous(),
        state_pool,
        int(slot),
        o,
        T,
        K**-0.5,
        HAS_INIT=bool(has_initial_state),
        H=H,
        K=K,
        V=V,
        BK=triton.next_power_of_2(K),
        BV=BV,
        VEC=min(tile.VEC, BV),
        STATE_DTYPE=name,
        num_warps=nw,
    )
    return o


def check_against_decode_loop(
    H: int = 32, K: int = 128, V: int = 128, T: int = 64, device: str = "cuda", seed: int = 0
) -> dict:
    """Run this kernel and `evalkit.kernels.kda_decode` once per token on the same random inputs,
    per pool dtype; `ok` when fp32 agrees to 1e-5 and each 16-bit state is closer to the decode
    loop's than a quarter of the rounding effect itself (the state never rounded). A GPU run calls
    this first and falls back to the per-token loop if it fails."""
    from .. import kda_decode  # the public function (dispatching to the decode kernel)

    g = torch.Generator(device="cpu").manual_seed(seed)

    def rnd(*shape, scale=1.0, shift=0.0):
        return (torch.randn(*shape, generator=g) * scale + shift).to(device)

    q, k, gr = rnd(T, H, K), rnd(T, H, K), rnd(T, H, K)
    v, beta = rnd(T, H, V, scale=3.0), rnd(T, H)
    A_log, dt_bias = rnd(H, scale=0.5, shift=-1.0), rnd(H * K, shift=-3.0)
    init = rnd(1, H, K, V)
    exact = init.clone()
    kda_recurrent_rounded(q, k, v, gr, beta, A_log, dt_bias, exact, 0, True)
    out: dict = {"shape": {"T": T, "H": H, "K": K, "V": V}, "ok": True}
    for name, dt in (("fp32", torch.float32), ("fp16", torch.float16), ("bf16", torch.bfloat16)):
        loop, fused = init.to(dt).clone(), init.to(dt).clone()
        slot = torch.tensor([0], device=device)
        o_loop = torch.stack(
            [
                kda_decode(
                    q[t : t + 1],
                    k[t : t + 1],
                    v[t : t + 1],
                    gr[t : t + 1],
                    beta[t : t + 1],
                    A_log,
                    dt_bias,
                    loop,
                    slot,
                )[0]
                for t in range(T)
            ]
        )
        o = kda_recurrent_rounded(q, k, v, gr, beta, A_log, dt_bias, fused, 0, True)

        def fro(a, b):
            return float((a.float() - b.float()).norm() / b.float().norm())

        rec = {
            "state_vs_loop": fro(fused, loop),
            "out_vs_loop": fro(o, o_loop),
            "bit_identical": bool(torch.equal(fused, loop) and torch.equal(o, o_loop)),
            "effect": fro(loop, exact.to(dt)),
        }
        if name == "fp32":
            rec["ok"] = rec["state_vs_loop"] < 1e-5 and rec["out_vs_loop"] < 1e-5
        else:
            rec["ok"] = rec["effect"] > 0 and rec["state_vs_loop"] < 0.25 * rec["effect"]
        out[name] = rec
        out["ok"] = out["ok"] and rec["ok"]
    return out
