"""The model families the engine runs, chosen by a checkpoint's `model_type`: Kimi-Linear (KDA +
MLA), the Gated DeltaNet family (Qwen3-Next, Qwen3.5, Qwen3.5-MoE) and the Mamba2 hybrids
(NemotronH, Granite-4.0-H, Bamba, Falcon-H1). One place maps a config to its architecture
(`evalkit.model.loader` builds the family's model and loads its weights)."""

from __future__ import annotations

from typing import Any

from .bamba.config import BAMBA_MODEL_TYPES, BambaArch, parse_bamba_config
from .config import SUPPORTED_MODEL_TYPES, KimiArch, UnsupportedModelError, parse_config
from .falcon_h1.config import FALCON_H1_MODEL_TYPES, FalconH1Arch, parse_falcon_h1_config
from .granite_hybrid.config import GRANITE_MODEL_TYPES, GraniteHybridArch, parse_granite_hybrid_config
from .nemotron_h.config import MAMBA2_MODEL_TYPES, SERVER_ONLY, NemotronHArch, parse_nemotron_h_config
from .qwen3_next.config import GDN_MODEL_TYPES, GDNArch, parse_gdn_config

Arch = KimiArch | GDNArch | NemotronHArch | GraniteHybridArch | BambaArch | FalconH1Arch


def parse_any_config(raw: dict[str, Any], source: str = "config.json") -> Arch:
    """The architecture of any supported checkpoint; a one-line refusal otherwise."""
    model_type = raw.get("model_type")
    quant = raw.get("quantization_config") or (raw.get("text_config") or {}).get("quantization_config")
    if quant:
        method = quant.get("quant_method", "?") if isinstance(quant, dict) else quant
        raise UnsupportedModelError(
            f"{source}: quantized checkpoints ({method}) are not supported; use the bf16 release"
        )
    if model_type in GDN_MODEL_TYPES:
        return parse_gdn_config(raw, source)
    if model_type in MAMBA2_MODEL_TYPES:
        return parse_nemotron_h_config(raw, source)
    if model_type in GRANITE_MODEL_TYPES:
        return parse_granite_hybrid_config(raw, source)
    if model_type in BAMBA_MODEL_TYPES:
        return parse_bamba_config(raw, source)
    if model_type in FALCON_H1_MODEL_TYPES:
        return parse_falcon_h1_config(raw, source)
    if model_type in SUPPORTED_MODEL_TYPES:
        return parse_config(raw, source)
    known = ", ".join(
        repr(t)
        for t in (
            *SUPPORTED_MODEL_TYPES,
            *GDN_MODEL_TYPES,
            *MAMBA2_MODEL_TYPES,
            *GRANITE_MODEL_TYPES,
            *BAMBA_MODEL_TYPES,
            *FALCON_H1_MODEL_TYPES,
        )
    )
    server = f" (run {model_type} through its server: --server URL)" if model_type in SERVER_ONLY else ""
    raise UnsupportedModelError(
        f"{source}: model_type {model_type!r} is not supported in-process{server}; evalkit runs "
        f"Kimi-Linear and Qwen Gated DeltaNet checkpoints and the Mamba2 hybrids NemotronH, "
        f"Granite-4.0-H, Bamba and Falcon-H1 (model_type {known})"
    )
