"""Item accuracy by position in the answer, candidate run against baseline run, for every
decode-heavy task and length the runs hold (evalkit.compare.positions).

    python scripts/position_report.py BASELINE_RUN CANDIDATE_RUN --out DIR [--bucket 16]

Writes positions.json and positions.md under --out."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evalkit.compare.positions import position_report
from evalkit.store.reader import load_run


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("baseline")
    ap.add_argument("candidate")
    ap.add_argument("--out", required=True)
    ap.add_argument("--bucket", type=int, default=16, help="answer positions per bucket")
    args = ap.parse_args()
    base, cand = load_run(args.baseline), load_run(args.candidate)
    report = position_report(base.samples, cand.samples, bucket=args.bucket)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {"baseline": args.baseline, "candidate": args.candidate, "bucket": args.bucket}
    (out / "positions.json").write_text(json.dumps({**meta, "cells": report}, indent=1) + "\n")
    lines = [
        f"# Item accuracy by answer position: `{args.candidate}` vs `{args.baseline}`",
        "",
        "Paired on (task, doc, length) and answer position; CI clustered by question (95%).",
        "",
        "| task | length | positions | items | base % | cand % | Δ pp [95% CI] |",
        "|---|---:|---|---:|---:|---:|---|",
    ]
    for task, by_length in report.items():
        for length, rows in by_length.items():
            for r in rows:
                lines.append(
                    f"| {task} | {length} | {r['first']}-{r['last']} | {r['n_items']} | "
                    f"{100 * r['base_accuracy']:.1f} | {100 * r['cand_accuracy']:.1f} | "
                    f"{100 * r['difference']:+.1f} [{100 * r['ci_low']:+.1f}, {100 * r['ci_high']:+.1f}] |"
                )
    (out / "positions.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
