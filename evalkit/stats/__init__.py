"""Paired statistics for comparing two evaluation runs on the same questions.

Every function returns a small frozen result object (print it for a summary, `.to_dict()` for
JSON). Conventions: b = questions only arm A got right, c = only arm B, n = paired questions,
and differences are p_A - p_B. `evalkit compare` puts the candidate in the A slot.
"""

from evalkit.stats.cluster import ClusteredSE, clustered_se
from evalkit.stats.mcnemar import (
    McNemarAll,
    McNemarResult,
    mcnemar,
    mcnemar_asymptotic,
    mcnemar_exact,
    mcnemar_midp,
)
from evalkit.stats.multitest import MultitestResult, benjamini_hochberg, holm
from evalkit.stats.noninferiority import NonInferiorityResult, TostResult, noninferiority_test, tost
from evalkit.stats.paired_ci import (
    NewcombeCI,
    PairedCI,
    agresti_min_ci,
    bonett_price_ci,
    newcombe_ci,
    tango_ci,
    tango_score,
    wald_ci,
)
from evalkit.stats.power import MdeResult, connor_mde, connor_power, connor_sample_size, exact_power
from evalkit.stats.proportion import ProportionResult, lmeval_stderr, proportion, wilson_ci, z_value
from evalkit.stats.trend import (
    LogisticTrendResult,
    TrendResult,
    cochran_armitage,
    conditional_logistic_trend,
    linear_by_linear,
    logistic_trend_clustered,
)

__all__ = [
    "ClusteredSE", "LogisticTrendResult", "McNemarAll", "McNemarResult", "MdeResult", "MultitestResult",
    "NewcombeCI", "NonInferiorityResult", "PairedCI", "ProportionResult", "TostResult", "TrendResult",
    "agresti_min_ci", "benjamini_hochberg", "bonett_price_ci", "clustered_se", "cochran_armitage",
    "conditional_logistic_trend", "connor_mde", "connor_power", "connor_sample_size", "exact_power",
    "holm", "linear_by_linear", "logistic_trend_clustered", "lmeval_stderr", "mcnemar",
    "mcnemar_asymptotic", "mcnemar_exact", "mcnemar_midp", "newcombe_ci", "noninferiority_test",
    "proportion", "tango_ci", "tango_score", "tost", "wald_ci", "wilson_ci", "z_value",
]
