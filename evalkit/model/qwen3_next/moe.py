"""The sparse MoE block of Qwen3-Next / Qwen3.5-MoE (gated-deltanet.md §5): a softmax router
(logits in the model dtype, softmax in fp32, top-k, renormalised when `norm_topk_prob`, weights
cast to the model dtype) and a shared SwiGLU expert scaled by sigmoid(shared_expert_gate(x)).

The experts run as Kimi's MoE runs them (one grouped GEMM per projection on the GPU, every expert
on every row on the CPU: no GEMM shape depends on another row's routing)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from evalkit import kernels
from evalkit.kernel_choice import KernelChoice

from ..layers.moe import DenseMLP
from ..layers.moe import MoE as KimiMoE
from .config import GDNArch


class SharedExpertMoE(nn.Module):
    kernels: KernelChoice = KernelChoice()  # set by DecoderLM.use_kernels (the borrowed methods read it)

    def __init__(self, arch: GDNArch, dtype: torch.dtype, device):
        super().__init__()
        E, hid, inter = arch.num_experts, arch.hidden_size, arch.moe_intermediate_size
        self.E, self.top_k, self.renorm = E, arch.num_experts_per_tok, arch.norm_topk_prob

        def p(*shape):
            return nn.Parameter(torch.empty(*shape, dtype=dtype, device=device), requires_grad=False)

        self.gate_weight = p(E, hid)
        self.w13 = p(E, 2 * inter, hid)  # per expert: gate rows, then up rows
        self.w2 = p(E, hid, inter)
        self.shared = DenseMLP(hid, arch.shared_expert_intermediate_size, dtype, device)
        self.shared_gate = p(1, hid)

    _dense_all = KimiMoE._dense_all
    _grouped = KimiMoE._grouped
    _grouped_sorted = KimiMoE._grouped_sorted  # what _grouped calls

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-k expert ids [T, k] and their weights [T, k] in the model dtype."""
        probs = F.softmax(F.linear(x, self.gate_weight), dim=-1, dtype=torch.float32)
        w, idx = torch.topk(probs, self.top_k, dim=-1)
        if self.renorm:
            w = w / w.sum(-1, keepdim=True)
        return idx, w.to(x.dtype)

    def forward(
        self,
        x: torch.Tensor,
        n_routed: int | None = None,
        decode: bool = False,
        real_rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`n_routed`: route only the first rows (the rest are shape padding); `decode`: a decode
        step's rows (`KernelChoice.moe_decode` picks their GEMM); `real_rows`: a decode step's dummy
        rows (False) go to no expert (Kimi's `MoE.forward`)."""
        T = x.shape[0]
        n = T if n_routed is None else n_routed
        idx, w = self.route(x)
        if x.is_cuda or kernels.use_triton(x):
            y = self._grouped(x[:n], idx[:n], decode, real_rows)
        else:
            y = self._dense_all(x, idx)[:n]
        routed = (y * w[:n, :, None]).to(torch.float32).sum(1).to(x.dtype)
        if n < T:
            routed = F.pad(routed, (0, 0, 0, T - n))
        return routed + torch.sigmoid(F.linear(x, self.shared_gate)) * self.shared(x)
