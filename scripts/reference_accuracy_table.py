#!/usr/bin/env python3
"""The reference model's measured accuracy per task x length x arm, as a Markdown table, from the
committed run directories (results/reference-model-v1/runs/h200-ARM*/summary.json): the model card's
table is this script's output, not a transcription.

    python scripts/reference_accuracy_table.py [RUNS_DIR]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ARMS = ("fp32", "fp16", "bf16")


def cells(runs: Path) -> dict[tuple[str, int, str], tuple[int, int]]:
    """(task, length, arm) -> (correct, n); the run with most questions wins a repeated cell."""
    out: dict[tuple[str, int, str], tuple[int, int]] = {}
    for arm in ARMS:
        for run in sorted(runs.glob(f"h200-{arm}*")):
            if run.name != f"h200-{arm}" and not run.name.startswith(f"h200-{arm}-"):
                continue
            for task, metrics in json.loads((run / "summary.json").read_text()).items():
                metric = next(iter(metrics.values()))
                for length, c in metric.items():
                    if length == "all":
                        continue
                    key = (task, int(length), arm)
                    if c["n"] > out.get(key, (0, 0))[1]:
                        out[key] = (round(c["accuracy"] * c["n"]), c["n"])
    return out


def table(runs: Path) -> str:
    got = cells(runs)
    tasks = sorted({t for t, _, _ in got})
    lengths = sorted({n for _, n, _ in got})
    head = "| task | " + " | ".join(f"{n // 1024}k" for n in lengths) + " |"
    rows = [head, "|---|" + "---|" * len(lengths)]
    for t in tasks:
        row = [t]
        for n in lengths:
            vals = [got.get((t, n, a)) for a in ARMS]
            if not any(vals):
                row.append("")
                continue
            pcts = [f"{100 * c / m:.0f}" if m else "-" for c, m in (v or (0, 0) for v in vals)]
            n_docs = max(v[1] for v in vals if v)
            row.append(("/".join(pcts) if len(set(pcts)) > 1 else pcts[0]) + f" (n={n_docs})")
        rows.append("| " + " | ".join(row) + " |")
    legend = "Cells: accuracy % (one figure when all three arms agree, else fp32/fp16/bf16)."
    return "\n".join(rows) + "\n\n" + legend + "\n"


if __name__ == "__main__":
    sys.stdout.write(table(Path(sys.argv[1] if len(sys.argv) > 1 else "results/reference-model-v1/runs")))
