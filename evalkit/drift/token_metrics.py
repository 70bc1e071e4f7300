"""Per-position divergence of an arm's next-token distribution from the fp32 arm's.

Computed in float64 from the two logit blocks of one chunk, in slices of rows so that even a
163840-word vocabulary never needs more than `max_bytes` of float64 scratch:
- kl:    KL(p_fp32 || p_arm) = sum_v p_fp32(v) (log p_fp32(v) - log p_arm(v)), >= 0;
- top1:  1 if both arms' argmax agree, else 0;
- nll_ref / nll_arm: -log p of the actual next token (where there is one), whose difference
  gives |Δ NLL| and ln(PPL_arm / PPL_fp32).
Identical logits give exactly zero KL (each term is p * 0), so an fp32-vs-fp32 run is an exact
check that the two arms really computed the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class TokenMetrics:
    kl: torch.Tensor  # [T] float64
    top1: torch.Tensor  # [T] float64 (1.0 = same argmax)
    nll_ref: torch.Tensor  # [T] float64 (NaN where there is no next token)
    nll_arm: torch.Tensor  # [T] float64
    nonfinite: torch.Tensor  # [T] bool: the arm's logits held NaN or inf at this position

    def to_numpy(self) -> dict:
        return {
            k: getattr(self, k).detach().cpu().numpy()
            for k in ("kl", "top1", "nll_ref", "nll_arm", "nonfinite")
        }


def token_metrics(
    ref_logits: torch.Tensor,
    arm_logits: torch.Tensor,
    next_tokens: torch.Tensor | None = None,
    max_bytes: int = 256 << 20,
) -> TokenMetrics:
    """Metrics for T positions from logits [T, V] of the fp32 arm and of the arm under test.

    `next_tokens` [T] holds the token that follows each position, or -1 where none does.
    """
    if ref_logits.shape != arm_logits.shape or ref_logits.dim() != 2:
        raise ValueError(
            f"logits must both be [T, V]; got {tuple(ref_logits.shape)} and {tuple(arm_logits.shape)}"
        )
    T, V = ref_logits.shape
    dev = ref_logits.device
    if next_tokens is None:
        next_tokens = torch.full((T,), -1, dtype=torch.long, device=dev)
    next_tokens = next_tokens.to(dev, torch.long)
    rows = max(1, int(max_bytes // (V * 8 * 3)))  # 3 float64 [rows, V] temporaries at once
    out = {k: torch.empty(T, dtype=torch.float64, device=dev) for k in ("kl", "top1", "nll_ref", "nll_arm")}
    nonfinite = torch.empty(T, dtype=torch.bool, device=dev)
    for s in range(0, T, rows):
        e = min(T, s + rows)
        a = arm_logits[s:e]
        nonfinite[s:e] = ~torch.isfinite(a).all(dim=-1)
        lr = torch.log_softmax(ref_logits[s:e].double(), dim=-1)
        la = torch.log_softmax(a.double(), dim=-1)
        kl = (lr.exp() * (lr - la)).sum(-1)
        out["kl"][s:e] = kl.clamp_min(0.0)  # rounding can leave -1e-17 where the arms agree
        out["top1"][s:e] = (ref_logits[s:e].argmax(-1) == a.argmax(-1)).double()
        nxt = next_tokens[s:e]
        has = nxt >= 0
        idx = nxt.clamp_min(0).unsqueeze(1)
        nan = torch.full_like(kl, float("nan"))
        out["nll_ref"][s:e] = torch.where(has, -lr.gather(1, idx).squeeze(1), nan)
        out["nll_arm"][s:e] = torch.where(has, -la.gather(1, idx).squeeze(1), nan)
        del lr, la
    return TokenMetrics(out["kl"], out["top1"], out["nll_ref"], out["nll_arm"], nonfinite)
