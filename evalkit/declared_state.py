"""The recurrent state's dtype a checkpoint declares for serving (e.g. `mamba_ssm_cache_dtype`
in its config.json, which vLLM reads as the default of `--mamba-ssm-cache-dtype`): a run records
it, and says when its arm stores the state in another dtype than the checkpoint asks for."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DECLARED_KEYS = ("mamba_ssm_cache_dtype", "mamba_ssm_dtype", "ssm_state_dtype")
_NAMES = {
    "float32": "fp32",
    "fp32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "bf16": "bf16",
}


def dtype_name(value: Any) -> str | None:
    """ "float32", "torch.bfloat16", "fp16", ... -> "fp32" | "bf16" | "fp16"; None for "auto" or unknown."""
    if not isinstance(value, str):
        return None
    return _NAMES.get(value.strip().lower().removeprefix("torch."))


def declared_state(config: dict[str, Any]) -> dict[str, Any] | None:
    """{"key", "value", "state_dtype"} from a config dict (top level, or a nested `text_config`)."""
    for doc in (config, config.get("text_config")):
        if isinstance(doc, dict):
            for key in DECLARED_KEYS:
                if doc.get(key) is not None:
                    return {"key": key, "value": doc[key], "state_dtype": dtype_name(doc[key])}
    return None


def read_declared_state(checkpoint: str | Path | None) -> dict[str, Any] | None:
    """From `checkpoint`/config.json; None when there is no such file or it declares nothing."""
    if checkpoint is None:
        return None
    path = Path(checkpoint) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return declared_state(config) if isinstance(config, dict) else None


def arm_note(declared: dict[str, Any] | None, arm_dtype: str | None) -> dict[str, Any] | None:
    """The manifest's record: what the checkpoint declares, the arm's dtype, whether they differ."""
    if declared is None:
        return None
    differs = None
    if declared["state_dtype"] and arm_dtype:
        differs = declared["state_dtype"] != arm_dtype
    return {**declared, "arm_state_dtype": arm_dtype, "arm_differs": differs}
