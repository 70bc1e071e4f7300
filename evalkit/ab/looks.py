"""One look of a sequential A/B cell: non-inferiority (Tango/Nam at -margin, with non-binding
futility and a repeated CI, `stats.sequential.noninferiority_look`) and a loss (the McNemar score
z = (c - b)/sqrt(b + c) for "candidate worse", against the same Lan-DeMets bound: asymptotic,
as the looks sit at question counts, not at pre-set discordant counts).

When the plan gates on the paired log-prob (nats/token), its mean is judged with the same bound:
a normal-theory repeated CI mean ± bound·SE (information ∝ n), non-inferior when the lower end
clears −margin, futile when the upper end is below it. The cell's decision follows the plan's
gate: exact match, log-prob, or both (non-inferior only when both are; futile when either is)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from evalkit.stats.sequential import CONTINUE, INCONCLUSIVE, NormalDesign, noninferiority_look

LOSS = "loss"
DECIDED = ("noninferior", "futile", LOSS)


def look_fractions(looks: int) -> list[float]:
    return [(k + 1) / looks for k in range(looks)]


def look_sizes(n_max: int, looks: int) -> list[int]:
    """Questions per cell at each look: equal information steps up to the planned n."""
    return [max(1, math.ceil(n_max * f)) for f in look_fractions(looks)]


def logprob_look(bound: float, diffs: Sequence[float], margin: float) -> dict[str, Any]:
    """The paired log-prob mean's repeated CI at a look, and its NI decision."""
    d = np.asarray(diffs, dtype=float)
    mean = float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else math.inf
    low, high = mean - bound * se, mean + bound * se
    if not np.any(d) or low > -margin:
        decision = "noninferior"
    elif high < -margin:
        decision = "futile"
    else:
        decision = CONTINUE
    return {
        "n": int(d.size),
        "mean": mean,
        "repeated_ci": [low, high],
        "margin": margin,
        "decision": decision,
    }


def _combine(gate: str, em: str, lp: str | None) -> str:
    if gate == "exact_match" or lp is None:
        return em
    if gate == "logprob":
        return lp
    if "futile" in (em, lp):
        return "futile"
    return "noninferior" if em == lp == "noninferior" else CONTINUE


def judge_look(
    design: NormalDesign,
    k: int,
    cand_only: int,
    base_only: int,
    n: int,
    margin: float,
    *,
    gate: str = "exact_match",
    logprob_diffs: Sequence[float] | None = None,
    logprob_margin: float = 0.01,
) -> dict[str, Any]:
    ni = noninferiority_look(design, k, cand_only, base_only, n, margin)
    m = cand_only + base_only
    z_loss = (base_only - cand_only) / math.sqrt(m) if m else 0.0
    lp = None
    if gate != "exact_match" and logprob_diffs is not None and len(logprob_diffs):
        lp = logprob_look(design.bounds[k], logprob_diffs, logprob_margin)
    em_decision = CONTINUE if ni.decision == INCONCLUSIVE else ni.decision
    decision = _combine(gate, em_decision, None if lp is None else lp["decision"])
    if gate != "exact_match" and lp is None:
        decision = CONTINUE  # the gated measure is missing: nothing can be concluded on it
    if z_loss >= design.bounds[k]:
        decision = LOSS
    elif decision == CONTINUE and k == len(design.bounds) - 1:
        decision = INCONCLUSIVE
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
        "exact_match_decision": ni.decision,
        "logprob": lp,
        "decision": decision,
        "stops": decision in DECIDED or decision == INCONCLUSIVE,
    }


__all__ = ["CONTINUE", "DECIDED", "INCONCLUSIVE", "LOSS", "judge_look", "look_fractions", "look_sizes"]
