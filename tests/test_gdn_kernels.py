"""GDN on the KDA kernels: the kernels' CPU path fed with `as_kda_gate` (per-head gate broadcast
over K) and repeat_interleaved key heads equals an independent float64 Gated DeltaNet recurrence
written from gated-deltanet.md §2.4 (scalar decay per value head; value head j reads key head
j // r), packed prefill and decode, from zero and from a carried state; so does the float64 KDA
reference, and a per-channel gate (KDA) would not."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from evalkit import kernels
from evalkit.kernels import reference
from evalkit.model.qwen3_next.gdn import as_kda_gate

Hk, Hv, dk, dv = 2, 4, 16, 8
R = Hv // Hk


def gdn_float64(q, k, v, a, b, A_log, dt_bias, S0):
    """q, k [T, Hk, dk]; v [T, Hv, dv]; a, b [T, Hv]; S0 [Hv, dk, dv] -> o [T, Hv, dv], S."""
    q, k, v, a, b = (t.double() for t in (q, k, v, a, b))
    q = q.repeat_interleave(R, dim=1)
    k = k.repeat_interleave(R, dim=1)
    q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6) * dk**-0.5
    k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
    g = -A_log.double().exp() * F.softplus(a + dt_bias.double())  # [T, Hv]: one decay per head
    beta = torch.sigmoid(b)
    S = S0.double().clone()
    out = []
    for t in range(q.shape[0]):
        S = S * g[t].exp()[:, None, None]
        u = torch.einsum("hk,hkv->hv", k[t], S)
        S = S + k[t][:, :, None] * (beta[t][:, None] * (v[t] - u))[:, None, :]
        out.append(torch.einsum("hk,hkv->hv", q[t], S))
    return torch.stack(out), S


def _inputs(T, gen):
    q, k = torch.randn(T, Hk, dk, generator=gen), torch.randn(T, Hk, dk, generator=gen)
    v = torch.randn(T, Hv, dv, generator=gen)
    a, b = torch.randn(T, Hv, generator=gen) * 2, torch.randn(T, Hv, generator=gen)
    A_log, dt_bias = torch.rand(Hv, generator=gen).mul(3).add(0.5).log(), torch.randn(Hv, generator=gen)
    return q, k, v, a, b, A_log, dt_bias


def _kernel_args(q, k, v, a, b, A_log, dt_bias):
    g_raw, dt = as_kda_gate(a, dt_bias, dk)
    return (q.repeat_interleave(R, 1), k.repeat_interleave(R, 1), v, g_raw, b, A_log, dt)


def test_kernels_compute_gdn():
    gen = torch.Generator().manual_seed(0)
    x = _inputs(50, gen)
    S0 = torch.randn(Hv, dk, dv, generator=gen) * 0.3
    want_o, want_S = gdn_float64(*x, S0)
    for impl in (kernels.cpu, reference):
        dt = torch.float64 if impl is reference else torch.float32
        pool = torch.zeros(3, Hv, dk, dv, dtype=dt)
        pool[2] = S0.to(dt)
        args = _kernel_args(*x)
        slot = torch.tensor([2])
        cu = torch.tensor([0, 40], dtype=torch.int32)
        o = impl.kda_prefill(
            *(t[:40] if t.dim() > 1 else t for t in args), pool, slot, cu, torch.tensor([True])
        )
        steps = [
            impl.kda_decode(*(t[i : i + 1] if t.dim() > 1 else t for t in args), pool, slot)
            for i in range(40, 50)
        ]
        got = torch.cat([o, *steps]).double()
        assert (got - want_o).abs().max() < 2e-5 * want_o.abs().max(), impl.__name__
        assert (pool[2].double() - want_S).abs().max() < 2e-5 * want_S.abs().max(), impl.__name__


def test_a_per_channel_gate_is_not_gdn():
    gen = torch.Generator().manual_seed(1)
    q, k, v, a, b, A_log, dt_bias = _inputs(20, gen)
    want_o, _ = gdn_float64(q, k, v, a, b, A_log, dt_bias, torch.zeros(Hv, dk, dv))
    g_raw, dt = as_kda_gate(a, dt_bias, dk)
    g_raw = g_raw + torch.randn(g_raw.shape, generator=gen)  # channels decay differently: KDA
    pool = torch.zeros(1, Hv, dk, dv)
    o = kernels.cpu.kda_prefill(
        q.repeat_interleave(R, 1), k.repeat_interleave(R, 1), v, g_raw, b, A_log, dt, pool,
        torch.tensor([0]), torch.tensor([0, 20], dtype=torch.int32), torch.tensor([False]),
    )  # fmt: skip
    assert (o.double() - want_o).abs().max() > 1e-3 * want_o.abs().max()
