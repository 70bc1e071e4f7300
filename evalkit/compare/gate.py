"""The CI gate: `--fail-on loss|inconclusive|not-noninferior` and the exit code it implies.

Exit codes of `evalkit compare`: 0 the gate passed (or no gate was asked for), 1 the gate failed,
2 a usage or input error. Gates, from most to least lenient:

- `loss`: fails when a row is a significant loss not shown to be within its margin (`loss`);
  a significant drop within the margin (`minor_loss`) passes, the margin being the tolerance.
- `inconclusive`: also fails when a row could not be decided (`inconclusive`); rows where the
  arms agree on every question (`identical`) pass.
- `not-noninferior`: fails on every row whose non-inferiority at its margin is not shown,
  including `identical` rows with too few questions to show it.

`--gate-on logprob|both` applies the same rules to the paired gold log-probability cells.
"""

from __future__ import annotations

from typing import Any

from evalkit.compare.verdict import GAIN, INCONCLUSIVE, LOSS, where
from evalkit.errors import InputError

GATES = ("loss", "inconclusive", "not-noninferior")
MEASURES = ("exact_match", "logprob", "both")
EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
PASS, FAIL, UNGATED = "pass", "fail", "ungated"


def _fails(row: dict[str, Any], fail_on: str) -> bool:
    if fail_on == "loss":
        return row["verdict"] == LOSS
    if fail_on == "inconclusive":
        return row["verdict"] in (LOSS, INCONCLUSIVE)
    return not row["noninferior"] and row["verdict"] != GAIN


def _cell_name(cell: dict[str, Any]) -> str:
    return f"{cell['task']} gold log-prob" + ("" if cell["length"] is None else f" @ {cell['length']}")


def evaluate_gate(
    rows: list[dict[str, Any]],
    fail_on: str | None,
    *,
    measure: str = "exact_match",
    logprob_cells: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """{"fail_on", "measure", "status": pass|fail|ungated, "failing": [row names]}.

    measure: which verdicts the gate reads: the exact-match rows, the paired log-probability
    cells (their verdicts use the same enum), or both. Gating on log-probabilities that were not
    recorded is an input error.
    """
    if measure not in MEASURES:
        raise ValueError(f"unknown gate measure {measure!r}; choose from {', '.join(MEASURES)}")
    if fail_on is None:
        return {"fail_on": None, "measure": measure, "status": UNGATED, "failing": []}
    if fail_on not in GATES:
        raise ValueError(f"unknown gate {fail_on!r}; choose from {', '.join(GATES)}")
    failing = []
    if measure in ("exact_match", "both"):
        failing += [where(r) for r in rows if _fails(r, fail_on)]
    if measure in ("logprob", "both"):
        if not logprob_cells:
            raise InputError("--gate-on logprob: the runs have no paired gold_logprob to gate on")
        failing += [_cell_name(c) for c in logprob_cells if _fails(c, fail_on)]
    return {"fail_on": fail_on, "measure": measure, "status": FAIL if failing else PASS, "failing": failing}


def exit_code(gate: dict[str, Any]) -> int:
    return EXIT_FAIL if gate["status"] == FAIL else EXIT_PASS
