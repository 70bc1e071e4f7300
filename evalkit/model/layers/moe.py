"""Feed-forward blocks: the dense SwiGLU MLP (layer 0) and the MoE (kimi-linear.md §4).

Router in fp32: s = sigmoid(h W_gate^T); experts are *chosen* by s + e_score_correction_bias
(group-limited when n_group > 1) but *weighted* by s, renormalised over the top-k and scaled by
routed_scaling_factor. Output = sum_k w_k expert_k(h) (fp32 sum of the model-dtype expert outputs,
in the fixed top-k order) + the unweighted shared expert.

Experts: on CUDA one grouped GEMM per projection over the token-expert pairs sorted by expert
(`torch._grouped_mm`, graph-capturable); in a decode step, with `KernelChoice.moe_decode` "triton"
(the default), the Triton kernel built for a few rows per expert (`evalkit.kernels.moe_gemm`). A
decode step's dummy rows (`ForwardBatch.real_rows`: the sequences that keep a CUDA graph's width)
are routed to no expert: their inputs are identical, so they would all choose the same experts and
make each read its weights again per block of rows; a real row's result is the same either way
(each row's sums do not depend on the others). On CPU every expert runs densely on every row, so
no matmul shape depends on the routing of other rows (batch invariance; CPU models are tiny).

Combine on the GPU path: one Triton launch, `evalkit.kernels.moe_combine` (the top-k added one
by one in fp32, in order; measured 11% less GPU time for a 48B-dims prefill forward and 4% per
decode step than the torch form, results/bench/moe-combine-h200); `KernelChoice.moe_combine`
"torch" puts the expert rows back in token order with torch and sums them in fp32. Both are batch
invariant; they may differ in the last bit."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from evalkit import kernels
from evalkit.kernel_choice import KernelChoice

from ..config import KimiArch
from .fused import fused_elementwise


def swiglu_activation(gu: torch.Tensor, fused: bool = True) -> torch.Tensor:
    """silu(g) * u for gu = [g | u]: one Triton pass on the GPU path when `fused` (the run's
    `KernelChoice.fused_elementwise`), else torch's."""
    return kernels.swiglu(gu) if fused_elementwise(gu, fused) else kernels.cpu.swiglu(gu)


def swiglu(x: torch.Tensor, gate_up: torch.Tensor, down: torch.Tensor, fused: bool = True) -> torch.Tensor:
    return F.linear(swiglu_activation(F.linear(x, gate_up), fused), down)


def expert_order(flat: torch.Tensor, E: int) -> torch.Tensor:
    """The stable order of rows by expert id (ids 0..E). The ids are sorted as the narrowest integer
    that holds them: a radix sort takes a pass per few bits of its keys, and a stable sort of the
    same values gives the same permutation whatever their type."""
    return torch.sort(flat.to(torch.int16 if E < 2**15 else torch.int32), stable=True)[1]


