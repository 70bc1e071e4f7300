"""`evalkit compare BASELINE CANDIDATE`: is the candidate arm worse, on the same questions?

Exit codes: 0 the gate passed (or no `--fail-on` was given), 1 the `--fail-on` gate failed,
2 a usage or input error (one line on stderr).
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
from pathlib import Path

from evalkit.errors import InputError, MismatchError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = (
        "exit codes: 0 pass (or no --fail-on), 1 the --fail-on gate failed, 2 usage or input error"
    )
    parser.add_argument(
        "baseline",
        help="baseline run: an evalkit run directory, an lm-eval "
        "samples_<task>_*.jsonl file, or a directory of them",
    )
    parser.add_argument("candidate", help="candidate run (same forms as BASELINE)")
    _add_output_arguments(parser)
    _add_judgement_arguments(parser)
    _add_figure_and_label_arguments(parser)
    _add_pairing_arguments(parser)
    parser.add_argument("--out", metavar="FILE", help="write the report to FILE instead of stdout")
    _add_other_run_arguments(parser)


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """What is written, in which form, and how large a brief may be."""
    parser.add_argument(
        "--format",
        choices=("table", "md", "json"),
        default=None,
        help="what goes to stdout (or --out): table, a terminal table (the default on a terminal); "
        "md, a table to paste on a pull request (the default when piped, with --out or --brief); "
        "json: every statistic",
    )
    parser.add_argument("--md", metavar="FILE", help="also write the Markdown report to FILE")
    parser.add_argument("--json", metavar="FILE", help="also write the JSON report to FILE")
    parser.add_argument(
        "--brief",
        action="store_true",
        help="comment-sized Markdown: the verdict, the rows that matter, capped detail",
    )
    parser.add_argument(
        "--max-chars",
        type=int,
        default=60_000,
        help="size cap of the --brief report and of the $GITHUB_STEP_SUMMARY text (default 60000)",
    )


def _add_judgement_arguments(parser: argparse.ArgumentParser) -> None:
    """How a cell is judged: the plan, or the margins, the floor and the gate."""
    parser.add_argument(
        "--plan",
        metavar="PLAN.yaml",
        help="judge every cell against a pre-registered plan (evalkit plan --out): its margins, alpha "
        "and gate; the report leads with the plan's decision and records its name and hash; "
        "exit 1 when the plan's decision fails",
    )
    parser.add_argument(
        "--margin",
        default=None,
        help="non-inferiority margin as a fraction (0.01 = 1 percentage point), per task with "
        "TASK=VALUE: e.g. 0.01,gsm8k=0.02,passkey=0.05 (default 0.01)",
    )
    parser.add_argument(
        "--logprob-margin",
        type=float,
        default=None,
        help="non-inferiority margin of the paired gold log-probability, in nats per answer token "
        "(mean over questions of each arm's gold_logprob / gold_tokens; default 0.01)",
    )
    parser.add_argument(
        "--replicate",
        "--floor",
        dest="replicate",
        metavar="BASELINE2",
        help="a replicate of the baseline, or (--floor) the baseline under other non-state numerics "
        "(another kernel, batch width, device): report the A/A disagreement and whether the "
        "candidate disagrees more",
    )
    parser.add_argument(
        "--fail-on",
        choices=("loss", "inconclusive", "not-noninferior"),
        help="CI gate: exit 1 when a row is a significant loss beyond its margin (loss), or also "
        "undecided (inconclusive), or not shown non-inferior at its margin (not-noninferior)",
    )
    parser.add_argument(
        "--gate-on",
        choices=("exact_match", "logprob", "both"),
        default="exact_match",
        help="which verdicts --fail-on reads: the exact-match rows (default), the paired gold "
        "log-probability cells, or both",
    )


def _add_figure_and_label_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plot",
        metavar="FILE.png|DIR",
        help="also write the forest plot of the paired differences (DIR: DIR/forest.png and "
        "DIR/accuracy.png)",
    )
    parser.add_argument("--label-baseline", metavar="NAME", help="name of the baseline arm in the report")
    parser.add_argument("--label-candidate", metavar="NAME", help="name of the candidate arm in the report")


def _add_pairing_arguments(parser: argparse.ArgumentParser) -> None:
    """Which runs and questions may be paired."""
    parser.add_argument(
        "--allow-partial",
        action="store_true",
        help="compare a run that has not finished (no finished_at in its manifest)",
    )
    parser.add_argument(
        "--allow-prompt-mismatch",
        action="store_true",
        help="compare even if a paired question was asked with a different prompt",
    )
    parser.add_argument(
        "--intersection", action="store_true", help="compare only the questions (and tasks) both runs have"
    )


def _add_other_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Runs that differ besides the state, and drift runs appended to the report."""
    parser.add_argument(
        "--allow-numerics-difference",
        action="store_true",
        help="compare local runs that differ besides the state (kernel switches, device, GEMM shapes, "
        "sources, libraries): refused by default, since the difference is then not the state's alone; "
        "a numerics-floor comparison (the same arm through another kernel) needs exactly this",
    )
    parser.add_argument(
        "--drift",
        metavar="DRIFT_RUN",
        action="append",
        default=[],
        help="append the summary of an `evalkit drift` run directory (repeatable)",
    )


def _warn(text: str) -> None:
    print(f"evalkit compare: warning: {text}", file=sys.stderr)


def _load(path: str, side: str, allow_partial: bool):
    from evalkit.store import load_finished_run

    return load_finished_run(path, side, allow_partial, keep_prompts=False)  # paired on prompt_hash


