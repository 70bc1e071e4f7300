"""The overflow positive control: a copy of the embedded reference model whose KDA value
projections are multiplied by 2**16 (exact in bf16), so its recurrent state grows past fp16's
65504 while fp32 keeps ~110 bits of exponent headroom. Usage: python scaled_control.py OUT_DIR"""

import shutil
import sys
from pathlib import Path

from safetensors.torch import load_file, save_file

import evalkit

SCALE = 2.0**16
src = Path(evalkit.__file__).parent / "assets" / "reference-model"
out = Path(sys.argv[1])
shutil.copytree(src, out, dirs_exist_ok=True)
weights = load_file(src / "model.safetensors")
scaled = [k for k in weights if k.endswith("self_attn.v_proj.weight")]
for k in scaled:
    weights[k] = weights[k] * SCALE
save_file(weights, out / "model.safetensors", metadata={"format": "pt"})
print(f"{out}: {len(scaled)} v_proj weights x {SCALE:g}")
