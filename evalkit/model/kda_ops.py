"""`KdaOps`: the two recurrent-layer kernels a KDA/GDN layer calls, as the engine hands them over.

The default is `evalkit.kernels` itself; the engine swaps in a wrapper when it must watch or
change the launches (the fp32-twin checker, drift's per-token rounding). The model reads it from
`StatePools.kda_ops` and never imports who provides it."""

from __future__ import annotations

from typing import Any, Protocol

import torch


class KdaOps(Protocol):
    def kda_decode(self, *args: Any, **kwargs: Any) -> torch.Tensor: ...

    def kda_prefill(self, *args: Any, **kwargs: Any) -> torch.Tensor: ...
