"""`evalkit drift link BASELINE_RUN CANDIDATE_RUN`: arguments and the printed report."""

from __future__ import annotations

import argparse


def add_link_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "baseline", nargs="?", help="run directory of `evalkit run` (the reference arm, e.g. fp32)"
    )
    parser.add_argument(
        "candidate", nargs="?", help="run directory of `evalkit run` (the arm under test, e.g. fp16)"
    )
    parser.add_argument(
        "--report-only",
        metavar="LINK_DIR",
        help="recompute the analysis of an earlier link directory from its link.json (no replay)",
    )
    parser.add_argument("--model", help="checkpoint (default: the baseline run's model path)")
    parser.add_argument("--metric", help="correctness metric (default: the task's first metric)")
    parser.add_argument("--out", help="output directory (default runs/drift-link-<time>)")
    parser.add_argument("--overwrite", action="store_true", help="replace a link run already in --out")
    parser.add_argument("--device", help="cpu | cuda | cuda:N (default: cuda if available)")
    parser.add_argument("--data-dir", help="folder holding GSM8K (also EVALKIT_DATA), to rebuild prompts")
    parser.add_argument("--chunk-size", type=int, default=2048, help="prefill chunk of the prompt (2048)")
    parser.add_argument("--limit", type=int, help="at most this many questions (the first ones)")
    parser.add_argument(
        "--baseline-format", help="the baseline's state format (default: its manifest's arm.state_dtype)"
    )
    parser.add_argument(
        "--candidate-format", help="the candidate's state format (default: its manifest's arm.state_dtype)"
    )


def link_main(args: argparse.Namespace) -> int:
    from evalkit.drift.link import run_link

    return run_link(args)
