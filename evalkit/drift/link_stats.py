"""Did the questions whose correctness flipped diverge more? Compared within strata.

A question can only be lost (right -> wrong) if the baseline had it right and only gained if the
baseline had it wrong, and tasks differ in answer length, KL scale and accuracy. Pooling every
question therefore confounds divergence with the task and with the baseline's correctness: on the
CPU sweep (fp8_e4m3 against fp32) the pooled test said flipped questions diverged *less* (AUC
0.46), because copy_list lost every right answer at moderate KL while kv_recite_long, with long
answers and so large KL, had nothing to lose. So losses and gains are analysed separately, each
within strata of (task, length):
- per stratum: flipped against kept, Mann–Whitney U one-sided (flipped larger) with its AUC;
- across strata: van Elteren's stratified rank-sum test (weights 1/(N_s+1), tie-corrected
  normal approximation; with one stratum it is Mann–Whitney's asymptotic test), the pooled
  within-stratum AUC (sum U_s / sum n1_s n0_s: the chance that a flipped question outranks a kept
  one of its own stratum), and a logistic regression of flip on log10(mean KL) with an intercept
  per stratum (statsmodels' Logit; likelihood-ratio test against the strata-only model): the odds
  ratio per 10x more divergence.
A stratum where every question flipped, or none did, has no contrast: it is listed, not tested.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np
from scipy import stats

KL_FLOOR = 1e-30  # log10 of an exactly-0 KL is taken at this value
Z975 = 1.959963984540054


def _rank_sum_terms(x1: np.ndarray, x0: np.ndarray) -> tuple[float, float, float]:
    """(W - E[W], Var[W], U) of the flipped group's rank sum within one stratum, ties averaged."""
    n1, n0 = x1.size, x0.size
    n = n1 + n0
    ranks = stats.rankdata(np.concatenate([x1, x0]))
    w = float(ranks[:n1].sum())
    _, counts = np.unique(ranks, return_counts=True)
    ties = float(((counts.astype(np.float64) ** 3) - counts).sum())
    var = n1 * n0 / 12.0 * ((n + 1) - ties / (n * (n - 1)))
    return w - n1 * (n + 1) / 2.0, var, w - n1 * (n1 + 1) / 2.0


def van_elteren(groups: Sequence[tuple[np.ndarray, np.ndarray]]) -> dict:
    """One-sided van Elteren test that the first sample of each (x1, x0) stratum ranks higher."""
    t = var = u = pairs = 0.0
    for x1, x0 in groups:
        d, v, us = _rank_sum_terms(x1, x0)
        weight = 1.0 / (x1.size + x0.size + 1)
        t += weight * d
        var += weight * weight * v
        u += us
        pairs += x1.size * x0.size
    z = t / math.sqrt(var) if var > 0 else float("nan")
    return {
        "test": "van Elteren stratified rank-sum, one-sided (flipped > kept)",
        "z": z,
        "p": float(stats.norm.sf(z)) if var > 0 else float("nan"),
        "auc": u / pairs if pairs else float("nan"),
    }


def _logit_llf(y: np.ndarray, x: np.ndarray):
    import warnings

    import statsmodels.api as sm

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sm.Logit(y, x).fit(disp=0, maxiter=200)


def stratified_logistic(flip: np.ndarray, logkl: np.ndarray, stratum: np.ndarray) -> dict:
    """Logit(flip) = a_stratum + b log10 KL; the LR test of b = 0 against the strata-only model."""
    res: dict = {"test": "logistic regression of flip on log10(mean KL), one intercept per stratum"}
    if flip.sum() < 2 or (~flip).sum() < 2 or np.ptp(logkl) == 0:
        return {**res, "estimable": False, "why": "fewer than 2 questions on one side, or no spread in KL"}
    levels = sorted(set(stratum.tolist()))
    dummies = np.stack([(stratum == s).astype(float) for s in levels], axis=1)
    try:
        null = _logit_llf(flip.astype(float), dummies)
        full = _logit_llf(flip.astype(float), np.column_stack([dummies, logkl]))
        beta, se = float(full.params[-1]), float(full.bse[-1])
        if not (math.isfinite(beta) and math.isfinite(se)) or abs(beta) > 30:
            raise ValueError("separation")
    except Exception as exc:  # noqa: BLE001 - perfect separation, singular Hessian, no convergence
        return {
            **res,
            "estimable": False,
            "why": f"not estimable ({type(exc).__name__}: perfect separation?)",
        }
    lr = max(0.0, 2.0 * (float(full.llf) - float(null.llf)))
    return {
        **res,
        "estimable": True,
        "odds_ratio_per_10x": math.exp(beta),
        "ci_low": math.exp(beta - Z975 * se),
        "ci_high": math.exp(beta + Z975 * se),
        "p_lr": float(stats.chi2.sf(lr, 1)),
        "slope": beta,
    }


