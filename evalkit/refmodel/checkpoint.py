"""Saving the model being trained as a Hugging Face checkpoint (bf16), atomically."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

from evalkit.refmodel.bundle import write_bundle


def save_checkpoint(
    model: Any, fast_tok: Any, out: Path, meta: dict[str, Any], bundle: Path | None = None
) -> Path:
    """bf16 copy of the model + tokenizer into out/model, swapped in atomically."""
    import torch

    tmp, final, old = out / "model.tmp", out / "model", out / "model.old"
    shutil.rmtree(tmp, ignore_errors=True)
    half = copy.deepcopy(model).to(device="cpu", dtype=torch.bfloat16)
    # config.use_cache stays False: with a cache, a plain forward of a pure-KDA model fails in transformers
    half.generation_config.eos_token_id = [2, 4]
    half.generation_config.pad_token_id = 0
    half.generation_config.bos_token_id = 1
    half.save_pretrained(tmp)
    fast_tok.save_pretrained(tmp)
    (tmp / "training_meta.json").write_text(json.dumps(meta, indent=1))
    shutil.rmtree(old, ignore_errors=True)
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    write_bundle(out, bundle)
    return final