def _same_place(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from None


def main(args: argparse.Namespace) -> int:
    from evalkit.compare import build_report, render_json, render_markdown
    from evalkit.compare.brief import render_brief
    from evalkit.compare.gate import exit_code
    from evalkit.compare.numerics import ALLOW_FLAG, numerics_differences

    plan = _plan(args)
    margins, logprob_margin = _margins(args)
    baseline = _load(args.baseline, "baseline", args.allow_partial)
    candidate = _load(args.candidate, "candidate", args.allow_partial)
    replicate = _load(args.replicate, "replicate", args.allow_partial) if args.replicate else None
    numerics = numerics_differences(baseline.manifest, candidate.manifest)
    if numerics and not args.allow_numerics_difference:
        raise MismatchError(
            f"the runs differ besides the state ({'; '.join(numerics)}): pass {ALLOW_FLAG} to compare "
            "them anyway (a numerics floor), or re-run one with the other's settings"
        )
    report = build_report(
        baseline,
        candidate,
        margin=margins,
        intersection=args.intersection,
        allow_prompt_mismatch=args.allow_prompt_mismatch,
        fail_on=args.fail_on,
        labels=(args.label_baseline, args.label_candidate),
        logprob_margin=logprob_margin,
        replicate=replicate,
        gate_on=args.gate_on,
        plan=plan,
    )
    _add_notes(report, args, (baseline, candidate), numerics)
    drift_runs = [_drift_run(path) for path in args.drift]
    if drift_runs:
        from evalkit.drift.report import drift_brief

        report["drift"] = [drift_brief(path) for path in drift_runs]
    as_json = render_json(report)
    markdown = render_brief(report, args.max_chars) if args.brief else render_markdown(report)
    if drift_runs and not args.brief:
        from evalkit.drift.report import drift_markdown

        markdown += "".join("\n" + drift_markdown(path, images=False) for path in drift_runs)
    _write_outputs(args, report, markdown, as_json)
    gate = report["gate"]
    if gate["status"] == "fail":
        name = f"the plan {args.plan}" if plan is not None else f"gate --fail-on {gate['fail_on']}"
        _warn(f"{name} failed on {', '.join(gate['failing'])}")
    return exit_code(gate)


def _plan(args: argparse.Namespace):
    """The pre-registered plan, which sets the margins and the gate (so they may not be given too)."""
    if not args.plan:
        return None
    from evalkit.compare.plan_file import load_plan

    given = [
        name
        for name, value in (
            ("--margin", args.margin),
            ("--logprob-margin", args.logprob_margin),
            ("--fail-on", args.fail_on),
            ("--gate-on", None if args.gate_on == "exact_match" else args.gate_on),
        )
        if value is not None
    ]
    if given:
        raise InputError(
            f"{', '.join(given)}: the plan sets the margins and the gate; drop them or the --plan"
        )
    return load_plan(args.plan)


def _margins(args: argparse.Namespace):
    """The exact-match margins and the log-probability margin (checked, with --max-chars)."""
    from evalkit.compare.margins import parse_margins

    margins = parse_margins(args.margin if args.margin is not None else "0.01")
    logprob_margin = 0.01 if args.logprob_margin is None else args.logprob_margin
    if args.max_chars < 2_000:
        raise InputError(f"--max-chars must be at least 2000, got {args.max_chars}")
    if not (math.isfinite(logprob_margin) and logprob_margin > 0):
        raise InputError(f"--logprob-margin must be a positive number of nats, got {logprob_margin}")
    return margins, logprob_margin


def _add_notes(report: dict, args: argparse.Namespace, runs: tuple, numerics: list[str]) -> None:
    """The report's notes on what the command allowed: the same run twice, numerics, partial runs."""
    from evalkit.compare.numerics import ALLOW_FLAG

    if _same_place(args.baseline, args.candidate):
        text = "baseline and candidate are the same run: every difference is 0 by construction"
        _warn(text)
        report["notes"].append(text)
    if numerics:
        report["notes"].append(f"{ALLOW_FLAG}: the runs differ besides the state: {'; '.join(numerics)}")
    for side, run in zip(("baseline", "candidate"), runs):
        if not run.finished:
            report["notes"].append(f"--allow-partial: the {side} run has not finished")


def _write_outputs(args: argparse.Namespace, report: dict, markdown: str, as_json: str) -> None:
    """The plot, --md, --json, the CI step summary, then the report itself (stdout or --out)."""
    from evalkit.compare import render_plot
    from evalkit.compare.brief import render_brief

    if args.plot:
        for written in render_plot(report, args.plot):
            print(f"wrote {written}", file=sys.stderr)
    if args.md:
        _write(args.md, markdown)
    if args.json:
        _write(args.json, as_json)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if summary:
        text = markdown if args.brief else render_brief(report, args.max_chars)
        try:
            with open(summary, "a", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            why = exc.strerror or exc
            raise InputError(f"cannot append to $GITHUB_STEP_SUMMARY {summary}: {why}") from None
    shape = args.format or _default_format(args)
    if shape == "table":
        from evalkit.compare.terminal import render_terminal

        text = render_terminal(report, width=shutil.get_terminal_size().columns)
    else:
        text = as_json if shape == "json" else markdown
    if args.out:
        _write(args.out, text)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)


def _default_format(args: argparse.Namespace) -> str:
    """A terminal table for a person at a terminal; Markdown wherever the text is kept (a pipe,
    a file, a --brief comment), since that is what gets pasted."""
    if args.out or args.brief or not sys.stdout.isatty():
        return "md"
    return "table"


def _drift_run(path: str) -> Path:
    from evalkit.drift.rundir import is_drift_run

    if not is_drift_run(path):
        raise InputError(f"{path} is not an `evalkit drift` run directory (no drift summary.json)")
    return Path(path)
