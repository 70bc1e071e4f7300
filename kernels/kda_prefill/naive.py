"""Plain torch form of the chunked (WY / UT) prefill for one sequence: the algebra the Triton
kernel implements, with dense [C, C, K] decay tensors instead of the kernel's overflow-safe
block scheme. Slow but short; tests check it against the token-by-token reference, which pins
down the algebra independently of Triton."""

from __future__ import annotations

import torch


def naive_chunked_kda(q, k, v, g, beta, S0, chunk_size: int = 64, intra_chunk_dtype=None):
    """q, k, g [T, H, K] (q, k normalised, q scaled), v [T, H, V], beta [T, H], S0 [H, K, V].
    Returns (o [T, H, V], final state [H, K, V]) in S0's dtype."""
    T = q.shape[0]
    S = S0.clone()
    o = torch.empty(T, q.shape[1], v.shape[-1], dtype=S.dtype, device=S.device)
    for t0 in range(0, T, chunk_size):
        t1 = min(t0 + chunk_size, T)
        qc, kc, vc, bc = (x[t0:t1].transpose(0, 1).to(S.dtype) for x in (q, k, v, beta))  # [H, C, *]
        G = g[t0:t1].transpose(0, 1).to(S.dtype).cumsum(1)  # [H, C, K]
        C = t1 - t0
        diff = G[:, :, None, :] - G[:, None, :, :]  # [H, i, j, K] = G_i - G_j
        low = torch.tril(torch.ones(C, C, dtype=torch.bool, device=S.device))
        decay = torch.exp(torch.where(low[None, :, :, None], diff, float("-inf")))
        Aqk = torch.einsum("hik,hjk,hijk->hij", qc, kc, decay)
        Akk = torch.einsum("hik,hjk,hijk->hij", kc, kc, decay).tril(-1) * bc[:, :, None]
        Tm = torch.linalg.inv(torch.eye(C, dtype=S.dtype, device=S.device) + Akk)
        Wm = Tm @ (bc[..., None] * kc * torch.exp(G))
        Um = Tm @ (bc[..., None] * vc)
        Vn = Um - Wm @ S
        o[t0:t1] = ((qc * torch.exp(G)) @ S + Aqk @ Vn).transpose(0, 1)
        Gl = G[:, -1, :]
        S = torch.exp(Gl)[..., None] * S + (kc * torch.exp(Gl[:, None, :] - G)).transpose(1, 2) @ Vn
        if intra_chunk_dtype is not None and t1 < T:
            S = S.to(intra_chunk_dtype).to(S0.dtype)
    return o, S
