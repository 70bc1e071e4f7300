"""`evalkit ab --plan plan.yaml --baseline fp32 --candidate fp16 --out DIR`: both arms on the plan's
cells, interleaved per question (or per `--block` of questions), each cell stopping at the first
group-sequential look that decides it (loss, non-inferior, or futile) or at its planned n;
re-running resumes. DIR/ab.json has the boundaries, every look and the n used per cell;
DIR/<cell>/<arm>/ are normal run directories.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalkit.errors import InputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plan", required=True, metavar="PLAN.yaml", help="the pre-registered plan")
    parser.add_argument("--baseline", default="fp32", help="baseline arm (default fp32)")
    parser.add_argument("--candidate", required=True, help="candidate arm, e.g. fp16 or m3-rtz@chunk=64")
    parser.add_argument("--out", required=True, help="output directory (re-running resumes it)")
    parser.add_argument("--model", help="checkpoint dir or hub id (default: the embedded reference model)")
    parser.add_argument(
        "--looks", type=int, help="equally spaced looks per cell (default: the plan's, else 3)"
    )
    parser.add_argument(
        "--spending", choices=("obf", "pocock"), help="alpha spending (default: the plan's, else obf)"
    )
    parser.add_argument("--seed", type=int, help="seed of the task generators")
    parser.add_argument("--data-dir", help="local data folder (e.g. a GSM8K copy); also EVALKIT_DATA")
    parser.add_argument("--max-new-tokens", type=int, help="cap every task's generation length")
    parser.add_argument("--device", help="cpu | cuda | cuda:N (default: cuda if available)")
    parser.add_argument("--max-num-seqs", type=int, help="most sequences decoded together")
    parser.add_argument(
        "--block",
        type=int,
        default=1,
        help="questions per arm turn (default 1: strictly per question); a GPU decodes a block as "
        "one batch, and batch-invariant decoding gives the same answers",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def main(args: argparse.Namespace) -> int:
    from evalkit.ab.runner import AbSpec, check_spec, run_ab
    from evalkit.arm import parse_arm
    from evalkit.compare.plan_file import load_plan

    for flag in ("max_new_tokens", "max_num_seqs"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise InputError(f"--{flag.replace('_', '-')} must be at least 1")
    plan = load_plan(args.plan)
    looks, spending = args.looks or 3, args.spending or "obf"
    if plan.sequential is not None:
        planned = (plan.sequential["looks"], plan.sequential["spending"])
        given = (args.looks or planned[0], args.spending or planned[1])
        if given != planned:
            raise InputError(
                f"{args.plan} pre-registers {planned[0]} looks with {planned[1]} spending; "
                "drop --looks/--spending or write a new plan"
            )
        looks, spending = planned
    command = ["evalkit", "ab", *sys.argv[2:]] if sys.argv[1:2] == ["ab"] else list(sys.argv)
    spec = AbSpec(
        plan=plan,
        baseline=parse_arm(args.baseline),
        candidate=parse_arm(args.candidate),
        out_dir=Path(args.out),
        model=args.model,
        looks=looks,
        spending=spending,
        seed=args.seed,
        data_dir=args.data_dir,
        max_new_tokens=args.max_new_tokens,
        device=args.device,
        max_num_seqs=args.max_num_seqs,
        block=args.block,
        progress=not args.no_progress,
        command=command,
    )
    check_spec(spec)  # before the model loads
    summary = run_ab(spec)
    for cell in summary["cells"]:
        name = cell["task"] + ("" if cell["length"] is None else f" @ {cell['length']}")
        print(f"{name}: {cell['decision']} at n = {cell['n_used']} of {cell['n_max']}")
    print(f"-> {args.out}/ab.json", file=sys.stderr)
    return 0
