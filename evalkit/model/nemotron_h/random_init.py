"""Random weights for a NemotronH architecture of any size, made directly on the target device
(benchmarks need no checkpoint: give them a release's config.json). Values follow transformers'
init (NemotronHPreTrainedModel._init_weights): normal(0, std) matrices and conv weights, norms at
1, A_log = log(1..H), D = 1, dt_bias = softplus^-1(dt) with dt log-uniform in [0.001, 0.1] (the
config's time_step_min/max defaults), conv bias and the router's correction bias 0."""

from __future__ import annotations

import math

import torch

from .config import NemotronHArch
from .model import NemotronHLM


@torch.no_grad()
def random_nemotron_h_model(
    arch: NemotronHArch, device: str | torch.device, dtype: torch.dtype, seed: int = 0, std: float = 0.02
) -> NemotronHLM:
    dev = torch.device(device)
    gen = torch.Generator(device=dev).manual_seed(seed)
    lm = NemotronHLM(arch, dtype, dev)
    for name, p in lm.named_parameters():
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "norm" or name == "norm" or leaf == "D":
            p.fill_(1.0)
        elif leaf == "dt_bias":
            u = torch.rand(p.shape, device=dev, generator=gen)
            dt = torch.exp(u * (math.log(0.1) - math.log(0.001)) + math.log(0.001)).clamp(min=1e-4)
            p.copy_(dt + torch.log(-torch.expm1(-dt)))
        elif leaf == "A_log":
            p.copy_(torch.arange(1, p.numel() + 1, device=dev, dtype=torch.float32).log())
        elif leaf in ("conv_bias", "score_bias"):
            p.zero_()
        else:
            p.normal_(0.0, std, generator=gen)
    return lm.eval()
