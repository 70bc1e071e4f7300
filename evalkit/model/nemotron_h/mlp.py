"""NemotronH's feed-forward blocks (mamba2.md §1): the non-gated relu2 MLP (down(relu(up x)^2)),
and the MoE: a sigmoid router in fp32 with a score-correction bias used only for the choice,
grouped top-k (n_group / topk_group), the chosen sigmoid scores normalised (norm_topk_prob) and
scaled (routed_scaling_factor), relu2 experts, plus one shared relu2 expert."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .config import NemotronHArch


def relu2(x: torch.Tensor) -> torch.Tensor:
    return F.relu(x).square()


class Relu2MLP(nn.Module):
    def __init__(self, hidden: int, inner: int, dtype: torch.dtype, device: torch.device | str):
        super().__init__()
        self.up = nn.Parameter(torch.empty(inner, hidden, dtype=dtype, device=device), requires_grad=False)
        self.down = nn.Parameter(torch.empty(hidden, inner, dtype=dtype, device=device), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(relu2(F.linear(x, self.up)), self.down)


class NemotronHMoE(nn.Module):
    def __init__(self, arch: NemotronHArch, dtype: torch.dtype, device: torch.device | str):
        super().__init__()
        self.E, self.k = arch.n_routed_experts, arch.num_experts_per_tok
        self.n_group, self.topk_group = arch.n_group, arch.topk_group
        self.norm_topk_prob, self.scaling = arch.norm_topk_prob, arch.routed_scaling_factor
        hid, inner = arch.hidden_size, arch.moe_intermediate_size

        def p(*shape, dt=dtype):
            return nn.Parameter(torch.empty(*shape, dtype=dt, device=device), requires_grad=False)

        self.gate_weight = p(self.E, hid, dt=torch.float32)  # fp32 in transformers too
        self.score_bias = p(self.E, dt=torch.float32)
        self.up = p(self.E, inner, hid)
        self.down = p(self.E, hid, inner)
        self.shared = Relu2MLP(hid, arch.moe_shared_expert_intermediate_size, dtype, device)

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(weights [T, k] fp32, expert ids [T, k]) as transformers' NemotronHTopkRouter."""
        scores = F.linear(x.float(), self.gate_weight).sigmoid()
        choice = scores + self.score_bias
        per_group = self.E // self.n_group
        group_scores = choice.view(-1, self.n_group, per_group).topk(min(2, per_group), dim=-1)[0].sum(-1)
        groups = group_scores.topk(self.topk_group, dim=-1, sorted=False)[1]
        keep = torch.zeros_like(group_scores).scatter_(1, groups, 1.0).bool()
        keep = keep[:, :, None].expand(-1, self.n_group, per_group).reshape(-1, self.E)
        ids = choice.masked_fill(~keep, float("-inf")).topk(self.k, dim=-1, sorted=False)[1]
        w = scores.gather(1, ids)
        if self.norm_topk_prob:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return w * self.scaling, ids

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, ids = self.route(x)
        out = torch.zeros_like(x)
        for e in ids.unique().tolist():
            rows, slot = torch.where(ids == e)
            ye = F.linear(relu2(F.linear(x[rows], self.up[e])), self.down[e])
            out.index_add_(0, rows, (ye * w[rows, slot, None]).to(out.dtype))
        return out + self.shared(x)
