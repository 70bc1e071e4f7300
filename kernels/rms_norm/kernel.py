"""Triton RMSNorm: BR rows per program (one at transformer widths), the torch form's roundings in one pass.

The torch form (transformers' KimiLinearRMSNorm) is six launches over [rows x hidden] on the GPU:
widen to fp32, square, mean, scale, narrow, multiply by the weight; at 48B dims it was ~8% of a
prefill forward's GPU time (results/bench/engine-h200-profile/). Here a row is read once and
written once. Roundings as the torch form: the normalised row is rounded to the input dtype, then
multiplied by the weight in the weight's dtype's arithmetic (a bf16 product of two bf16 values is
exact in fp32, so rounding it once gives torch's bf16 multiply). Only the order of the sum of
squares differs from torch's (so the last bit can), and it is fixed per row: a row's output never
depends on the other rows (batch invariance)."""

from __future__ import annotations

import triton
import triton.language as tl

from ..triton_common import round_to


@triton.jit
def rms_norm_kernel(x, weight, y, n_rows, stride_x, eps, D: tl.constexpr, BR: tl.constexpr, BD: tl.constexpr):
    o_r = (tl.program_id(0) * BR + tl.arange(0, BR)).to(tl.int64)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    m = (o_r < n_rows)[:, None] & m_d[None, :]
    h = tl.load(x + o_r[:, None] * stride_x + o_d[None, :], mask=m, other=0.0).to(tl.float32)
    r = tl.rsqrt(tl.sum(h * h, axis=1) / D + eps)
    h = round_to(h * r[:, None], x.dtype.element_ty).to(tl.float32)
    w = tl.load(weight + o_d, mask=m_d, other=0.0).to(tl.float32)
    tl.store(y + o_r[:, None] * D + o_d[None, :], round_to(w[None, :] * h, y.dtype.element_ty), mask=m)
