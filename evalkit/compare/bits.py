"""Bits of margin: the fewest mantissa bits of the state that are still non-inferior to fp32.

The one home of the ladder walk (`evalkit sweep` calls it through `evalkit.sweep.margin`): each
arm with N explicit mantissa bits is compared with the fp32 arm on the same questions
(`build_report(fp32_run, arm_run)["rows"]`, one task x metric, or a sweep's rows pooled per
length). Per length, the bits of margin is the smallest N such that the arm with N bits **and
every wider arm tested** is non-inferior at δ (Tango/Nam score test, one-sided 0.025): a wider arm
that fails breaks the chain, so a lucky narrow arm never counts. Arms are keyed by their bits, or
by (bits, label) where two arms share a width (fp16 and m10). Where the baseline gets every
question of a length wrong (rows carrying `baseline_right` or `acc_baseline`), no arm can lose
one: that length has no room and no bits. fp16 stores 10 mantissa bits and bf16 7; the headroom
columns say how many bits each has to spare.

The bits are a point read off one walk, so each length also gets the range of rungs consistent
with the data: from the walk's bits down to the narrowest rung above the first rung *shown
inferior* (its one-sided 97.5% upper bound below −δ; per rung, not simultaneous). When no rung
is shown inferior, the range is open below the narrowest rung tested.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from evalkit import stats as st
from evalkit.arm import REFERENCE_BITS
from evalkit.stats._result import Result

FP16_BITS, BF16_BITS = REFERENCE_BITS["fp16"], REFERENCE_BITS["bf16"]
Rung = int | tuple[int, str]  # mantissa bits, or (bits, arm label) when two arms share a width


@dataclass(frozen=True)
class BitsOfMargin(Result):
    length: int | None
    bits: int | None  # None: even the widest arm tested is not shown non-inferior
    margin: float
    tested: tuple[int, ...]  # mantissa bits, widest first
    noninferior: tuple[bool, ...]
    pvalues: tuple[float, ...]
    headroom_vs_fp16: int | None  # 10 - bits: bits fp16 has to spare
    headroom_vs_bf16: int | None  # 7 - bits
    note: str = ""
    arms: tuple[str, ...] = ()  # the tested arms' labels, in `tested` order
    arm: str | None = None  # the label of the arm with the fewest bits
    no_room: bool = False  # the baseline got every question wrong: nothing can be shown
    # fewest bits the data leave possible (None: even the widest rung is shown inferior), and
    # whether the range is open below the narrowest rung tested; the most is `bits`
    fewest_consistent: int | None = None
    open_below: bool = False
    title: ClassVar[str] = "Bits of margin: fewest mantissa bits still non-inferior to fp32"


def _by_length(rows: Iterable[Mapping[str, Any]], label: str) -> dict[int | None, Mapping[str, Any]]:
    out: dict[int | None, Mapping[str, Any]] = {}
    for row in rows:
        length = row.get("length")
        if length in out:
            raise ValueError(f"arm {label}: two rows at length {length}; pass one task x metric at a time")
        out[length] = row
    return out


def _exact_match_test(row: Mapping[str, Any], margin: float, alpha: float) -> tuple[bool, float]:
    # the arm is the A slot: b = arm-only right, c = fp32-only right
    res = st.noninferiority_test(row["candidate_only"], row["baseline_only"], row["n"], margin, alpha)
    return res.noninferior, res.pvalue


def _logprob_test(row: Mapping[str, Any], margin: float, alpha: float) -> tuple[bool, float]:
    # a cell of report["logprob"]["cells"]: its test ran at the report's --logprob-margin
    if row.get("margin") != margin:
        raise ValueError(f"logprob cell was tested at margin {row.get('margin')}, not {margin}")
    return row["noninferiority_p"] < alpha, row["noninferiority_p"]


_TESTS = {"exact_match": _exact_match_test, "logprob": _logprob_test}


def _exact_match_inferior(row: Mapping[str, Any], margin: float, alpha: float) -> bool:
    ci = st.tango_ci(row["candidate_only"], row["baseline_only"], row["n"], 1.0 - 2.0 * alpha)
    return ci.ci_high < -margin


def _logprob_inferior(row: Mapping[str, Any], margin: float, alpha: float) -> bool:
    high = row.get("mean_ci_high")  # the cell's 95% t-interval: one-sided 97.5%
    return high is not None and high < -margin


_SHOWN_INFERIOR = {"exact_match": _exact_match_inferior, "logprob": _logprob_inferior}


def _consistent_range(tested: list[tuple[int, str]], inferior: list[bool]) -> tuple[int | None, bool]:
    """(fewest bits still consistent with the data, open below the narrowest rung tested)."""
    first_bad = next((i for i, bad in enumerate(inferior) if bad), None)
    if first_bad is None:
        return tested[-1][0], True
    return (tested[first_bad - 1][0] if first_bad > 0 else None), False


def _baseline_right(row: Mapping[str, Any]) -> float | None:
    if "baseline_right" in row:
        return row["baseline_right"]
    if row.get("acc_baseline") is not None and "n" in row:
        return row["acc_baseline"] * row["n"]
    return None


def bits_of_margin(
    rows_by_bits: Mapping[Rung, Iterable[Mapping[str, Any]]],
    margin: float = 0.01,
    alpha: float = 0.025,
    measure: str = "exact_match",
) -> dict[int | None, BitsOfMargin]:
    """{length: BitsOfMargin} from {mantissa bits, or (bits, label): rows of that arm vs fp32}.

    measure "exact_match": each row needs `length`, `n`, `baseline_only` (fp32-only right) and
    `candidate_only` (arm-only right), as `evalkit compare` writes them (`report["rows"]`, one
    task x metric); `margin` is a fraction (0.01 = 1 pp). measure "logprob": each row is a cell of
    `report["logprob"]["cells"]` (one task), `margin` the `--logprob-margin` it was computed with
    (nats per answer token).
    """
    if measure not in _TESTS:
        raise ValueError(f"measure must be one of {', '.join(_TESTS)}, got {measure!r}")
    test = _TESTS[measure]
    if not rows_by_bits:
        raise ValueError("no arms given")
    rungs = {
        (k, f"m{k}") if isinstance(k, int) else (int(k[0]), str(k[1])): rows
        for k, rows in rows_by_bits.items()
    }
    tables = {rung: _by_length(rows, rung[1]) for rung, rows in rungs.items()}
    lengths = sorted(
        {length for table in tables.values() for length in table}, key=lambda x: (x is not None, x)
    )
    out = {}
    for length in lengths:
        tested = sorted((r for r, table in tables.items() if length in table), key=lambda r: (-r[0], r[1]))
        rows = [tables[r][length] for r in tested]
        results = [test(row, margin, alpha) for row in rows]
        fewest, open_below = _consistent_range(
            tested, [_SHOWN_INFERIOR[measure](row, margin, alpha) for row in rows]
        )
        no_room = measure == "exact_match" and any(_baseline_right(row) == 0 for row in rows)
        best: tuple[int, str] | None = None
        for rung, (noninferior, _p) in zip(tested, results):
            if not noninferior or no_room:
                break
            best = rung
        note = "" if best is not None else f"not even {tested[0][1]} is shown non-inferior at δ"
        if no_room:
            note = "no room: the baseline gets every question wrong, so no arm can lose one"
        elif best is not None and best == tested[-1]:
            note = (
                f"the narrowest arm tested ({best[1]}) is still non-inferior: the true margin may be larger"
            )
        bits = None if best is None else best[0]
        out[length] = BitsOfMargin(
            length,
            bits,
            margin,
            tuple(r[0] for r in tested),
            tuple(ok for ok, _p in results),
            tuple(p for _ok, p in results),
            None if bits is None else FP16_BITS - bits,
            None if bits is None else BF16_BITS - bits,
            note,
            tuple(r[1] for r in tested),
            None if best is None else best[1],
            no_room,
            None if no_room else fewest,
            open_below and not no_room,
        )
    return out
