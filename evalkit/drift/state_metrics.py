"""How far an arm's stored recurrent state is from the fp32 arm's, per KDA layer.

The state of one sequence in one layer is [H, K, V]; the arm stores it in its pool dtype and
it is widened to fp32 exactly before comparing. Reported per layer:
- rel_fro: ||S_arm - S_fp32||_F / ||S_fp32||_F (float64 accumulation);
- max_abs / max_abs_ref: largest |value| of each state, to read against fp16's 65504;
- n_over_fp16: values with |x| >= 65504 (an fp16 pool stores those as inf);
- n_nonfinite: NaN/inf values in the arm's state.
"""

from __future__ import annotations

import torch

FP16_MAX = 65504.0


def compare_states(ref_states: list[torch.Tensor], arm_states: list[torch.Tensor]) -> list[dict[str, float]]:
    """One dict per KDA layer, in layer order."""
    if len(ref_states) != len(arm_states):
        raise ValueError(f"{len(ref_states)} reference states but {len(arm_states)} arm states")
    rows = []
    for layer, (r, a) in enumerate(zip(ref_states, arm_states)):
        if r.shape != a.shape:
            raise ValueError(f"layer {layer}: state shapes differ {tuple(r.shape)} vs {tuple(a.shape)}")
        r64, a64 = r.double(), a.double()
        finite = torch.isfinite(a64)
        diff = torch.where(finite, a64 - r64, torch.zeros_like(a64))
        ref_norm = torch.linalg.vector_norm(r64).item()
        err = torch.linalg.vector_norm(diff).item()
        n_nonfinite = int((~finite).sum().item())
        rel = err / ref_norm if ref_norm > 0 else (0.0 if err == 0 else float("inf"))
        rows.append(
            {
                "layer": layer,
                "rel_fro": float("inf") if n_nonfinite else rel,
                "max_abs": float(a64.abs().max().item()) if a64.numel() else 0.0,
                "max_abs_ref": float(r64.abs().max().item()) if r64.numel() else 0.0,
                "n_over_fp16": int((a64.abs() >= FP16_MAX).sum().item()),
                "n_nonfinite": n_nonfinite,
            }
        )
    return rows
