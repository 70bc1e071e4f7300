"""`evalkit sweep`: run a list of arms on the same questions with one loaded model, pair each with
the fp32 arm, and report accuracy against mantissa bits and the bits of margin per length.

    evalkit sweep --arms fp32,m10,m7,m5,m4,m3,m2 --tasks passkey --lengths 8k,32k --limit 50 --out DIR

Each arm goes to DIR/<arm>/ (a normal run directory: `evalkit compare DIR/fp32 DIR/m7` works on it,
and re-running the sweep resumes it); DIR/sweep.json, sweep.md and sweep.png summarise them. The
reference answer's log-probability is measured (decode-mode teacher forcing from a copy of the
post-prompt state): the paired measure that separates arms where exact match cannot.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalkit.commands.kernels_option import add_kernels_argument, kernels_from_args
from evalkit.errors import InputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--arms",
        required=True,
        help="comma-separated arms, FORMAT[@chunk=N][@intra=DTYPE] each (evalkit/arm.py), one of them "
        "fp32 (the baseline), e.g. fp32,m10,m7,m5,m4,m3,m2 or fp32,bf16,bf16-rtz@chunk=64",
    )
    parser.add_argument("--model", help="checkpoint dir or hub id (default: the embedded reference model)")
    parser.add_argument("--tasks", help="comma-separated tasks (default: the reference model's suite)")
    parser.add_argument("--lengths", help="context lengths for long-context tasks, e.g. 2k,8k,32k,128k")
    parser.add_argument("--limit", type=int, help="first N questions per task and length")
    parser.add_argument("--seed", type=int, help="seed of the task generators")
    parser.add_argument("--data-dir", help="local data folder (e.g. a GSM8K copy); also EVALKIT_DATA")
    parser.add_argument("--max-new-tokens", type=int, help="cap every task's generation length")
    parser.add_argument(
        "--margin",
        type=float,
        default=0.05,
        help="non-inferiority margin delta as a fraction (0.05 = 5 pp; sweeps run few questions per cell)",
    )
    parser.add_argument(
        "--no-gold-logprob",
        action="store_true",
        help="skip the reference answer's log-probability (its forced decode steps)",
    )
    parser.add_argument("--out", required=True, help="sweep directory (re-running resumes it)")
    parser.add_argument("--device", help="cpu | cuda | cuda:N (default: cuda if available)")
    parser.add_argument("--max-num-seqs", type=int, help="most sequences decoded together")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    add_kernels_argument(parser)
    parser.add_argument(
        "--report-only",
        action="store_true",
        help="only summarise the arms' finished run directories in --out (a sweep stopped at a time "
        "limit, or run on another machine: resuming on another device is refused, the kernel build "
        "being part of a run's identity)",
    )


def main(args: argparse.Namespace) -> int:
    from evalkit.arm import parse_arms
    from evalkit.sweep import SweepSpec, run_sweep

    arms = parse_arms(args.arms)
    for flag in ("limit", "max_new_tokens", "max_num_seqs"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise InputError(f"--{flag.replace('_', '-')} must be at least 1")
    if not 0.0 < args.margin < 1.0:
        raise InputError(f"--margin must be a fraction in (0, 1), got {args.margin}")
    lengths = None
    if args.lengths:
        from evalkit.tasks.registry import parse_lengths

        lengths = parse_lengths(args.lengths)
    if args.report_only:
        return report_only(Path(args.out), arms, args.margin)
    command = ["evalkit", "sweep", *sys.argv[2:]] if sys.argv[1:2] == ["sweep"] else list(sys.argv)
    spec = SweepSpec(
        arms=arms,
        out_dir=Path(args.out),
        model=args.model,
        tasks=[t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None,
        lengths=lengths,
        limit=args.limit,
        seed=args.seed,
        data_dir=args.data_dir,
        max_new_tokens=args.max_new_tokens,
        gold_logprob=not args.no_gold_logprob,
        margin=args.margin,
        device=args.device,
        max_num_seqs=args.max_num_seqs,
        kernels=kernels_from_args(args),
        progress=not args.no_progress,
        command=command,
    )
    run_sweep(spec)
    print((Path(args.out) / "sweep.md").read_text(), end="")
    print(f"-> {args.out}/sweep.json, sweep.md, sweep.png; one run directory per arm", file=sys.stderr)
    return 0


def report_only(out_dir: Path, arms: list, margin: float) -> int:
    """sweep.json/md/png from the arms' finished run directories; an arm whose run has not
    finished (no `finished_at`) is refused: its cells would pair fewer questions than the others'."""
    from evalkit.store import load_run
    from evalkit.sweep.runner import arm_dir, summarize_sweep

    runs = {}
    for arm in arms:
        run = runs[arm.label] = load_run(arm_dir(out_dir, arm))
        if not run.finished:
            raise InputError(f"{arm_dir(out_dir, arm)} has not finished: leave {arm.label} out of --arms")
    summarize_sweep(out_dir, arms, margin, runs)
    print((out_dir / "sweep.md").read_text(), end="")
    return 0
