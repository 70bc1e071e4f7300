# ruff: noqa: E501
"""The four in-process Mamba2 hybrids against transformers' own classes on their tiny test
checkpoints (`evalkit.testing.tiny_mamba2_models`), on the CPU: the engine's logits relative to
transformers' (max |diff| / max |ref|) with fp32 weights (the tests' bar is 1e-4) and with bf16
weights (no bar: the engine computes the SSM in fp32 where transformers' torch path rounds to bf16,
mamba2.md §4, so the bf16 gap is read next to transformers' own bf16-vs-fp32 gap).

    python scripts/mamba2_hybrid_parity.py --out results/mamba2-hybrids-parity-cpu   # ~1 min
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.helpers: the tests' own driver and error measure

from evalkit.engine import LLMEngine  # noqa: E402
from evalkit.testing import tiny_mamba2_models as tiny  # noqa: E402
from tests.helpers.drive import drive_logits  # noqa: E402
from tests.helpers.numerics import rel_err  # noqa: E402

CHECKPOINTS = {
    "nemotron_h": lambda p: tiny.build_tiny_nemotron_h_checkpoint(p),
    "granitemoehybrid": lambda p: tiny.build_tiny_granite_hybrid_checkpoint(p),
    "bamba": lambda p: tiny.build_tiny_bamba_checkpoint(p),
    "falcon_h1 (norm, then gate)": lambda p: tiny.build_tiny_falcon_h1_checkpoint(p),
    "falcon_h1 (no norm)": lambda p: tiny.build_tiny_falcon_h1_checkpoint(p, mamba_rms_norm=False),
    "falcon_h1 (gate, then norm)": lambda p: tiny.build_tiny_falcon_h1_checkpoint(
        p, mamba_norm_before_gate=False
    ),
}
SCHEDULES = {
    "prefill 150": ([150], 0),
    "prefill 97 + 53 steps": ([97], 53),
    "5 chunks + 20 steps": ([64, 1, 40, 17, 8], 20),
}


def measure(ckpt: Path) -> dict:
    from transformers import AutoModelForCausalLM

    tokens = torch.randint(3, 512, (1, 150), generator=torch.Generator().manual_seed(7))
    refs = {}
    for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        hf = AutoModelForCausalLM.from_pretrained(ckpt, dtype=dtype).eval()
        with torch.no_grad():
            refs[name] = hf(tokens, use_cache=False).logits[0].float()
    ids = tokens[0].tolist()
    row = {"transformers": type(hf).__name__}
    fp32 = LLMEngine(str(ckpt), device="cpu", state_dtype="fp32", max_num_seqs=2)
    for label, (prefill, steps) in SCHEDULES.items():
        row[f"fp32 weights, {label}"] = rel_err(drive_logits(fp32, ids, prefill, steps), refs["fp32"])
    bf16 = LLMEngine(str(ckpt), device="cpu", state_dtype="fp32", dtype="bf16", max_num_seqs=2)
    got = drive_logits(bf16, ids, [97], 53)
    row["bf16 weights: engine vs transformers bf16"] = rel_err(got, refs["bf16"])
    row["bf16 weights: transformers bf16 vs its fp32"] = rel_err(refs["bf16"], refs["fp32"])
    row["bf16 weights: engine vs transformers fp32"] = rel_err(got, refs["fp32"])
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i, (family, build) in enumerate(CHECKPOINTS.items()):
            rows[family] = measure(build(Path(tmp) / str(i)))
            print(family, json.dumps(rows[family]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "parity.json").write_text(
        json.dumps({"torch": torch.__version__, "rows": rows}, indent=1) + "\n"
    )
    cols = [k for k in next(iter(rows.values())) if k != "transformers"]
    lines = ["| checkpoint | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    lines += [f"| {f} | " + " | ".join(f"{r[c]:.1e}" for c in cols) + " |" for f, r in rows.items()]
    (args.out / "parity.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
