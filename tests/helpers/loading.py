"""What a family's loader leaves unused in a checkpoint (a tensor the model never reads is a weight
path the parity tests cannot see)."""

from __future__ import annotations

import torch


def unused_tensors(path) -> list[str]:
    from evalkit.model.checkpoint import TensorSource, read_config
    from evalkit.model.loader import build_and_load

    _, arch = read_config(path)
    source = TensorSource(path)
    try:
        return build_and_load(arch, source, torch.float32, torch.device("cpu"))[1]
    finally:
        source.close()