def flip_analysis(
    flips: Sequence[bool], mean_kl: Sequence[float], strata: Sequence[Hashable] | None = None
) -> dict:
    """Flipped against kept questions, compared within `strata` (one stratum when None)."""
    f = np.asarray(flips, dtype=bool)
    kl = np.asarray(mean_kl, dtype=np.float64)
    keys = list(strata) if strata is not None else ["all"] * f.size
    ok = np.isfinite(kl)
    f, kl = f[ok], kl[ok]
    keys = [k for k, good in zip(keys, ok) if good]
    labels = np.asarray([str(k) for k in keys], dtype=object)
    out: dict = {
        "n_questions": int(f.size),
        "n_flipped": int(f.sum()),
        "median_kl_flipped": float(np.median(kl[f])) if f.any() else None,
        "median_kl_kept": float(np.median(kl[~f])) if (~f).any() else None,
        "strata": [],
        "van_elteren": None,
        "logistic": None,
    }
    groups, used = [], np.zeros(f.size, dtype=bool)
    for key in dict.fromkeys(labels.tolist()):
        m = labels == key
        x1, x0 = kl[m & f], kl[m & ~f]
        row = {
            "stratum": key,
            "n": int(m.sum()),
            "n_flipped": int(x1.size),
            "contrast": bool(x1.size and x0.size),
        }
        if row["contrast"]:
            mw = stats.mannwhitneyu(x1, x0, alternative="greater")
            row.update(
                median_kl_flipped=float(np.median(x1)),
                median_kl_kept=float(np.median(x0)),
                p=float(mw.pvalue),
                auc=float(mw.statistic) / (x1.size * x0.size),
            )
            groups.append((x1, x0))
            used |= m
        out["strata"].append(row)
    out["n_in_contrast"] = int(used.sum())
    if groups:
        out["van_elteren"] = van_elteren(groups)
        out["logistic"] = stratified_logistic(f[used], np.log10(np.maximum(kl[used], KL_FLOOR)), labels[used])
    return out


def link_analysis(rows: Sequence[dict]) -> dict:
    """Losses (baseline right) and gains (baseline wrong), each stratified by (task, length)."""
    out: dict = {"n_questions": len(rows)}
    for side, right in (("losses", True), ("gains", False)):
        part = [r for r in rows if bool(r["baseline_correct"]) is right]
        out[side] = flip_analysis(
            [r["flipped"] for r in part],
            [r["mean_kl"] for r in part],
            [f"{r['task']} @ {r['length']}" for r in part],
        )
    out["text"] = "; ".join(_side_text(side, out[side]) for side in ("losses", "gains"))
    return out


def _side_text(side: str, a: dict) -> str:
    head = {
        "losses": f"{a['n_questions']} questions the baseline had right: {a['n_flipped']} lost",
        "gains": f"{a['n_questions']} questions the baseline had wrong: {a['n_flipped']} gained",
    }[side]
    if a["n_flipped"] == 0:
        return head
    ve = a["van_elteren"]
    if ve is None:
        return head + " (no task and length where some flipped and some did not: no contrast)"
    t = (
        f"{head}; within task and length ({a['n_in_contrast']} questions in strata with both), "
        f"the flipped ones' mean KL ranked above the kept ones' with AUC {ve['auc']:.2f} "
        f"(van Elteren one-sided p = {ve['p']:.3g})"
    )
    lg = a["logistic"]
    if lg and lg.get("estimable"):
        t += (
            f", odds ratio {lg['odds_ratio_per_10x']:.3g} per 10× more divergence "
            f"(95% CI {lg['ci_low']:.3g} to {lg['ci_high']:.3g}, likelihood-ratio p = {lg['p_lr']:.3g})"
        )
    elif lg:
        t += f", logistic regression {lg['why']}"
    return t
