"""MLA prefill attention: the zero-padded equal-head-dim form (the one PyTorch's flash kernel takes)
equals the plain form and a float64 softmax over the lower-right causal window."""

from __future__ import annotations

import pytest
import torch

from evalkit.model.layers.mla_prefill import causal_prefill_attention, flash_eligible


def _reference(q, k, v, scale):
    m, L = q.shape[1], k.shape[1]
    s = torch.einsum("hmd,hld->hml", q.double(), k.double()) * scale
    allowed = torch.arange(L)[None, :] <= torch.arange(L - m, L)[:, None]
    s = s.masked_fill(~allowed, float("-inf"))
    return torch.einsum("hml,hlv->hmv", s.softmax(-1), v.double())


@pytest.mark.parametrize("m,L", [(1, 9), (5, 5), (7, 40), (33, 33)])
@pytest.mark.parametrize("dqk,dv", [(24, 16), (16, 24)])
def test_padded_equals_plain_and_reference(m, L, dqk, dv):
    g = torch.Generator().manual_seed(m * 100 + L)
    q, k = torch.randn(3, m, dqk, generator=g), torch.randn(3, L, dqk, generator=g)
    v = torch.randn(3, L, dv, generator=g)
    scale = dqk**-0.5
    padded = causal_prefill_attention(q, k, v, scale, pad=True)
    plain = causal_prefill_attention(q, k, v, scale, pad=False)
    assert padded.shape == plain.shape == (3, m, dv)
    ref = _reference(q, k, v, scale)
    assert torch.allclose(padded.double(), ref, atol=1e-5, rtol=1e-5)
    assert torch.allclose(plain.double(), ref, atol=1e-5, rtol=1e-5)


def test_cpu_keeps_the_plain_form():
    assert not flash_eligible(torch.zeros(1, dtype=torch.bfloat16), 192, "flash")
