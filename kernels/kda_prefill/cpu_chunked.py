"""Chunked KDA prefill on the CPU in float32: the Triton kernel's algebra with torch matrix products.

The token loop (`cpu._step`) pays Python and dispatch overhead per token; here a sequence is cut
into chunks of `block` tokens and the chunk-local work is done for many chunks at once:

    Akk[i, j] = beta_i sum_c k_ic k_jc exp(G_ic - G_jc)   (j < i)     G = in-chunk cumsum of g
    Aqk[i, j] =        sum_c q_ic k_jc exp(G_ic - G_jc)   (j <= i)
    T = (I + Akk)^-1 (unit lower triangular solve),  W = T (beta k e^G),  U = T (beta v)

then one short loop over chunks carries the state (the WY/UT form of kernel.py's state pass):

    v_new = U - W S;   o = (q e^G) S + Aqk v_new;   S <- e^{G_last} S + (k e^{G_last - G})^T v_new

The decay products exp(G_i - G_j) of a channel enter a matrix product as e^G and e^-G when the
channel decays by at most e^-30 over the chunk (both factors within e^+-30: no overflow, fp32's
relative accuracy); the few fast-forgetting channels (a trained model has ~10-20% per 16-32-token
chunk) are gathered and summed in the exact pairwise form, as the Triton kernel's diagonal blocks
are, so no gate overflows. Each sequence is computed on its own and
every chunk is padded to `block` rows (zero k, v, beta and gate leave the state untouched), so a
sequence's numbers do not depend on the other sequences of the call nor on where its chunks sit.
With `intra_chunk_dtype` the carried state is rounded at every `chunk_size` boundary, as the
token loop and the Triton kernel do."""

from __future__ import annotations

import torch

from .fast_exp import exp_or_zero
from .strong_pairs import StrongPairs

F32 = torch.float32
GROUP_TOKENS = 1024  # chunk-local tensors are built for this many tokens at a time (memory bound)
SAFE_SPAN = 30.0  # channels decaying by at most e^-30 over a chunk go through a matrix product


def compute_block(chunk_size: int) -> int:
    """Rows per compute chunk: 32 (or 16) when it divides the rounding chunk, else the chunk itself."""
    for b in (32, 16):
        if chunk_size % b == 0:
            return b
    return chunk_size


def _pair_scores(a, b, strict: bool, factors):
    """M[i, j] = sum_c a_ic b_jc exp(G_ic - G_jc) for j <= i (j < i if strict), zero above; inputs
    [H, n, C, K], output [H, n, C, C]; `factors` from `_decay_factors(G)`.

    A channel whose decay over the chunk spans at most SAFE_SPAN (most of them) enters one matrix
    product as (a e^G)(b e^-G)^T: both factors lie within e^{+-SAFE_SPAN}, so nothing overflows and
    each product keeps fp32's relative accuracy. The fast-forgetting channels are summed in the
    exact pairwise form exp(G_i - G_j) (never above 1), any gate included (`StrongPairs`)."""
    e_pos, e_neg, strong = factors
    M = (a * e_pos) @ (b * e_neg).transpose(-1, -2)
    strong.add_to(M, a, b)
    return M.tril_(-1 if strict else 0)


def _decay_factors(G, e_G):
    """e^G and e^-G with the fast-forgetting channels (span > SAFE_SPAN) zeroed, and those
    channels' pairwise decays (`StrongPairs`, computed once for Aqk and Akk)."""
    strong = -G[:, :, -1:, :] > SAFE_SPAN  # [H, n, 1, K]; G decreases along the chunk
    pairs = StrongPairs(G, strong)
    # e^-G overflows (slowly) only in strong channels, whose values are zeroed: exp 0 there instead
    e_neg = torch.exp((-G).masked_fill_(strong, 0.0)).masked_fill_(strong, 0.0)
    return e_G.masked_fill(strong, 0.0), e_neg, pairs


def _chunk_local(q, k, v, g, beta, block: int):
    """Chunk-local factors for n whole chunks; inputs [n*block, H, *] fp32, outputs [H, n, block, *]."""
    n = q.shape[0] // block
    H, K = q.shape[1], q.shape[2]

    def chunks(x):
        return x.reshape(n, block, H, -1).permute(2, 0, 1, 3)  # [H, n, block, D]

    qc, kc, vc, gc = chunks(q), chunks(k), chunks(v), chunks(g)
    bc = beta.reshape(n, block, H).permute(2, 0, 1)[..., None]  # [H, n, block, 1]
    G = gc.cumsum(2)
    e_G = exp_or_zero(G)
    factors = _decay_factors(G, e_G)
    Aqk = _pair_scores(qc, kc, False, factors)
    Akk = _pair_scores(kc, kc, True, factors) * bc
    rhs = torch.cat([bc * kc * e_G, bc * vc], dim=-1)
    WU = torch.linalg.solve_triangular(
        Akk + torch.eye(block, dtype=F32), rhs, upper=False, unitriangular=True
    )
    W, U = WU[..., :K], WU[..., K:]
    G_last = G[:, :, -1:, :]
    Kd = kc * exp_or_zero(G_last - G)
    return qc * e_G, Aqk, W, U, Kd, torch.exp(G_last[:, :, 0, :])


def chunked_sequence(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    S: torch.Tensor,
    *,
    chunk_size: int = 64,
    intra_chunk_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """One sequence: q, k, g [T, H, K] (q, k normalised, q scaled; g the log decay), v [T, H, V],
    beta [T, H], all fp32; S [H, K, V] fp32 updated in place to the final state. Returns o [T, H, V]."""
    T, H, _ = q.shape
    V = v.shape[-1]
    block = compute_block(chunk_size)
    per_round = chunk_size // block if chunk_size % block == 0 else 1
    group = max(block, GROUP_TOKENS // block * block)
    o = torch.empty(T, H, V, dtype=F32)
    n_chunks_total = -(-T // block)
    chunk_no = 0
    for t0 in range(0, T, group):
        t1 = min(t0 + group, T)
        pad = -(t1 - t0) % block
        # fresh zero-padded buffers: the same shapes and memory alignment wherever the rows sat
        xs = [torch.cat([x[t0:t1], x.new_zeros(pad, *x.shape[1:])]) for x in (q, k, v, g, beta)]
        Qg, Aqk, W, U, Kd, e_last = _chunk_local(*xs, block)
        n = Qg.shape[1]
        starts = torch.empty(H, n, *S.shape[1:], dtype=F32)
        v_new = torch.empty_like(U)
        for c in range(n):
            starts[:, c] = S
            v_new[:, c] = U[:, c] - W[:, c] @ S
            S.mul_(e_last[:, c, :, None]).add_(Kd[:, c].transpose(1, 2) @ v_new[:, c])
            chunk_no += 1
            if intra_chunk_dtype is not None and chunk_no % per_round == 0 and chunk_no < n_chunks_total:
                S.copy_(S.to(intra_chunk_dtype).to(F32))
        out = Qg @ starts + Aqk @ v_new  # [H, n, block, V]
        o[t0:t1] = out.permute(1, 2, 0, 3).reshape(n * block, H, V)[: t1 - t0]
    return o
