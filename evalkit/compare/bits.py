"""Bits of margin: the fewest mantissa bits of the state that are still non-inferior to fp32.

For `evalkit sweep`: each arm `mN` (N explicit mantissa bits) is compared with the fp32 arm on
the same questions (`build_report(fp32_run, arm_run)["rows"]`, one task x metric). Per length,
the bits of margin is the smallest N such that the arm with N bits **and every wider arm tested**
is non-inferior at δ (Tango/Nam score test, one-sided 0.025): a wider arm that fails breaks the
chain, so a lucky narrow arm never counts. fp16 stores 10 mantissa bits and bf16 7; the headroom
columns say how many bits each has to spare.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from evalkit import stats as st
from evalkit.stats._result import Result

FP16_BITS, BF16_BITS = 10, 7


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
    title: ClassVar[str] = "Bits of margin: fewest mantissa bits still non-inferior to fp32"


def _by_length(rows: Iterable[Mapping[str, Any]], bits: int) -> dict[int | None, Mapping[str, Any]]:
    out: dict[int | None, Mapping[str, Any]] = {}
    for row in rows:
        length = row.get("length")
        if length in out:
            raise ValueError(f"arm m{bits}: two rows at length {length}; pass one task x metric at a time")
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


def bits_of_margin(
    rows_by_bits: Mapping[int, Iterable[Mapping[str, Any]]],
    margin: float = 0.01,
    alpha: float = 0.025,
    measure: str = "exact_match",
) -> dict[int | None, BitsOfMargin]:
    """{length: BitsOfMargin} from {mantissa bits: rows of that arm vs fp32}.

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
    tables = {int(bits): _by_length(rows, int(bits)) for bits, rows in rows_by_bits.items()}
    lengths = sorted(
        {length for table in tables.values() for length in table}, key=lambda x: (x is not None, x)
    )
    out = {}
    for length in lengths:
        tested = sorted((bits for bits, table in tables.items() if length in table), reverse=True)
        results = [test(tables[bits][length], margin, alpha) for bits in tested]
        best = None
        for bits, (noninferior, _p) in zip(tested, results):
            if not noninferior:
                break
            best = bits
        note = "" if best is not None else f"not even m{tested[0]} is shown non-inferior at δ"
        if best is not None and best == tested[-1]:
            note = f"the narrowest arm tested (m{best}) is still non-inferior: the true margin may be larger"
        out[length] = BitsOfMargin(
            length,
            best,
            margin,
            tuple(tested),
            tuple(ok for ok, _p in results),
            tuple(p for _ok, p in results),
            None if best is None else FP16_BITS - best,
            None if best is None else BF16_BITS - best,
            note,
        )
    return out
