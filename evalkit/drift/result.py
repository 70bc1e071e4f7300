"""Typed results of a drift study: frozen, printable, `to_dict()` for summary.json.

`summary.json` keeps these as plain JSON (its layout is what committed studies hold); reports,
verdicts and `compare` read them through `DriftSummary.from_dict`, by attribute, so a renamed or
missing figure fails where it is read, not as a silent "–" in a table.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from evalkit.drift.across import SlopeSummary
from evalkit.stats._result import Result


def _pick(cls: type, d: dict[str, Any]) -> dict[str, Any]:
    """The keys of `d` that are fields of `cls` (a reader of a newer file ignores what it adds)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in d.items() if k in names}


@dataclass(frozen=True)
class MeanCI(Result):
    """Mean across prompts with its t-CI and exact quantiles (`across.mean_ci`)."""

    n: int
    mean: float | None = None
    sd: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p50: float | None = None
    min: float | None = None
    max: float | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> MeanCI:
        return cls(**_pick(cls, d)) if d else cls(n=0)


@dataclass(frozen=True)
class FloorRatio(Result):
    """An arm's KL over the A/A floor's, per prompt, as a geometric mean with a t-CI (`across.ratio_ci`)."""

    n: int
    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    den_zero: int

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FloorRatio:
        return cls(**_pick(cls, d))


@dataclass(frozen=True)
class LastBucketRatio(FloorRatio):
    """The floor ratio in the last position bucket, with the two means it divides."""

    arm_mean: float | None = None
    floor_mean: float | None = None


@dataclass(frozen=True)
class DriftFloor(Result):
    kl_last_bucket: LastBucketRatio
    kl_overall: FloorRatio

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DriftFloor:
        return cls(LastBucketRatio.from_dict(d["kl_last_bucket"]), FloorRatio.from_dict(d["kl_overall"]))


@dataclass(frozen=True)
class DriftPromptResult(Result):
    """One arm on one prompt in one mode: the scalars its traces give (a row of prompt_results.csv,
    before the growth slopes, which are fitted from the bucket rows whenever a summary is made)."""

    prompt: int
    mode: str
    arm: str
    mean_kl: float | None
    p99_kl: float | None  # exact, over the prompt's positions
    max_kl: float | None
    top1_agreement: float | None
    mean_abs_dnll: float | None
    ln_ppl_ratio: float | None
    state_rel_err_end: float | None  # mean over layers at the last checkpoint
    state_max_abs: float | None
    nonfinite: int
    n_over_fp16: int
    seconds: float

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DriftPromptResult:
        """From a checkpoint's row (older checkpoints also hold slopes: left out here)."""
        return cls(**_pick(cls, d))


CI_FIGURES = ("mean_kl", "p99_kl", "top1_agreement", "mean_abs_dnll", "ln_ppl_ratio", "state_rel_err_end")


@dataclass(frozen=True)
class DriftArmSummary(Result):
    """One arm of one mode, across prompts; `floor` is None for the A/A arm and without a floor."""

    mean_kl: MeanCI
    p99_kl: MeanCI
    top1_agreement: MeanCI
    mean_abs_dnll: MeanCI
    ln_ppl_ratio: MeanCI
    state_rel_err_end: MeanCI
    max_kl: float | None
    state_max_abs: float | None
    nonfinite: int
    n_over_fp16: int
    growth: dict[str, dict[str, SlopeSummary]]  # metric -> fitting range -> exponent across prompts
    floor: DriftFloor | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DriftArmSummary:
        return cls(
            **{k: MeanCI.from_dict(d.get(k)) for k in CI_FIGURES},
            max_kl=d.get("max_kl"),
            state_max_abs=d.get("state_max_abs"),
            nonfinite=d.get("nonfinite", 0),
            n_over_fp16=d.get("n_over_fp16", 0),
            growth={m: {k: SlopeSummary(**g) for k, g in rows.items()} for m, rows in d["growth"].items()},
            floor=DriftFloor.from_dict(d["floor"]) if d.get("floor") else None,
        )

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        if self.floor is None:  # summary.json has no floor key for these arms
            del out["floor"]
        return out


@dataclass(frozen=True)
class DriftModeSummary(Result):
    """One mode (prefill or decode) across the prompts it finished."""

    length: int
    chunk_size: int | None
    n_prompts: int
    stopped_by_budget: bool
    fit_ranges: dict[str, list[float]]  # "main" and the sensitivity starts -> [start, stop]
    seconds_per_prompt: MeanCI
    arms: dict[str, DriftArmSummary]
    last_bucket: list[int] | None  # positions of the last KL fit point (where "at L" is read)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DriftModeSummary:
        return cls(
            length=d["length"],
            chunk_size=d.get("chunk_size"),
            n_prompts=d["n_prompts"],
            stopped_by_budget=d.get("stopped_by_budget", False),
            fit_ranges={k: list(v) for k, v in d.get("fit_ranges", {}).items()},
            seconds_per_prompt=MeanCI.from_dict(d.get("seconds_per_prompt")),
            arms={a: DriftArmSummary.from_dict(x) for a, x in d["arms"].items()},
            last_bucket=d.get("last_bucket"),
        )

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["arms"] = {a: x.to_dict() for a, x in self.arms.items()}
        return out


@dataclass(frozen=True)
class DriftVerdict(Result):
    mode: str
    arm: str
    text: str
    caveats: list[str]


@dataclass(frozen=True)
class DriftSummary(Result):
    """A drift study's summary.json: configuration, every mode, free running, errors, verdicts.
    `config` and `free_running` stay JSON objects (they are quoted, not computed on)."""

    kind: str
    version: int
    config: dict[str, Any]
    study: dict[str, DriftModeSummary]
    free_running: dict[str, Any] | None
    errors: list[dict[str, Any]]
    title: str = ""  # a field with a default: it shadows `Result.title`
    verdicts: list[DriftVerdict] | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DriftSummary:
        v = d.get("verdicts")
        return cls(
            kind=d.get("kind", "drift"),
            version=d.get("version", 2),
            title=d.get("title", ""),
            config=d.get("config") or {},
            study={m: DriftModeSummary.from_dict(x) for m, x in (d.get("study") or {}).items()},
            free_running=d.get("free_running"),
            errors=list(d.get("errors") or []),
            verdicts=None if v is None else [DriftVerdict(**x) for x in v],
        )

    def to_dict(self) -> dict[str, Any]:
        out = {"kind": self.kind, "version": self.version, "title": self.title, "config": self.config}
        out["study"] = {m: x.to_dict() for m, x in self.study.items()}
        out.update(free_running=self.free_running, errors=self.errors)
        if self.verdicts is not None:  # the summary written after every prompt has none yet
            out["verdicts"] = [v.to_dict() for v in self.verdicts]
        return out
