"""Whether warm answers depart from cold ones beyond the floor (two answers that should agree: two
cold ones, or without a flush two warm ones), per question, paired.

Two one-sided exact sign tests on the questions where warm and the floor disagree: the greedy
text (warm differs from cold while the replicate does not, against the reverse) and the
log-probabilities (warm's largest |Δ log p| from cold above the replicate's, against below); Holm
over the two. A server whose cached states are stored in another dtype moves the log-probabilities
of nearly every question while a deterministic server's floor is 0."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from scipy import stats

from evalkit.cache_probe.probe import COLD_FLOOR, QuestionProbe
from evalkit.stats._result import Result
from evalkit.stats.multitest import holm


@dataclass(frozen=True)
class CacheProbeResult(Result):
    n: int
    cold_method: str
    floor: str  # "cold-cold" (flushed twice) or "warm-warm" (no flush: the same prefixed prompt twice)
    warm_text_departures: int  # questions whose warm text differs from cold
    floor_text_departures: int  # questions whose replicate text differs from cold
    text_warm_only: int
    text_floor_only: int
    text_p: float
    logprob_questions: int  # questions with log-probabilities in all three answers
    logprob_warm_above: int  # warm's max |Δ log p| above the floor's
    logprob_warm_below: int
    logprob_p: float
    p_holm: tuple[float, float]
    alpha: float
    depends: bool
    verdict: str
    title: ClassVar[str] = "Prefix-cache probe (warm vs cold, paired, against the cold-cold floor)"


def sign_test(above: int, below: int) -> float:
    """One-sided exact sign test: P(X >= above) with X ~ Bin(above + below, 1/2); 1 with no pairs."""
    m = above + below
    return float(stats.binomtest(above, m, 0.5, alternative="greater").pvalue) if m else 1.0


def judge(probes: list[QuestionProbe], cold_method: str, alpha: float = 0.05) -> CacheProbeResult:
    warm = [p.warm_vs_cold for p in probes]
    floor = [p.floor for p in probes]
    warm_only = sum(1 for w, f in zip(warm, floor) if not w.same_text and f.same_text)
    floor_only = sum(1 for w, f in zip(warm, floor) if w.same_text and not f.same_text)
    pairs = [
        (w.max_abs_dlogprob, f.max_abs_dlogprob)
        for w, f in zip(warm, floor)
        if w.max_abs_dlogprob is not None and f.max_abs_dlogprob is not None
    ]
    above = sum(1 for w, f in pairs if w > f)
    below = sum(1 for w, f in pairs if w < f)
    text_p, logprob_p = sign_test(warm_only, floor_only), sign_test(above, below)
    adjusted = holm([text_p, logprob_p], alpha).adjusted
    depends = min(adjusted) <= alpha
    if depends:
        verdict = (
            f"answers depend on the prefix cache: warm departs from cold beyond the floor (text: "
            f"{warm_only} vs {floor_only} questions, log-probs: {above} vs {below}; Holm p "
            f"{adjusted[0]:.3g}, {adjusted[1]:.3g})"
        )
    else:
        verdict = (
            f"no dependence on the prefix cache shown in {len(probes)} questions (text: {warm_only} vs "
            f"{floor_only}, log-probs: {above} vs {below}; Holm p {adjusted[0]:.3g}, {adjusted[1]:.3g})"
        )
    return CacheProbeResult(
        n=len(probes),
        cold_method=cold_method,
        floor=probes[0].floor_kind if probes else COLD_FLOOR,
        warm_text_departures=sum(1 for w in warm if not w.same_text),
        floor_text_departures=sum(1 for f in floor if not f.same_text),
        text_warm_only=warm_only,
        text_floor_only=floor_only,
        text_p=text_p,
        logprob_questions=len(pairs),
        logprob_warm_above=above,
        logprob_warm_below=below,
        logprob_p=logprob_p,
        p_holm=(float(adjusted[0]), float(adjusted[1])),
        alpha=alpha,
        depends=bool(depends),
        verdict=verdict,
    )
