"""`evalkit plan PILOT`: how many questions per cell are needed to show non-inferiority at δ (or
to detect a loss of size d) with the asked power, from a pilot comparison.

PILOT is an `evalkit compare --json` report, or the BASELINE CANDIDATE run pair to compare first.
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
        nargs="+",
        metavar="PILOT",
        help="a comparison JSON (evalkit compare --json), or BASELINE CANDIDATE runs",
    )
    parser.add_argument("--margin", type=float, default=0.01, help="non-inferiority margin δ (fraction)")
    parser.add_argument("--power", type=float, default=0.8, help="power to plan for (default 0.8)")
    parser.add_argument("--effect", type=float, help="also plan to detect a loss of this size d (fraction)")
    parser.add_argument("--format", choices=("md", "json"), default="md")
    parser.add_argument("--allow-partial", action="store_true", help="plan from runs that have not finished")


def _fraction(name: str, value: float | None, upper: float = 1.0) -> None:
    if value is not None and not (math.isfinite(value) and 0.0 < value < upper):
        raise InputError(f"--{name} must be in (0, {upper:g}), got {value}")


def _pilot_report(paths: list[str], allow_partial: bool) -> tuple[dict, str]:
    if len(paths) == 1:
        from evalkit.store.jsonl import MALFORMED_JSON, json_error_message

        path = Path(paths[0])
        if path.is_dir():
            raise InputError(f"{path}: a directory; give a comparison JSON, or BASELINE CANDIDATE runs")
        try:
            return json.loads(path.read_text(encoding="utf-8")), str(path)
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


def main(args: argparse.Namespace) -> int:
    from evalkit.compare.plan import plan, plan_markdown

    _fraction("margin", args.margin)
    _fraction("power", args.power)
    _fraction("effect", args.effect)
    report, source = _pilot_report(args.pilot, args.allow_partial)
    result = plan(report, args.margin, args.power, args.effect, source)
    if args.format == "json":
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    else:
        sys.stdout.write(plan_markdown(result))
    return 0
