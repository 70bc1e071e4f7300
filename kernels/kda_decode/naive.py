"""Plain torch form of one KDA decode step, written as the matrix update
S' = (I - beta k k^T) diag(exp(g)) S + beta k v^T,  o = S'^T q
(the token-by-token reference uses the equivalent 'decay, then delta rule' form). Any dtype."""

from __future__ import annotations

import torch


def naive_decode_step(S: torch.Tensor, q, k, v, g, beta) -> tuple[torch.Tensor, torch.Tensor]:
    """S [..., K, V]; q, k, g [..., K] (q, k normalised, q scaled); v [..., V]; beta [...]."""
    K = S.shape[-2]
    eye = torch.eye(K, dtype=S.dtype, device=S.device)
    b = beta[..., None, None]
    proj = eye - b * k[..., :, None] * k[..., None, :]
    S = proj @ (torch.exp(g)[..., :, None] * S) + b * k[..., :, None] * v[..., None, :]
    return S, (S * q[..., :, None]).sum(-2)
