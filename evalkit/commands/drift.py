"""`evalkit drift`: how state error and output divergence grow with sequence length.

Teacher-forced, over --prompts independent prompts (default 16, drawn from a long-context task
at --length, seeds recorded): each prompt runs through an fp32-state arm and each arm under test
in lockstep, in `prefill` mode (chunked: the state is rounded once per chunk) and/or `decode`
mode (token by token: rounded after every token), plus the A/A floor arm (fp32 computed another
way, `evalkit.drift.floor`); every position's next-token distribution and, at log-spaced
checkpoints, every KDA layer's state are compared with fp32's. Everything is summarised across
prompts (mean and 95% t-CI; growth exponents fitted per prompt, with sensitivity rows) and
ends in pasteable verdicts. Free-running: each arm greedily generates --generate tokens from the
first prompt. `evalkit drift link BASELINE_RUN CANDIDATE_RUN` relates per-question divergence
to accuracy flips (`evalkit.drift.link`); `evalkit drift --report-only RUN_DIR` refits a saved
study (`evalkit.drift.refit`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from evalkit.arm import DEFAULT_PREFILL_CHUNK
from evalkit.commands.kernels_option import add_kernels_argument, kernels_from_args
from evalkit.errors import EvalkitError, InputError
from evalkit.kernel_choice import parse_kernels
from evalkit.reference_model import default_model_path
from evalkit.store.writer import MANIFEST

WEIGHT_DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="[link]")
    link = actions.add_parser(
        "link",
        help="per-question divergence of two `evalkit run` arms against their correctness flips",
        description="Replay each question's baseline answer teacher-forced in decode mode under both "
        "arms' state formats; test whether questions whose correctness flips diverged more.",
    )
    from evalkit.drift.link_cli import add_link_arguments

    add_link_arguments(link)
    parser.add_argument(
        "--model", help="Kimi-Linear or Qwen GDN checkpoint dir or hub id (default: the reference model)"
    )
    parser.add_argument(
        "--arms",
        default="fp16,bf16",
        help="arms compared with the fp32 arm, comma-separated, in `evalkit run --arm` syntax "
        "(FORMAT[@chunk=N][@intra=DTYPE]: fp32, fp16, bf16, fp8_e4m3, fp8_e5m2, mN, with -sr/-rtz; the "
        "engine refuses what it cannot store yet), all with one chunk; default fp16,bf16. fp32 here "
        "runs a second identical fp32 arm: a self-check that must give exactly 0",
    )
    parser.add_argument(
        "--prompts",
        type=int,
        help="independent prompts (default 16; 1 with --input): every figure gets a between-prompt CI",
    )
    parser.add_argument(
        "--no-floor",
        action="store_true",
        help="skip the A/A floor arm (fp32 computed with other chunk/block cuts)",
    )
    parser.add_argument(
        "--weights-dtype",
        choices=tuple(WEIGHT_DTYPES),
        help="model weights/activations dtype (default bf16 on GPU, fp32 on CPU); fp32 removes the "
        "bf16 activation floor when the question is the state alone",
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
        default=None,
        help="prefill mode: tokens per prefill call, i.e. per state rounding (default: the arms' "
        f"@chunk, else {DEFAULT_PREFILL_CHUNK} as every arm; the same as `@chunk=N` on every arm)",
    )
    add_kernels_argument(parser)
    _add_input_arguments(parser)
    _add_run_arguments(parser)


def _add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the prompts come from, how long they are, and free running from the first."""
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--input", metavar="FILE", help="a text file, or a .json list of token ids")
    src.add_argument("--gsm8k-text", action="store_true", help="GSM8K train text, one start item per prompt")
    src.add_argument(
        "--task",
        metavar="NAME",
        help="docs 0..N-1 of a long-context task (`evalkit tasks`) built for --length tokens "
        "(default kv_retrieval)",
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
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of --task / --random-tokens (prompt i: seed + i) (0)"
    )
    parser.add_argument("--data-dir", help="folder holding GSM8K train.jsonl (also EVALKIT_DATA)")


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The run directory (resume, refit), the device and decode implementation, the outputs."""
    parser.add_argument("--out", help="run directory (default runs/drift-<time>)")
    parser.add_argument("--overwrite", action="store_true", help="replace a drift run already in --out")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the drift run in --out (same model, options and prompts; --prompts may grow): "
        "the prompts it finished are not run again",
    )
    parser.add_argument(
        "--allow-source-change",
        action="store_true",
        help="with --resume: continue a run made by other evalkit sources or library versions "
        "(refused by default, as `evalkit run` refuses it; the change is recorded in the manifest)",
    )
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
    parser.add_argument(
        "--report-only",
        metavar="RUN_DIR",
        help="refit a saved drift study from its checkpoint with this version's analysis "
        "(summary, verdicts, CSVs, plots; no model, no GPU); the measured rows are kept",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def _arms(text: str, chunk_size: int | None) -> tuple[list[str], int]:
    """(the arms' names, the one chunk they share): full arms through `evalkit.arm.parse_arm`
    (`fp16@chunk=64`), named without their chunk, which the study holds once (`--chunk-size`
    says it too); the engine refuses the formats it cannot store yet when a session opens."""
    from evalkit.arm import Arm, parse_arm
    from evalkit.drift.floor import AA_ARM

    names = [a.strip() for a in text.split(",") if a.strip()]
    if not names:
        raise InputError(f"--arms must list arms; got {text!r}")
    if AA_ARM in names:
        raise InputError(f"--arms: {AA_ARM} is the A/A floor arm, added unless --no-floor")
    try:
        parsed = [parse_arm(a) for a in names]
    except InputError as exc:
        raise InputError(f"--arms: {exc}") from None
    given = {a.prefill_chunk_size for a, raw in zip(parsed, names) if "@chunk=" in raw.lower()}
    if chunk_size is not None:
        given.add(chunk_size)
    if len(given) > 1:
        raise InputError(f"drift compares arms at one chunk: --arms/--chunk-size give {sorted(given)}")
    chunk = given.pop() if given else DEFAULT_PREFILL_CHUNK
    arms = [Arm(a.format, intra_chunk_dtype=a.intra_chunk_dtype).label for a in parsed]
    if len(set(arms)) != len(arms):
        raise InputError(f"--arms lists an arm twice: {text!r}")
    return arms, chunk


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
    if getattr(args, "action", None) == "link":
        from evalkit.drift.link_cli import link_main

        return link_main(args)
    if args.report_only:
        from evalkit.drift.refit import refit_study

        summary = refit_study(args.report_only, plots=not args.no_plots)
        print_summary(summary, Path(args.report_only))
        return 0
    from evalkit.drift.study import StudyConfig, run_study

    arms, args.chunk_size = _arms(args.arms, args.chunk_size)
    length, n_prompts = _checked_sizes(args)
    path = args.model or str(default_model_path())  # a missing reference model: its one-line error
    out = Path(args.out) if args.out else Path("runs") / f"drift-{time.strftime('%Y%m%d-%H%M%S')}"
    if (out / MANIFEST).exists() and not (args.overwrite or args.resume):
        raise InputError(f"{out} already holds a drift run; pass another --out (or --resume, --overwrite)")
    model = _load_model(args, path, length)
    prompts = _prompts(args, model, length, n_prompts)
    cfg = StudyConfig(
        arms=arms,
        modes=["prefill", "decode"] if args.mode == "both" else [args.mode],
        chunk_size=args.chunk_size,
        decode_block=args.decode_block,
        floor=not args.no_floor,
        generate=args.generate,
        prompt_length=args.prompt_length,
        title=args.title or Path(path).name,
    )
    summary = run_study(
        model,
        prompts,
        cfg,
        out,
        command=_command_line(args),
        overwrite=args.overwrite,
        show_progress=not args.no_progress,
        plots=not args.no_plots,
        resume=args.resume,
        allow_source_change=args.allow_source_change,
    )
    print_summary(summary, out)
    for err in summary.get("errors") or []:
        print(f"evalkit drift: {err['error']}", file=sys.stderr)
    return 1 if summary.get("errors") else 0


def _checked_sizes(args: argparse.Namespace) -> tuple[int, int]:
    """(length, number of prompts), refusing sizes that cannot run."""
    length = _length(args.length)
    for name in ("chunk_size", "decode_block", "prompt_length"):
        if getattr(args, name) < 1:
            raise InputError(f"--{name.replace('_', '-')} must be >= 1")
    if args.generate < 0:
        raise InputError("--generate must be >= 0")
    n_prompts = args.prompts if args.prompts is not None else (1 if args.input else 16)
    if n_prompts < 1:
        raise InputError("--prompts must be >= 1")
    if args.input and n_prompts > 1:
        raise InputError(
            "--input is one prompt; use --task, --gsm8k-text or --random-tokens for --prompts > 1"
        )
    return length, n_prompts


def _load_model(args: argparse.Namespace, path: str, length: int):
    """The model behind the backends' state probe (`evalkit.backends.local_probe`)."""
    import torch

    from evalkit.backends.local_probe import EngineDriftModel
    from evalkit.kernels.errors import KernelError

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    max_len = max(length, min(length, args.prompt_length) + args.generate) + 1
    kernels = kernels_from_args(args)
    if args.weights_dtype:  # the older spelling of --kernels weights=
        kernels = parse_kernels(f"weights={args.weights_dtype}", base=kernels)
    dtype = kernels.torch_weight_dtype()
    try:
        model = EngineDriftModel.load(
            path,
            device=device,
            dtype=dtype,
            max_len=max_len,
            chunk_size=args.chunk_size,
            decode_impl=args.decode_impl,
            kernels=kernels,
        )
    except (EvalkitError, KernelError):
        raise
    except (OSError, ValueError) as exc:  # a missing or malformed checkpoint
        raise InputError(f"cannot load model {path}: {exc}") from None
    return model


def _prompts(args: argparse.Namespace, model, length: int, n_prompts: int) -> list:
    """The study's prompts, all cut to one length."""
    from evalkit.drift import inputs
    from evalkit.drift import prompts as P

    if args.input:
        ids, info = inputs.from_file(args.input, model.tokenize, length)
        prompts = [P.Prompt(ids, info)]
    elif args.random_tokens:
        prompts = P.random_prompts(model.vocab_size, length, n_prompts, args.seed)
    elif args.gsm8k_text:
        prompts = P.gsm8k_prompts(model.tokenize, length, n_prompts, args.seed, args.data_dir)
    else:
        task = args.task or "kv_retrieval"
        prompts = P.task_prompts(
            task,
            model.tokenizer,
            model.tokenize,
            length,
            n_prompts,
            args.seed,
            args.data_dir,
            show_progress=not args.no_progress,
        )
    return P.common_length(prompts)


def print_summary(summary: dict, out: Path) -> None:
    from rich.console import Console
    from rich.table import Table

    from evalkit.drift.result import DriftSummary
    from evalkit.drift.study_report import _ci, _slope

    console = Console()
    if not console.is_terminal:  # piped or logged: do not squeeze the table into 80 columns
        console = Console(width=160)
    cfg = summary["config"]
    t = Table(
        title=f"drift vs the fp32 arm: {cfg['n_prompts']} prompts of {cfg['input']['length']} tokens "
        "(mean [95% CI across prompts])"
    )
    for col in (
        "mode",
        "arm",
        "prompts",
        "mean KL",
        "KL ÷ A/A floor (end)",
        "top-1 agree %",
        "state rel. err (end)",
    ):
        t.add_column(col)
    t.add_column("KL exponent (main fit)")
    for mode, st in DriftSummary.from_dict(summary).study.items():
        for arm, a in st.arms.items():
            fl = a.floor.kl_last_bucket if a.floor else None
            ratio = "–" if fl is None or fl.ratio is None else f"{fl.ratio:.3g}"
            if fl is not None and fl.ratio is None and fl.den_zero:
                ratio = "floor = 0"
            t.add_row(
                mode,
                arm,
                str(st.n_prompts),
                _ci(a.mean_kl),
                ratio,
                _ci(a.top1_agreement, ".2f", 100),
                _ci(a.state_rel_err_end),
                _slope(a.growth["kl"]["main"]),
            )
    console.print(t)
    for v in summary.get("verdicts") or []:
        console.print(f"- {v['arm']}, {v['text']}", highlight=False, markup=False)
        for c in v["caveats"]:
            console.print(f"    CAVEAT: {c}.", highlight=False, markup=False)
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
    console.print(f"run directory: {out}  (summary.md, summary.json, buckets.csv, prompt_results.csv, *.png)")
