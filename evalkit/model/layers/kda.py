"""Kimi Delta Attention layer (kimi-linear.md §2) over evalkit's kernels and a slotted state pool.

The six projections that read the normed hidden state (q, k, v, f_a, g_a, b) are one fused GEMM.
The short conv, gate, beta, L2 norms and the recurrence run in `evalkit.kernels` (fp32 math; the
state pool's storage format is the arm: `state.arm`, with the layer index as the launch seed and
each sequence's store position for stochastic rounding; the prefill kernel and its products are the
run's `KernelChoice`). Output: per-head RMSNorm x
sigmoid(gate) in fp32, then o_proj."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from evalkit import kernels
from evalkit.kernel_choice import KernelChoice

from ..batch import ForwardBatch
from ..config import KimiArch
from ..store_rounds import by_round


class KDAttention(nn.Module):
    kernels: KernelChoice = KernelChoice()  # set by DecoderLM.use_kernels

    def __init__(self, arch: KimiArch, layer_idx: int, dtype: torch.dtype, device: torch.device | str):
        super().__init__()
        self.layer_idx = layer_idx
        self.H, self.K = arch.linear_num_heads, arch.linear_head_dim
        self.D = self.H * self.K
        self.W = arch.linear_conv_kernel_dim
        self.eps = arch.rms_norm_eps
        hid = arch.hidden_size
        self.split = [3 * self.D, self.K, self.K, self.H]  # qkv | f_a | g_a | b

        def p(*shape, dt=dtype):
            return nn.Parameter(torch.empty(*shape, dtype=dt, device=device), requires_grad=False)

        self.in_proj = p(sum(self.split), hid)
        self.conv_weight = p(3 * self.D, self.W)
        self.f_b = p(self.D, self.K)
        self.g_b = p(self.D, self.K)
        self.A_log = p(self.H, dt=torch.float32)  # rounded to the model dtype on load, like transformers
        self.dt_bias = p(self.D, dt=torch.float32)
        self.o_norm = p(self.K)
        self.o_proj = p(hid, self.D)

    def forward(self, h: torch.Tensor, batch: ForwardBatch, state) -> torch.Tensor:
        T = h.shape[0]
        n = T if batch.is_decode else batch.num_tokens
        H, K, D = self.H, self.K, self.D
        # every GEMM sees all T rows (padding included): a fixed shape keeps each row's numerics
        # independent of the batch; only the per-sequence ops below skip the padding rows
        qkv, f_a, g_a, b = F.linear(h, self.in_proj).split(self.split, dim=-1)
        g_raw = F.linear(f_a, self.f_b)[:n].view(n, H, K)
        gate = F.linear(g_a, self.g_b)[:n].view(n, H, K)
        qkv, beta_raw = qkv[:n], b[:n].contiguous()
        conv_pool, kda_pool = state.conv[self.layer_idx], state.kda[self.layer_idx]
        # the conv reads qkv where the projection wrote it and writes q, k and v as three contiguous
        # blocks ([3, n, D]): no copy of either side
        if batch.is_decode:
            y = kernels.causal_conv1d_decode(qkv, self.conv_weight, conv_pool, batch.slots, groups=3)
        else:
            y = kernels.causal_conv1d_prefill(
                qkv,
                self.conv_weight,
                conv_pool,
                batch.slots,
                batch.cu_seqlens_readable,
                batch.has_initial_state,
                groups=3,
            )
        q, k, v = (t.view(n, H, K) for t in y)
        o = self._recurrence(q, k, v, g_raw, beta_raw, kda_pool, batch, state)
        o = kernels.gated_rmsnorm(o, gate, self.o_norm, self.eps).reshape(n, D)
        if n < T:
            o = F.pad(o, (0, 0, 0, T - n))
        return F.linear(o, self.o_proj)

    def _recurrence(self, q, k, v, g_raw, beta_raw, pool, batch: ForwardBatch, state) -> torch.Tensor:
        """The gated delta rule over this batch: one decode step per sequence, or a prefill."""
        if not batch.is_decode:
            return by_round(
                batch, (q, k, v, g_raw, beta_raw), lambda b, rows: self._prefill(*rows, pool, b, state)
            )
        ops = state.kda_ops  # evalkit.kernels, or a wrapper (the fp32-twin checker, drift)
        return ops.kda_decode(
            q, k, v, g_raw, beta_raw, self.A_log, self.dt_bias, pool, batch.slots,
            **self._store_args(state, batch.state_positions),
        )  # fmt: skip

    def _store_args(self, state, positions) -> dict:
        """How this layer's state is stored: the arm's format, this layer's SR seed, positions."""
        return dict(fmt=state.arm.format, sr_seed=self.layer_idx, positions=positions)

    def _variant(self) -> dict:
        """The prefill kernel the run chose (`KernelChoice`), as keywords of `kernels.kda_prefill`:
        none for the default, so a wrapper of the ops that predates the switches still takes it."""
        c = self.kernels
        out = {}
        if c.kda_prefill != KernelChoice.kda_prefill:
            out["variant"] = c.kda_prefill
        if c.prefill_dots != KernelChoice.prefill_dots:
            out["dot_precision"] = c.dot_precision
        return out

    def _prefill(self, q, k, v, g_raw, beta_raw, pool, batch: ForwardBatch, state) -> torch.Tensor:
        """Packed prefill; with `state.serial_prefill` one kernel call per sequence (the CPU path's
        result for a sequence otherwise depends on how many sequences share the call)."""
        args = dict(chunk_size=state.chunk_size, intra_chunk_dtype=state.intra_chunk_dtype, **self._variant())
        ops = state.kda_ops
        n_seqs = batch.slots.numel()
        positions = batch.state_positions
        cu_seqlens = batch.cu_seqlens_readable
        if not state.serial_prefill or n_seqs == 1:
            return ops.kda_prefill(
                q,
                k,
                v,
                g_raw,
                beta_raw,
                self.A_log,
                self.dt_bias,
                pool,
                batch.slots,
                cu_seqlens,
                batch.has_initial_state,
                **args,
                **self._store_args(state, positions),
            )
        cu = cu_seqlens.tolist()
        outs = []
        for i in range(n_seqs):
            a, b = cu[i], cu[i + 1]
            local = torch.tensor([0, b - a], dtype=cu_seqlens.dtype)  # on the host: no upload sync
            outs.append(
                ops.kda_prefill(
                    q[a:b],
                    k[a:b],
                    v[a:b],
                    g_raw[a:b],
                    beta_raw[a:b],
                    self.A_log,
                    self.dt_bias,
                    pool,
                    batch.slots[i : i + 1],
                    local,
                    batch.has_initial_state[i : i + 1],
                    **args,
                    **self._store_args(state, None if positions is None else positions[i : i + 1]),
                )
            )
        return torch.cat(outs)
