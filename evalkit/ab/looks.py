"""One look of a sequential A/B cell: non-inferiority (Tango/Nam at -margin, with non-binding
futility and a repeated CI, `stats.sequential.noninferiority_look`) and a loss (the McNemar score
z = (c - b)/sqrt(b + c) for "candidate worse", against the same Lan-DeMets bound: asymptotic,
as the looks sit at question counts, not at pre-set discordant counts)."""

from __future__ import annotations

import math
from typing import Any

from evalkit.stats.sequential import CONTINUE, INCONCLUSIVE, NormalDesign, noninferiority_look

LOSS = "loss"
DECIDED = ("noninferior", "futile", LOSS)


def look_fractions(looks: int) -> list[float]:
    return [(k + 1) / looks for k in range(looks)]


def look_sizes(n_max: int, looks: int) -> list[int]:
    """Questions per cell at each look: equal information steps up to the planned n."""
    return [max(1, math.ceil(n_max * f)) for f in look_fractions(looks)]


def judge_look(
    design: NormalDesign, k: int, cand_only: int, base_only: int, n: int, margin: float
) -> dict[str, Any]:
    ni = noninferiority_look(design, k, cand_only, base_only, n, margin)
    m = cand_only + base_only
    z_loss = (base_only - cand_only) / math.sqrt(m) if m else 0.0
    decision = LOSS if z_loss >= design.bounds[k] else ni.decision
    return {
        "look": k + 1,
        "n": n,
        "candidate_only": cand_only,
        "baseline_only": base_only,
        "diff": ni.estimate,
        "ni_z": ni.statistic,
        "loss_z": z_loss,
        "bound": ni.bound,
        "repeated_ci": [ni.rci_low, ni.rci_high],
        "decision": decision,
        "stops": decision in DECIDED or decision == INCONCLUSIVE,
    }


__all__ = ["CONTINUE", "DECIDED", "INCONCLUSIVE", "LOSS", "judge_look", "look_fractions", "look_sizes"]