class DenseMLP(nn.Module):
    kernels: KernelChoice = KernelChoice()  # set by DecoderLM.use_kernels

    def __init__(self, hidden: int, inter: int, dtype: torch.dtype, device):
        super().__init__()
        self.gate_up = nn.Parameter(
            torch.empty(2 * inter, hidden, dtype=dtype, device=device), requires_grad=False
        )
        self.down = nn.Parameter(torch.empty(hidden, inter, dtype=dtype, device=device), requires_grad=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return swiglu(x, self.gate_up, self.down, self.kernels.fused_elementwise)


class MoE(nn.Module):
    kernels: KernelChoice = KernelChoice()  # set by DecoderLM.use_kernels

    def __init__(self, arch: KimiArch, dtype: torch.dtype, device):
        super().__init__()
        E, hid, inter = arch.num_local_experts, arch.hidden_size, arch.moe_intermediate_size
        self.E, self.top_k = E, arch.num_experts_per_tok
        self.n_group, self.topk_group = arch.n_group, arch.topk_group
        self.renorm, self.scale = arch.norm_topk_prob, arch.routed_scaling_factor

        def p(*shape, dt=dtype):
            return nn.Parameter(torch.empty(*shape, dtype=dt, device=device), requires_grad=False)

        self.gate_weight = p(E, hid, dt=torch.float32)
        self.e_bias = p(E, dt=torch.float32)
        self.w13 = p(E, 2 * inter, hid)  # per expert: w1 (gate) rows, then w3 (up) rows
        self.w2 = p(E, hid, inter)
        self.shared = DenseMLP(hid, inter * arch.n_shared_experts, dtype, device)

    def route(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-k expert ids [T, k] and their fp32 weights [T, k] (sorted by selection score)."""
        s = torch.sigmoid(F.linear(x.to(torch.float32), self.gate_weight))
        choice = s + self.e_bias
        if self.n_group > 1:
            T = choice.shape[0]
            grouped = choice.view(T, self.n_group, -1)
            group_scores = grouped.topk(2, dim=-1)[0].sum(-1)
            keep = torch.zeros_like(group_scores).scatter_(
                1, group_scores.topk(self.topk_group, dim=-1)[1], 1.0
            )
            choice = grouped.masked_fill(keep[..., None] == 0, float("-inf")).view(T, -1)
        idx = torch.topk(choice, self.top_k, dim=-1, sorted=True)[1]
        w = s.gather(1, idx)
        if self.renorm:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return idx, w * self.scale

    def forward(
        self,
        x: torch.Tensor,
        n_routed: int | None = None,
        decode: bool = False,
        real_rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`n_routed`: route only the first rows (the rest are shape padding; they get the shared
        expert). `decode`: the rows are a decode step's (one per sequence), which picks its GEMM.
        `real_rows` [T] bool (a decode step's, on the device): rows where False are dummy sequences
        that keep a CUDA graph's width; they are routed to no expert (on the GPU path), so they add
        no rows to the experts their identical inputs would all choose."""
        T = x.shape[0]
        n = T if n_routed is None else n_routed
        idx, w = self.route(x)
        gpu = x.is_cuda or kernels.use_triton(x)  # the GPU path (also under TRITON_INTERPRET=1)
        if gpu and self.kernels.moe_combine == "fused":
            ys, inv = self._grouped_sorted(x[:n], idx[:n], decode, real_rows)
            routed = kernels.moe_combine(ys, inv, w[:n], x.dtype)
        else:
            # [n, k, hidden]
            y = self._grouped(x[:n], idx[:n], decode, real_rows) if gpu else self._dense_all(x, idx)[:n]
            routed = (y.to(torch.float32) * w[:n, :, None]).sum(1).to(x.dtype)
        if n < T:
            routed = F.pad(routed, (0, 0, 0, T - n))
        return routed + self.shared(x)

    def _dense_all(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        fused = self.kernels.fused_elementwise
        outs = torch.stack(
            [swiglu(x, self.w13[e], self.w2[e], fused) for e in range(self.E)], dim=1
        )  # [n, E, hid]
        return outs.gather(1, idx[..., None].expand(-1, -1, x.shape[-1]))

    def _grouped(
        self, x: torch.Tensor, idx: torch.Tensor, decode: bool = False, real: torch.Tensor | None = None
    ) -> torch.Tensor:
        n, k = idx.shape
        ys, inv = self._grouped_sorted(x, idx, decode, real)
        return ys[inv.reshape(-1)].view(n, k, -1)

    def _grouped_sorted(
        self, x: torch.Tensor, idx: torch.Tensor, decode: bool = False, real: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Expert outputs [n*k, hidden] in expert-sorted order, and inv [n, k]: the row of token t's
        j-th expert among them. `decode` with `moe_decode` "triton": the Triton grouped GEMM.
        `real` [>= n] bool (its first n rows are x's): rows where False go to a virtual expert E,
        sorted after every real one and past offs[-1], so no GEMM computes them; their outputs are
        zeros."""
        n, k = idx.shape
        if real is not None:
            idx = torch.where(real[:n, None], idx, self.E)
        flat = idx.reshape(-1)
        order = expert_order(flat, self.E)
        counts = torch.zeros(self.E + 1, dtype=torch.int32, device=x.device).scatter_add_(
            0, flat, torch.ones_like(flat, dtype=torch.int32)
        )
        offs = torch.cumsum(counts[: self.E], 0, dtype=torch.int32)
        xs = x[order // k]
        if decode and self.kernels.moe_decode == "triton":
            gu = kernels.moe_gemm(xs, self.w13, offs)
            ys = kernels.moe_gemm(swiglu_activation(gu, self.kernels.fused_elementwise), self.w2, offs)
        else:
            gu = torch._grouped_mm(xs, self.w13.transpose(1, 2), offs=offs)
            act = swiglu_activation(gu, self.kernels.fused_elementwise)
            ys = torch._grouped_mm(act, self.w2.transpose(1, 2), offs=offs)
            if real is not None:  # torch leaves the rows past offs[-1] unwritten
                unrouted = torch.arange(ys.shape[0], device=ys.device)[:, None] >= offs[-1]
                ys = ys.masked_fill(unrouted, 0)
        inv = torch.empty_like(order)
        inv[order] = torch.arange(order.numel(), device=order.device)
        return ys, inv.view(n, k)
