"""silu(g) * u on the CPU: the plain torch form (two ops, each rounded to the input dtype), as
transformers' MLPs compute it."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def swiglu(gu: torch.Tensor) -> torch.Tensor:
    g, u = gu.chunk(2, dim=-1)
    return F.silu(g) * u
