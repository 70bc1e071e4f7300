"""`load_model`: a checkpoint directory or hub id -> a ready model (`KimiLinearLM`, `Qwen3NextLM` for
the Gated DeltaNet family, `NemotronHLM` / `GraniteHybridLM` / `BambaLM` / `FalconH1LM` for the
Mamba2 hybrids, by `model_type`) plus its tokenizer."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .bamba import BambaLM
from .bamba.config import BambaArch
from .bamba.weights import load_bamba_weights
from .checkpoint import TensorSource, load_tokenizer, read_config, resolve_model_path
from .falcon_h1 import FalconH1LM
from .falcon_h1.config import FalconH1Arch
from .falcon_h1.weights import load_falcon_h1_weights
from .families import Arch
from .granite_hybrid import GraniteHybridLM
from .granite_hybrid.config import GraniteHybridArch
from .granite_hybrid.weights import load_granite_hybrid_weights
from .kimi import KimiLinearLM
from .nemotron_h import NemotronHLM
from .nemotron_h.config import NemotronHArch
from .nemotron_h.weights import load_nemotron_h_weights
from .qwen3_next import Qwen3NextLM
from .qwen3_next.config import GDNArch
from .qwen3_next.weights import load_gdn_weights
from .weights import load_weights


@dataclass
class LoadedModel:
    model: KimiLinearLM | Qwen3NextLM | NemotronHLM | GraniteHybridLM | BambaLM | FalconH1LM
    arch: Arch
    tokenizer: Any  # a transformers tokenizer, or None when loaded with tokenizer=False
    path: Path
    raw_config: dict[str, Any]


def build_and_load(arch: Arch, source: TensorSource, dtype: torch.dtype, device: torch.device):
    """The model of `arch`'s family with its weights from `source`; returns (model, unused tensor names)."""
    if isinstance(arch, FalconH1Arch):
        lm = FalconH1LM(arch, dtype, device)
        return lm, load_falcon_h1_weights(lm, source)
    if isinstance(arch, BambaArch):
        lm = BambaLM(arch, dtype, device)
        return lm, load_bamba_weights(lm, source)
    if isinstance(arch, GraniteHybridArch):
        lm = GraniteHybridLM(arch, dtype, device)
        return lm, load_granite_hybrid_weights(lm, source)
    if isinstance(arch, NemotronHArch):
        lm = NemotronHLM(arch, dtype, device)
        return lm, load_nemotron_h_weights(lm, source)
    if isinstance(arch, GDNArch):
        lm = Qwen3NextLM(arch, dtype, device)
        return lm, load_gdn_weights(lm, source)
    lm = KimiLinearLM(arch, dtype, device)
    return lm, load_weights(lm, source)


def default_dtype(device: torch.device) -> torch.dtype:
    """bf16 weights on GPU, fp32 on CPU."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def load_model(
    model: str | os.PathLike,
    device: str | torch.device = "cpu",
    dtype: torch.dtype | None = None,
    tokenizer: bool = True,
    trust_remote_code: bool = False,
) -> LoadedModel:
    path = resolve_model_path(model)
    raw, arch = read_config(path)
    dev = torch.device(device)
    dt = dtype or default_dtype(dev)
    source = TensorSource(path)
    try:
        lm, unused = build_and_load(arch, source, dt, dev)
    finally:
        source.close()
    unused = [n for n in unused if "rotary_emb" not in n]
    if unused:
        warnings.warn(f"{len(unused)} checkpoint tensors were not used, e.g. {unused[:3]}", stacklevel=2)
    lm.eval()
    tok = load_tokenizer(path, trust_remote_code) if tokenizer else None
    return LoadedModel(lm, arch, tok, path, raw)
