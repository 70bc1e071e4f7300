"""The fast-forgetting channels of the CPU chunked prefill (`cpu_chunked.py`), summed pairwise.

A channel whose gate decays by more than e^-SAFE_SPAN over a chunk cannot enter the chunk's matrix
product as e^G and e^-G (they would overflow), so its terms a_i b_j exp(G_i - G_j) are added to
the product one channel at a time. On a trained model these are a fifth to a half of all
(head, chunk, channel) triples, and they used to be the prefill's largest cost: every pair (i, j)
of the chunk took an exp, for the upper triangle too (masked to -inf and zeroed), and again for
Aqk and for Akk. Here the decays exp(G_i - G_j) are computed once per chunk group and only for
j <= i, and each product only for those pairs. Every kept element is the same fp32 operation on
the same operands as before ((a_i * b_j) * exp(G_i - G_j), added to M in the same channel order
by `index_add_`), so the result is bit for bit the former one: the upper triangle was discarded
by `tril_` anyway."""

from __future__ import annotations

import torch

from .fast_exp import exp_or_zero


class StrongPairs:
    """Where the fast-forgetting channels are in [H, n, C, K] tensors, and their decays
    exp(G_i - G_j) for j <= i ([N, P], P = C (C + 1) / 2 pairs in row-major order)."""

    def __init__(self, G: torch.Tensor, strong: torch.Tensor):
        """G [H, n, C, K] the in-chunk cumulative log decay; strong [H, n, 1, K] bool."""
        H, n, C, _ = G.shape
        self.h, self.c, _, self.k = strong.nonzero(as_tuple=True)
        self.rows = self.h * n + self.c  # M.view(H * n, C * C) row of each channel's terms
        self.i, self.j = torch.tril_indices(C, C)
        self.flat = self.i * C + self.j  # their positions in a [C, C] block, row-major
        self.decay = None
        if self.h.numel():
            Gs = G[self.h, self.c, :, self.k]  # [N, C]
            self.decay = exp_or_zero(Gs.index_select(1, self.i) - Gs.index_select(1, self.j))

    def add_to(self, M: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> None:
        """M [H, n, C, C] += the strong channels' a_i b_j exp(G_i - G_j) at j <= i (in place);
        a, b [H, n, C, K]. M's upper triangle is left alone (the caller zeroes it)."""
        if self.decay is None:
            return
        H, n, C, _ = M.shape
        a_s, b_s = a[self.h, self.c, :, self.k], b[self.h, self.c, :, self.k]  # [N, C]
        terms = a_s.index_select(1, self.i) * b_s.index_select(1, self.j) * self.decay
        flat = M.view(H * n, C * C)
        low = flat.index_select(1, self.flat)
        low.index_add_(0, self.rows, terms)
        flat.index_copy_(1, self.flat, low)
