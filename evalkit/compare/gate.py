"""The CI gate: `--fail-on loss|inconclusive|not-noninferior` and the exit code it implies.

Exit codes of `evalkit compare`: 0 the gate passed (or no gate was asked for), 1 the gate failed,
2 a usage or input error. Gates, from most to least lenient:

- `loss`: fails when a row is a significant loss not shown to be within its margin (`loss`);
  a significant drop within the margin (`minor_loss`) passes, the margin being the tolerance.
- `inconclusive`: also fails when a row could not be decided (`inconclusive`); rows where the
  arms agree on every question (`identical`) pass.
- `not-noninferior`: fails on every row whose non-inferiority at its margin is not shown,
  including `identical` rows with too few questions to show it.
"""

from __future__ import annotations

from typing import Any

from evalkit.compare.verdict import GAIN, INCONCLUSIVE, LOSS, where

GATES = ("loss", "inconclusive", "not-noninferior")
EXIT_PASS, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
PASS, FAIL, UNGATED = "pass", "fail", "ungated"


def _fails(row: dict[str, Any], fail_on: str) -> bool:
    if fail_on == "loss":
        return row["verdict"] == LOSS
    if fail_on == "inconclusive":
        return row["verdict"] in (LOSS, INCONCLUSIVE)
    return not row["noninferior"] and row["verdict"] != GAIN


def evaluate_gate(rows: list[dict[str, Any]], fail_on: str | None) -> dict[str, Any]:
    """{"fail_on", "status": pass|fail|ungated, "failing": [row names]}."""
    if fail_on is None:
        return {"fail_on": None, "status": UNGATED, "failing": []}
    if fail_on not in GATES:
        raise ValueError(f"unknown gate {fail_on!r}; choose from {', '.join(GATES)}")
    failing = [where(r) for r in rows if _fails(r, fail_on)]
    return {"fail_on": fail_on, "status": FAIL if failing else PASS, "failing": failing}


def exit_code(gate: dict[str, Any]) -> int:
    return EXIT_FAIL if gate["status"] == FAIL else EXIT_PASS
