"""Falcon-H1's Mamba2 mixer (mamba2.md §7): NemotronH's mixer with the input scaled by
`ssm_in_multiplier`, in_proj's rows [z | x | B | C | dt] scaled by `ssm_multipliers` (transformers'
`mup_vector`, in the model dtype) and its own gate: y * silu(z) without a norm (`mamba_rms_norm`
false, the default), else the grouped RMSNorm with the weight applied in fp32 and the gate after
the norm (`mamba_norm_before_gate`, the default) or before it."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..nemotron_h.mamba2 import Mamba2Mixer
from .config import FalconH1Arch


def falcon_gated_rms_norm(y, z, weight, groups: int, eps: float, norm_before_gate: bool) -> torch.Tensor:
    """FalconH1RMSNormGated in fp32; cast to y's dtype at the end."""
    g = y.float()
    if not norm_before_gate:
        g = g * F.silu(z.float())
    parts = g.view(*g.shape[:-1], groups, g.shape[-1] // groups)
    parts = parts * torch.rsqrt(parts.pow(2).mean(-1, keepdim=True) + eps)
    g = weight * parts.view(g.shape)
    if norm_before_gate:
        g = g * F.silu(z.float())
    return g.to(y.dtype)


class FalconH1Mixer(Mamba2Mixer):
    def __init__(self, arch: FalconH1Arch, layer_idx: int, dtype: torch.dtype, device: torch.device | str):
        super().__init__(arch, layer_idx, dtype, device)
        self.in_multiplier = arch.ssm_in_multiplier
        self.norm_before_gate = arch.mamba_norm_before_gate
        if not arch.mamba_rms_norm:
            self.norm = None
        I, GN, H = self.I, self.G * self.N, self.H
        z, x, b, c, dt = arch.ssm_multipliers
        rows = [torch.full((n,), m) for n, m in ((I, z), (I, x), (GN, b), (GN, c), (H, dt))]
        self.register_buffer("mup", torch.cat(rows).to(dtype=dtype, device=device), persistent=False)

    def project(self, h: torch.Tensor) -> torch.Tensor:
        return F.linear(h * self.in_multiplier, self.in_proj) * self.mup

    def gate_and_norm(self, y: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        if self.norm is None:
            return (y.float() * F.silu(z.float())).to(y.dtype)
        return falcon_gated_rms_norm(y, z, self.norm, self.G, self.eps, self.norm_before_gate)
