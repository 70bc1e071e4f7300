"""One look of a sequential A/B cell: non-inferiority (Tango/Nam at -margin, with non-binding
futility and a repeated CI, `stats.sequential.noninferiority_look`) and a loss, decided exactly:
given the discordant counts seen at this and the earlier looks, the baseline-only count is a fair
sign walk under "no loss", and `stats.sequential.conditional_sign_walk` gives each look's
critical count from the same spending function at the looks' information fractions (exact
type I error <= alpha, conditionally on the counts and so overall). The share of discordant
pairs that favour the baseline gets an exact (Clopper-Pearson) repeated CI at each look's
nominal level, the one-sided tail beyond the look's z bound on either side.

When the plan gates on the paired log-prob (nats/token), its mean is judged with the same bound:
a normal-theory repeated CI mean ± bound·SE (information ∝ n), non-inferior when the lower end
clears −margin, futile when the upper end is below it. The cell's decision follows the plan's
gate: exact match, log-prob, or both (non-inferior only when both are; futile when either is).

A cell whose baseline is at the floor or the ceiling (the plan's limits) has no room: agreement
there is no evidence of non-inferiority, so it never stops as non-inferior; it runs on (a loss
can still be found) and ends labelled "cannot lose" or "ceiling: not evidence"."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy import stats

from evalkit.stats.sequential import (
    CONTINUE,
    INCONCLUSIVE,
    NormalDesign,
    conditional_sign_walk,
    noninferiority_look,
)

LOSS = "loss"
DECIDED = ("noninferior", "futile", LOSS)
NO_ROOM = {"cannot_lose": "cannot_lose", "cannot_gain": "ceiling_not_evidence"}  # boundary -> last word


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


def loss_share_ci(base_only: int, m: int, bound: float) -> list[float]:
    """Exact repeated CI for the share of discordant pairs favouring the baseline (1/2: no loss):
    Clopper-Pearson with each tail at the look's nominal level 1 - Phi(bound)."""
    tail = float(stats.norm.sf(bound))
    low = float(stats.beta.ppf(tail, base_only, m - base_only + 1)) if base_only > 0 else 0.0
    high = float(stats.beta.ppf(1.0 - tail, base_only + 1, m - base_only)) if base_only < m else 1.0
    return [low, high]


def exact_loss(
    design: NormalDesign, k: int, base_only: int, discordant: Sequence[int]
) -> tuple[bool, int, float]:
    """(loss at look k, the critical baseline-only count, exact alpha spent through look k);
    discordant: the discordant counts at looks 1..k+1."""
    walk = conditional_sign_walk(discordant, design.fractions[: k + 1], design.alpha, design.spending)
    return walk.rejects(k, base_only), walk.critical[k], walk.spent[k]


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
    earlier_discordant: Sequence[int] = (),
    boundary: str | None = None,
) -> dict[str, Any]:
    """earlier_discordant: the cell's discordant counts at looks 1..k (the exact loss bound is
    conditional on them); empty at the first look. boundary: "cannot_lose" (baseline at the
    floor) or "cannot_gain" (at the ceiling), None with room."""
    if len(earlier_discordant) != k:
        raise ValueError(f"look {k + 1} needs the discordant counts of the {k} looks before it")
    ni = noninferiority_look(design, k, cand_only, base_only, n, margin)
    m = cand_only + base_only
    loss, critical, spent = exact_loss(design, k, base_only, [*earlier_discordant, m])
    lp = None
    if gate != "exact_match" and logprob_diffs is not None and len(logprob_diffs):
        lp = logprob_look(design.bounds[k], logprob_diffs, logprob_margin)
    em_decision = CONTINUE if ni.decision == INCONCLUSIVE else ni.decision
    decision = _combine(gate, em_decision, None if lp is None else lp["decision"])
    if gate != "exact_match" and lp is None:
        decision = CONTINUE  # the gated measure is missing: nothing can be concluded on it
    last = k == len(design.bounds) - 1
    if boundary is not None and decision == "noninferior":
        decision = CONTINUE  # no room: agreement here is no evidence of non-inferiority
    if loss:
        decision = LOSS
    elif decision == CONTINUE and last:
        decision = INCONCLUSIVE if boundary is None else NO_ROOM[boundary]
    return {
        "look": k + 1,
        "n": n,
        "candidate_only": cand_only,
        "baseline_only": base_only,
        "diff": ni.estimate,
        "ni_z": ni.statistic,
        "loss_critical": critical,  # loss when baseline_only >= this (exact, given the counts)
        "loss_alpha_spent": spent,
        "loss_share_repeated_ci": loss_share_ci(base_only, m, design.bounds[k]),
        "bound": ni.bound,
        "repeated_ci": [ni.rci_low, ni.rci_high],
        "exact_match_decision": ni.decision,
        "logprob": lp,
        "boundary": boundary,
        "decision": decision,
        "stops": decision in DECIDED or decision == INCONCLUSIVE or decision in NO_ROOM.values(),
    }


__all__ = [
    "CONTINUE",
    "DECIDED",
    "INCONCLUSIVE",
    "LOSS",
    "exact_loss",
    "judge_look",
    "look_fractions",
    "look_sizes",
    "loss_share_ci",
]
