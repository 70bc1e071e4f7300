"""`evalkit plan PILOT`: how many questions per cell are needed to show non-inferiority at δ (or
to detect a loss of size d) with the asked power, from a pilot comparison.

PILOT is an `evalkit compare --json` report, or the BASELINE CANDIDATE run pair to compare first.
With `--out plan.yaml` it also writes the pre-registered plan `evalkit compare --plan` judges
against (n per cell from the exact power); `--discordance PSI --cell TASK[@LENGTH] ...` plans from
an assumed discordance instead of a pilot.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from evalkit.errors import InputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "pilot",
        nargs="*",
        metavar="PILOT",
        help="a comparison JSON (evalkit compare --json), or BASELINE CANDIDATE runs",
    )
    parser.add_argument("--margin", type=float, default=0.01, help="non-inferiority margin δ (fraction)")
    parser.add_argument("--power", type=float, default=0.8, help="power to plan for (default 0.8)")
    parser.add_argument("--effect", type=float, help="also plan to detect a loss of this size d (fraction)")
    parser.add_argument("--format", choices=("md", "json"), default="md")
    parser.add_argument("--allow-partial", action="store_true", help="plan from runs that have not finished")
    parser.add_argument("--out", metavar="PLAN.yaml", help="write the pre-registered plan file")
    parser.add_argument("--name", help="the plan's name (default: the --out file's stem)")
    parser.add_argument(
        "--discordance",
        type=float,
        metavar="PSI",
        help="assumed discordance rate (fraction) instead of a pilot; needs --cell",
    )
    parser.add_argument(
        "--cell",
        action="append",
        default=[],
        metavar="TASK[@LENGTH]",
        help="a cell of the plan with --discordance (repeatable)",
    )
    parser.add_argument(
        "--logprob-margin",
        type=float,
        default=0.01,
        help="the plan's paired gold log-prob margin in nats per answer token (default 0.01)",
    )
    parser.add_argument(
        "--gate",
        choices=("exact_match", "logprob", "both"),
        default="both",
        help="measures every cell must show non-inferior for the plan to pass (default both)",
    )
    parser.add_argument(
        "--calibrate-from",
        action="append",
        default=[],
        metavar="SWEEP_DIR",
        help="an `evalkit sweep` directory with positive controls (repeatable): record in the plan what "
        "exact-match change the log-prob margin predicts (OLS across its cells)",
    )
    parser.add_argument(
        "--looks",
        type=int,
        help="a group-sequential design for `evalkit ab`: this many equally spaced looks per cell "
        "(n_max per cell = the fixed-sample n times the design's information inflation)",
    )
    parser.add_argument(
        "--spending", choices=("obf", "pocock"), default="obf", help="alpha spending (--looks)"
    )
    parser.add_argument(
        "--family-size",
        type=int,
        help="hypotheses in the multiplicity family (e.g. cells x formats compared; default: the cells)",
    )
    parser.add_argument(
        "--multiplicity",
        choices=("holm", "fixed-sequence"),
        default="holm",
        help="the loss claims' procedure: Holm over the family (default), or a fixed sequence in the "
        "order the --cell options are given (each at full alpha; the first non-loss stops it)",
    )


def _fraction(name: str, value: float | None, upper: float = 1.0) -> None:
    if value is not None and not (math.isfinite(value) and 0.0 < value < upper):
        raise InputError(f"--{name} must be in (0, {upper:g}), got {value}")


def _pilot_report(paths: list[str], allow_partial: bool) -> tuple[dict, str]:
    if len(paths) == 1:
        from evalkit.store.jsonl import MALFORMED_JSON, json_error_message
        from evalkit.user_files import regular_file

        path = Path(paths[0])
        if path.is_dir():
            raise InputError(f"{path}: a directory; give a comparison JSON, or BASELINE CANDIDATE runs")
        try:
            return json.loads(regular_file(path).read_text(encoding="utf-8")), str(path)
        except OSError as exc:
            raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
        except MALFORMED_JSON as exc:
            raise InputError(f"{path}: not JSON ({json_error_message(exc)})") from None
    if len(paths) != 2:
        raise InputError(f"give one comparison JSON or two runs, got {len(paths)} paths")
    from evalkit.compare import build_report
    from evalkit.store import load_finished_run

    runs = [load_finished_run(p, side, allow_partial) for p, side in zip(paths, ("baseline", "candidate"))]
    return build_report(*runs), f"{paths[0]} vs {paths[1]}"


def _write_plan(args: argparse.Namespace, report: dict | None, source: str) -> None:
    from evalkit.compare.plan import parse_cell, pilot_cells, plan_file_body
    from evalkit.compare.plan_file import dump_plan

    if not (math.isfinite(args.logprob_margin) and args.logprob_margin > 0):
        raise InputError(
            f"--logprob-margin must be a positive number of nats/token, got {args.logprob_margin}"
        )
    if report is None:
        cells = {parse_cell(c): (args.discordance, "assumed") for c in args.cell}
        if len(cells) != len(args.cell):
            raise InputError("--cell: a cell is named twice")
    else:
        cells = pilot_cells(report, source)
    if args.family_size is not None and args.family_size < len(cells):
        raise InputError(f"--family-size {args.family_size} is smaller than the plan's {len(cells)} cells")
    calibration = None
    if args.calibrate_from:
        from evalkit.compare.calibration import calibrate, calibration_record, sweep_calibration_cells

        sweep_cells = [c for d in args.calibrate_from for c in sweep_calibration_cells(d)]
        calibration = calibration_record(calibrate(sweep_cells, args.logprob_margin))
    if args.looks is not None and args.looks < 1:
        raise InputError(f"--looks must be at least 1, got {args.looks}")
    out = Path(args.out)
    if out.exists():
        raise InputError(f"{out} exists: a pre-registered plan is not overwritten; choose another --out")
    body = plan_file_body(
        cells,
        name=args.name or out.stem,
        source=source,
        margin=args.margin,
        logprob_margin=args.logprob_margin,
        power=args.power,
        gate=args.gate,
        family_size=args.family_size,
        multiplicity=args.multiplicity,
        effect=args.effect,
        calibration=calibration,
        looks=args.looks,
        spending=args.spending,
    )
    try:
        out.write_text(dump_plan(body), encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write {out}: {exc.strerror or exc}") from None
    print(f"wrote {out}", file=sys.stderr)


def main(args: argparse.Namespace) -> int:
    from evalkit.compare.plan import plan, plan_markdown

    _fraction("margin", args.margin)
    _fraction("power", args.power)
    _fraction("effect", args.effect)
    if args.discordance is not None:
        _fraction("discordance", args.discordance, 1.0 + 1e-12)
        if args.pilot or not args.cell:
            raise InputError("--discordance plans without a pilot: give --cell TASK[@LENGTH] and no PILOT")
        if not args.out:
            raise InputError("--discordance writes a plan file: give --out plan.yaml")
        _write_plan(args, None, f"assumed discordance {args.discordance:g}")
        return 0
    if args.cell:
        raise InputError("--cell goes with --discordance (a pilot names its own cells)")
    if not args.pilot:
        raise InputError("give a pilot (a comparison JSON or BASELINE CANDIDATE runs), or --discordance")
    report, source = _pilot_report(args.pilot, args.allow_partial)
    if args.out:
        _write_plan(args, report, source)
    result = plan(report, args.margin, args.power, args.effect, source)
    if args.format == "json":
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write(plan_markdown(result))
    return 0
