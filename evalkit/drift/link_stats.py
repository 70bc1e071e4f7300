"""Did the questions whose correctness flipped diverge more? Two named tests on per-question drift.

Inputs: per question, whether baseline and candidate disagree on correctness (a flip) and the
mean per-token KL(baseline arm ‖ candidate arm) over the replayed answer.
- Mann–Whitney U, one-sided (flipped questions have larger mean KL), with the AUC U / (n1 n0):
  rank-based, so any monotone transform of KL gives the same answer;
- logistic regression of flip on log10(mean KL) (maximum likelihood, statsmodels' Logit): the
  odds ratio per 10× more divergence, its Wald 95% CI and the likelihood-ratio test's p. With
  few flips or perfect separation it is reported as not estimable rather than as a number.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

KL_FLOOR = 1e-30  # log10 of an exactly-0 KL is taken at this value


def flip_analysis(flips: list[bool], mean_kl: list[float]) -> dict:
    f = np.asarray(flips, dtype=bool)
    kl = np.asarray(mean_kl, dtype=np.float64)
    ok = np.isfinite(kl)
    f, kl = f[ok], kl[ok]
    n1, n0 = int(f.sum()), int((~f).sum())
    out: dict = {
        "n_questions": int(f.size),
        "n_flipped": n1,
        "median_kl_flipped": float(np.median(kl[f])) if n1 else None,
        "median_kl_unchanged": float(np.median(kl[~f])) if n0 else None,
        "mann_whitney": None,
        "logistic": None,
    }
    if n1 == 0 or n0 == 0:
        out["text"] = (
            f"no question flipped ({f.size} replayed): nothing to relate divergence to"
            if n1 == 0
            else f"every one of the {f.size} questions flipped: no contrast"
        )
        return out
    u = stats.mannwhitneyu(kl[f], kl[~f], alternative="greater")
    out["mann_whitney"] = {
        "test": "Mann–Whitney U, one-sided (flipped > unchanged)",
        "U": float(u.statistic),
        "p": float(u.pvalue),
        "auc": float(u.statistic) / (n1 * n0),
    }
    out["logistic"] = _logistic(f, np.log10(np.maximum(kl, KL_FLOOR)))
    out["text"] = _text(out)
    return out


def _logistic(flip: np.ndarray, x: np.ndarray) -> dict:
    import statsmodels.api as sm

    res: dict = {"test": "logistic regression of flip on log10(mean KL), likelihood-ratio test"}
    if flip.sum() < 2 or (~flip).sum() < 2 or np.ptp(x) == 0:
        return {**res, "estimable": False, "why": "fewer than 2 questions on one side, or no spread in KL"}
    try:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = sm.Logit(flip.astype(float), sm.add_constant(x)).fit(disp=0, maxiter=200)
        beta, se = float(fit.params[1]), float(fit.bse[1])
        if not (math.isfinite(beta) and math.isfinite(se)) or abs(beta) > 30:
            raise ValueError("separation")
    except Exception as exc:  # noqa: BLE001 - perfect separation, singular Hessian, no convergence
        return {
            **res,
            "estimable": False,
            "why": f"not estimable ({type(exc).__name__}: perfect separation?)",
        }
    return {
        **res,
        "estimable": True,
        "odds_ratio_per_10x": math.exp(beta),
        "ci_low": math.exp(beta - 1.959963984540054 * se),
        "ci_high": math.exp(beta + 1.959963984540054 * se),
        "p_lr": float(fit.llr_pvalue),
        "slope": beta,
    }


def _text(a: dict) -> str:
    mw = a["mann_whitney"]
    t = (
        f"{a['n_flipped']} of {a['n_questions']} questions flipped; their median per-token mean KL was "
        f"{a['median_kl_flipped']:.3g} against {a['median_kl_unchanged']:.3g} for the others "
        f"(Mann–Whitney U one-sided p = {mw['p']:.3g}, AUC {mw['auc']:.2f})"
    )
    lg = a["logistic"]
    if lg and lg.get("estimable"):
        t += (
            "; logistic regression of flip on log10 mean KL: odds ratio "
            f"{lg['odds_ratio_per_10x']:.3g} per 10× more divergence "
            f"(95% CI {lg['ci_low']:.3g} to {lg['ci_high']:.3g}, likelihood-ratio p = {lg['p_lr']:.3g})"
        )
    elif lg:
        t += f"; logistic regression {lg['why']}"
    return t
