"""Paired statistics for comparing two evaluation runs on the same questions.

Every function returns a small frozen result object (print it for a summary, `.to_dict()` for
JSON). Conventions: b = questions only arm A got right, c = only arm B, n = paired questions,
and differences are p_A - p_B. `evalkit compare` puts the candidate in the A slot.

Names load lazily (PEP 562), so importing `evalkit.stats` does not import scipy/statsmodels
until a test is actually computed: `evalkit compare` refuses bad input in a fraction of a second.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "cluster": ["ClusteredSE", "clustered_se"],
    "paired_clusters": ["ClusteredPairedResult", "clustered_paired"],
    "discordance": ["DiscordanceExcessResult", "discordance_excess"],
    "mcnemar_tests": [
        "McNemarAll",
        "McNemarResult",
        "mcnemar",
        "mcnemar_asymptotic",
        "mcnemar_exact",
        "mcnemar_midp",
    ],
    "multitest": ["MultitestResult", "benjamini_hochberg", "fixed_sequence", "holm"],
    "noninferiority": ["NonInferiorityResult", "TostResult", "noninferiority_test", "tost"],
    "paired_ci": [
        "NewcombeCI",
        "PairedCI",
        "agresti_min_ci",
        "bonett_price_ci",
        "newcombe_ci",
        "tango_ci",
        "tango_score",
        "wald_ci",
    ],
    "paired_continuous": [
        "MeanNonInferiorityResult",
        "PairedMeanResult",
        "SignedRankResult",
        "noninferiority_mean",
        "paired_mean",
        "signed_rank",
    ],
    "power": [
        "MdeResult",
        "connor_mde",
        "connor_power",
        "connor_sample_size",
        "exact_power",
        "noninferiority_power",
        "noninferiority_sample_size",
        "normal_sample_size",
    ],
    "exact_sample_size": [
        "ExactSampleSize",
        "exact_loss_n",
        "exact_noninferiority_n",
        "exact_noninferiority_power",
    ],
    "sequential": [
        "LookDecision",
        "NormalDesign",
        "SignWalkDesign",
        "conditional_sign_walk",
        "noninferiority_look",
        "normal_design",
        "normal_design_power",
        "information_inflation",
        "sign_walk_design",
        "sign_walk_power",
        "spent_alpha",
    ],
    "accuracy": ["ProportionResult", "proportion", "wilson_ci", "z_value"],
    "stderr": ["lmeval_stderr"],
    "trend": [
        "LogisticTrendResult",
        "TrendResult",
        "cochran_armitage",
        "conditional_logistic_trend",
        "linear_by_linear",
        "logistic_trend_clustered",
    ],
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}

__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'evalkit.stats' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"evalkit.stats.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
