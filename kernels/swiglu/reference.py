"""Float64 reference of the SwiGLU activation."""

from __future__ import annotations

import torch

F64 = torch.float64


def swiglu(gu: torch.Tensor) -> torch.Tensor:
    """g / (1 + exp(-g)) * u for gu = [g | u] along the last dim, float64 throughout."""
    g, u = gu.to(F64).chunk(2, dim=-1)
    return g / (1 + torch.exp(-g)) * u
