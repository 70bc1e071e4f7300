"""`evalkit drift`: how state error and output divergence grow with sequence length.

Teacher-forced: one token sequence runs through an fp32-state arm and each arm under test in
lockstep, in `prefill` mode (chunked: the state is rounded once per chunk) and/or `decode` mode
(token by token: rounded after every token); every position's next-token distribution and, at
log-spaced checkpoints, every KDA layer's state are compared with fp32's. Free-running: each
arm greedily generates --generate tokens from the same prompt. Writes a run directory with
CSV/JSON per log-spaced position bucket, a summary with growth fits, PNG plots and summary.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from evalkit.errors import EvalkitError, InputError

ARMS = ("fp32", "fp16", "bf16")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", help="Kimi-Linear or Qwen GDN checkpoint dir or hub id (default: the reference model)"
    )
    parser.add_argument(
        "--arms",
        default="fp16,bf16",
        help="state dtypes compared with the fp32 arm, comma-separated (default fp16,bf16; "
        "fp32 here runs a second fp32 arm: a self-check that must give exactly 0)",
    )
    parser.add_argument(
        "--mode",
        choices=("prefill", "decode", "both"),
        default="both",
        help="teacher-forced mode(s) (default both)",
    )
    parser.add_argument(
        "--chunk-size",
        type=int,
        default=1024,
        help="prefill mode: tokens per prefill call, i.e. per state rounding (1024)",
    )
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--input", metavar="FILE", help="a text file, or a .json list of token ids")
    src.add_argument("--gsm8k-text", action="store_true", help="GSM8K train text (the default input)")
    src.add_argument(
        "--task",
        metavar="NAME",
        help="the first prompt of a long-context task (`evalkit tasks`), built for --length tokens",
    )
    src.add_argument(
        "--random-tokens", action="store_true", help="uniform random token ids (random-weight models)"
    )
    parser.add_argument("--length", default="4k", help="tokens to read, e.g. 4096, 64k, 128k (default 4k)")
    parser.add_argument(
        "--generate", type=int, default=256, help="free running: greedy tokens per arm (0 skips; default 256)"
    )
    parser.add_argument(
        "--prompt-length",
        type=int,
        default=1024,
        help="free running: the first N input tokens are the prompt (1024)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of --task / --random-tokens (0)")
    parser.add_argument("--data-dir", help="folder holding GSM8K train.jsonl (also EVALKIT_DATA)")
    parser.add_argument("--out", help="run directory (default runs/drift-<time>)")
    parser.add_argument("--overwrite", action="store_true", help="replace a drift run already in --out")
    parser.add_argument("--device", help="cpu | cuda | cuda:N (default: cuda if available)")
    parser.add_argument(
        "--decode-impl",
        choices=("block", "steps"),
        default="block",
        help="decode mode: 'block' steps the KDA recurrence per token inside a batched "
        "forward (fast); 'steps' runs one engine decode step per token (default block)",
    )
    parser.add_argument(
        "--decode-block",
        type=int,
        default=256,
        help="decode mode: tokens per lockstep block (memory only, 256)",
    )
    parser.add_argument("--title", default="", help="title for plots and summary.md")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def _arms(text: str) -> list[str]:
    arms = [a.strip() for a in text.split(",") if a.strip()]
    bad = [a for a in arms if a not in ARMS]
    if bad or not arms:
        raise InputError(f"--arms must list state dtypes from {', '.join(ARMS)}; got {text!r}")
    if len(set(arms)) != len(arms):
        raise InputError(f"--arms lists an arm twice: {text!r}")
    return arms


def _model_path(model: str | None) -> str:
    if model:
        return model
    try:
        from evalkit import reference_model

        return str(reference_model.default_model_path())
    except (ImportError, AttributeError, NotImplementedError):
        raise InputError(
            "no --model given and the embedded reference model is not available; pass --model PATH"
        ) from None
    except (EvalkitError, FileNotFoundError) as exc:  # it says what is missing and what to do
        raise InputError(f"no --model given: {exc}") from None


def _command_line(args: argparse.Namespace) -> list[str]:
    """The resolved options as a command line (for the manifest; the same whether run from a
    shell or in-process)."""
    out = ["evalkit", "drift"]
    for key, value in vars(args).items():
        if key.startswith("_") or key == "command" or value is None or value is False:
            continue
        flag = "--" + key.replace("_", "-")
        out += [flag] if value is True else [flag, str(value)]
    return out


def _length(text: str) -> int:
    from evalkit.tasks.registry import parse_lengths

    values = parse_lengths(text)
    if len(values) != 1:
        raise InputError(f"--length takes one length, got {text!r}")
    return values[0]


def main(args: argparse.Namespace) -> int:
    import torch

    from evalkit.drift import inputs
    from evalkit.drift.driver import DriftConfig, run_drift
    from evalkit.drift.engine_adapter import EngineDriftModel

    arms = _arms(args.arms)
    length = _length(args.length)
    for name in ("chunk_size", "decode_block", "prompt_length"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name.replace('_', '-')} must be >= 1")
    if args.generate < 0:
        raise InputError("--generate must be >= 0")
    path = _model_path(args.model)
    out = Path(args.out) if args.out else Path("runs") / f"drift-{time.strftime('%Y%m%d-%H%M%S')}"
    if (out / "summary.json").exists() and not args.overwrite:
        raise InputError(f"{out} already holds a drift run; pass another --out (or --overwrite)")
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    max_len = max(length, min(length, args.prompt_length) + args.generate) + 1
    try:
        model = EngineDriftModel.load(
            path, device=device, max_len=max_len, chunk_size=args.chunk_size, decode_impl=args.decode_impl
        )
    except EvalkitError:
        raise
    except (OSError, ValueError) as exc:  # a missing or malformed checkpoint
        raise InputError(f"cannot load model {path}: {exc}") from None
    if args.input:
        ids, info = inputs.from_file(args.input, model.tokenize, length)
    elif args.task:
        ids, info = inputs.task_prompt(
            args.task, model.tokenizer, model.tokenize, length, args.seed, args.data_dir
        )
    elif args.random_tokens:
        ids, info = inputs.random_ids(model.vocab_size, length, args.seed)
    else:
        ids, info = inputs.gsm8k_text(model.tokenize, length, args.data_dir)
    if len(ids) < 2:
        raise InputError("the input has fewer than 2 tokens")
    cfg = DriftConfig(
        arms=arms,
        modes=["prefill", "decode"] if args.mode == "both" else [args.mode],
        chunk_size=args.chunk_size,
        decode_block=args.decode_block,
        generate=args.generate,
        prompt_length=args.prompt_length,
        title=args.title or Path(path).name,
    )
    summary = run_drift(
        model,
        torch.tensor(ids),
        cfg,
        out,
        input_info=info,
        command=_command_line(args),
        overwrite=args.overwrite,
        show_progress=not args.no_progress,
        plots=not args.no_plots,
    )
    print_summary(summary, out)
    for err in summary.get("errors") or []:
        print(f"evalkit drift: {err['error']}", file=sys.stderr)
    return 1 if summary.get("errors") else 0


def print_summary(summary: dict, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:  # piped or logged: do not squeeze the table into 80 columns
        console = Console(width=150)
    t = Table(title=f"drift vs the fp32 arm ({summary['config']['input']['length']} tokens)")
    for col in (
        "mode",
        "arm",
        "mean KL",
        "p99 KL",
        "top-1 agree",
        "mean |ΔNLL|",
        "state rel. err (end)",
        "max |state|",
        "KL trend (95% CI of the slope)",
    ):
        t.add_column(col)
    for mode, tf in summary["teacher_forced"].items():
        for arm, a in tf["arms"].items():
            st = a.get("state") or {}
            g = a["growth"]["kl"]
            trend = g["verdict"]
            if g["slope"] is not None and g["verdict"] == "flat":
                trend = f"flat [{g['ci_low']:.2f}, {g['ci_high']:.2f}]"
            elif g["slope"] is not None:
                trend = f"{g['verdict']} L^{g['slope']:.2f} [{g['ci_low']:.2f}, {g['ci_high']:.2f}]"
            t.add_row(
                mode,
                arm,
                _g(a["kl"]["mean"]),
                _g(a["kl"]["p99"]),
                "–" if a["top1_agreement"] is None else f"{100 * a['top1_agreement']:.2f}%",
                _g(a["abs_dnll"]["mean"]),
                _g(st.get("final_rel_fro_max")),
                _g(st.get("max_abs")),
                trend,
            )
    console.print(t)
    fr = summary.get("free_running")
    if fr:
        f = Table(
            title=f"free running: {fr['n_tokens']} greedy tokens from a {fr['prompt_tokens']}-token prompt"
        )
        for col in ("arm", "first divergence", "token agreement", "flags"):
            f.add_column(col)
        for arm, a in fr["arms"].items():
            div = "never" if a["first_divergence"] is None else str(a["first_divergence"])
            f.add_row(arm, div, f"{100 * a['token_agreement']:.1f}%", ", ".join(a["flags"]) or "none")
        console.print(f)
    console.print(f"run directory: {out}  (summary.md, summary.json, buckets.csv, states.csv, *.png)")


def _g(x) -> str:
    return "–" if x is None else f"{x:.3g}"
