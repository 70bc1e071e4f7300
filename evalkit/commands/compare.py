"""`evalkit compare BASELINE CANDIDATE`: is the candidate arm worse, on the same questions?"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalkit.errors import InputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "baseline",
        help="baseline run: an evalkit run directory, an lm-eval "
        "samples_<task>_*.jsonl file, or a directory of them",
    )
    parser.add_argument("candidate", help="candidate run (same forms as BASELINE)")
    parser.add_argument(
        "--format",
        choices=("md", "json"),
        default="md",
        help="md: a table to paste on a pull request (default); json: every statistic",
    )
    parser.add_argument(
        "--margin",
        type=float,
        default=0.01,
        help="non-inferiority margin as a fraction (default 0.01 = 1 percentage point)",
    )
    parser.add_argument("--plot", metavar="FILE.png", help="also write accuracy per arm with 95%% CIs")
    parser.add_argument(
        "--allow-prompt-mismatch",
        action="store_true",
        help="compare even if a paired question was asked with a different prompt",
    )
    parser.add_argument(
        "--intersection", action="store_true", help="compare only the questions (and tasks) both runs have"
    )
    parser.add_argument("--out", metavar="FILE", help="write the report to FILE instead of stdout")
    parser.add_argument(
        "--drift",
        metavar="DRIFT_RUN",
        action="append",
        default=[],
        help="append the summary of an `evalkit drift` run directory (repeatable)",
    )


def main(args: argparse.Namespace) -> int:
    from evalkit.compare import build_report, render_json, render_markdown, render_plot
    from evalkit.store import load_run

    if not 0.0 < args.margin < 1.0:
        raise InputError(f"--margin must be a fraction in (0, 1), e.g. 0.01 for 1 pp; got {args.margin}")
    baseline = load_run(args.baseline)
    candidate = load_run(args.candidate)
    report = build_report(
        baseline,
        candidate,
        margin=args.margin,
        intersection=args.intersection,
        allow_prompt_mismatch=args.allow_prompt_mismatch,
    )
    drift_runs = [_drift_run(path) for path in args.drift]
    if args.format == "json":
        if drift_runs:
            from evalkit.drift.report import drift_brief

            report = {**report, "drift": [drift_brief(path) for path in drift_runs]}
        text = render_json(report)
    else:
        text = render_markdown(report)
        if drift_runs:
            from evalkit.drift.report import drift_markdown

            text += "".join("\n" + drift_markdown(path, images=False) for path in drift_runs)
    if args.plot:
        render_plot(report, args.plot)
    if args.out:
        try:
            Path(args.out).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise InputError(f"cannot write {args.out}: {exc.strerror or exc}") from None
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _drift_run(path: str) -> Path:
    from evalkit.drift.rundir import is_drift_run

    if not is_drift_run(path):
        raise InputError(f"{path} is not an `evalkit drift` run directory (no drift summary.json)")
    return Path(path)
