"""The Mamba2 mixer (mamba2.md §2-§3) on evalkit's kernels: in_proj rows [z | xBC | dt], the short
causal conv with its bias and SiLU (`causal_conv1d_*`, conv pool [S, I+2GN, K-1]), the SSD
recurrence with per-head scalar decay and the D skip (`ssd_prefill` / `ssd_decode`, state pool
[S, H, P, N] in the arm's format), the grouped gated RMSNorm (gate before norm), out_proj.

The state math is fp32 throughout (dt's softplus included, as mamba_ssm's kernels do); in a bf16
model transformers' torch path rounds dt, the decode increment and the decode readout to bf16
(mamba2.md §4), so bf16 models match it to bf16 error, fp32 models to fp32 error.

The SSD launches go through `state.kda_ops` (evalkit.kernels, or the engine's fp32-twin checker,
which wraps the SSD ops too); the layer's index seeds stochastic rounding, as in the KDA layers."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from evalkit import kernels
from evalkit.errors import EvalkitError
from evalkit.kernel_choice import KernelChoice

from ..batch import ForwardBatch
from ..store_rounds import by_round
from .config import NemotronHArch


def gated_group_rms_norm(y: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, groups: int, eps: float):
    """transformers' MambaRMSNormGated (norm_before_gate=False): g = y * silu(z) in fp32,
    RMS-normalised over each of `groups` contiguous channel groups, cast to y's dtype, times weight."""
    g = y.float() * F.silu(z.float())
    parts = g.view(*g.shape[:-1], groups, g.shape[-1] // groups)
    parts = parts * torch.rsqrt(parts.pow(2).mean(-1, keepdim=True) + eps)
    return weight * parts.view(g.shape).to(y.dtype)


class Mamba2Mixer(nn.Module):
    kernels: KernelChoice = KernelChoice()  # set by DecoderLM.use_kernels

    def __init__(self, arch: NemotronHArch, layer_idx: int, dtype: torch.dtype, device: torch.device | str):
        super().__init__()
        self.layer_idx = layer_idx
        self.H, self.P, self.N, self.G = (
            arch.mamba_num_heads,
            arch.mamba_head_dim,
            arch.ssm_state_size,
            arch.n_groups,
        )
        self.I = arch.mamba_inner
        self.C = arch.conv_dim
        self.eps = arch.layer_norm_epsilon
        self.split = [self.I, self.C, self.H]  # z | xBC | dt

        def p(*shape, dt=dtype):
            return nn.Parameter(torch.empty(*shape, dtype=dt, device=device), requires_grad=False)

        self.in_proj = p(sum(self.split), arch.hidden_size)
        self.conv_weight = p(self.C, arch.conv_kernel)
        self.conv_bias = p(self.C) if arch.use_conv_bias else None
        # kept in the model dtype, like transformers' parameters; the kernels compute in fp32
        self.A_log = p(self.H)
        self.dt_bias = p(self.H)
        self.D = p(self.H)
        self.norm = p(self.I)
        self.out_proj = p(arch.hidden_size, self.I)

    def forward(self, h: torch.Tensor, batch: ForwardBatch, state) -> torch.Tensor:
        T = h.shape[0]
        n = T if batch.is_decode else batch.num_tokens
        z, xbc, dt = self.project(h)[:n].split(self.split, dim=-1)
        conv_pool, pool = state.conv[self.layer_idx], state.kda[self.layer_idx]
        xbc = xbc.contiguous()
        bias = {} if self.conv_bias is None else {"bias": self.conv_bias}
        if batch.is_decode:
            xbc = kernels.causal_conv1d_decode(xbc, self.conv_weight, conv_pool, batch.slots, **bias)
        else:
            xbc = kernels.causal_conv1d_prefill(
                xbc,
                self.conv_weight,
                conv_pool,
                batch.slots,
                batch.cu_seqlens_readable,
                batch.has_initial_state,
                **bias,
            )
        x, B, C = xbc.split([self.I, self.G * self.N, self.G * self.N], dim=-1)
        x = x.reshape(n, self.H, self.P)
        B, C = (t.reshape(n, self.G, self.N) for t in (B, C))
        rows = (x, dt.contiguous(), B, C)
        params = (self.A_log, self.dt_bias, self.D, pool)
        if batch.is_decode:
            store = self._store_args(state, batch.state_positions)
            y = self._ops(state, "ssd_decode")(*rows, *params, batch.slots, **store)
        else:
            y = by_round(batch, rows, lambda b, r: self._prefill(r, params, b, state))
        g = self.gate_and_norm(y.reshape(n, self.I), z)
        if n < T:
            g = F.pad(g, (0, 0, 0, T - n))
        return F.linear(g.to(h.dtype), self.out_proj)

    def _prefill(self, rows, params, batch: ForwardBatch, state) -> torch.Tensor:
        """One SSD prefill call over a prefill batch (the forward's, or one of its store rounds)."""
        return self._ops(state, "ssd_prefill")(
            *rows,
            *params,
            batch.slots,
            batch.cu_seqlens_readable,
            batch.has_initial_state,
            chunk_size=state.chunk_size,
            intra_chunk_dtype=state.intra_chunk_dtype,
            **self._variant(),
            **self._store_args(state, batch.state_positions),
        )

    def project(self, h: torch.Tensor) -> torch.Tensor:
        """in_proj's rows [z | xBC | dt] (Falcon-H1 scales its input and rows: `falcon_h1.mixer`)."""
        return F.linear(h, self.in_proj)

    def gate_and_norm(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """The gated grouped RMSNorm, gate before norm (Falcon-H1 has its own order)."""
        return gated_group_rms_norm(y, z, self.norm, self.G, self.eps)

    def _variant(self) -> dict:
        """The SSD prefill kernel the run chose (`KernelChoice`), as `kernels.ssd_prefill`'s keyword:
        none for the default, so a wrapper of the ops that predates the switch still takes it."""
        if self.kernels.ssd_prefill == KernelChoice.ssd_prefill:
            return {}
        return {"variant": self.kernels.ssd_prefill}

    def _ops(self, state, name: str):
        """The SSD op from the engine's kernel provider (a wrapper that only knows KDA is refused)."""
        fn = getattr(state.kda_ops, name, None)
        if fn is None:
            raise EvalkitError(
                f"{type(state.kda_ops).__name__} has no {name}: Mamba2 layers run with the engine's "
                "kernels or its fp32-twin check only"
            )
        return fn

    def _store_args(self, state, positions) -> dict:
        """The arm's format, this layer's SR seed and the store positions (as the KDA layers)."""
        fmt = getattr(state, "state_format", None)
        if fmt is None:
            return {}
        return dict(fmt=fmt, sr_seed=self.layer_idx, positions=positions)
