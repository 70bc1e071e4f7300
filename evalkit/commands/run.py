"""`evalkit run`: evaluate one arm and write a run directory (resumable).

Local: `--model PATH --arm fp16` runs the in-process engine with its recurrent state stored in
fp16 (`--arm` takes any `evalkit.arm` arm: `m7`, `bf16-rtz@chunk=64`, ...).
Remote: `--server URL [--server URL2 …] --arm LABEL --arm-note "how it was started"`
asks OpenAI-compatible replicas. With neither, the embedded reference model runs.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from evalkit.commands.kernels_option import add_kernels_argument, kernels_from_args
from evalkit.errors import InputError
from evalkit.store.headroom import headroom_line
from evalkit.store.writer import HEADROOM


def _split(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out


def data_parallel_arg(value: str) -> int | str:
    """`--data-parallel`: a whole number of engines, or "auto"."""
    if value.strip().lower() == "auto":
        return "auto"
    if not value.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number or 'auto', got {value!r}")
    return int(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="FILE",
        help="YAML file of options: keys are the long options below (tasks: [gsm8k, passkey]); "
        "options on the command line win",
    )
    _add_source_arguments(parser.add_argument_group("what to evaluate"))
    _add_question_arguments(parser.add_argument_group("questions"))
    _add_sampling_arguments(parser.add_argument_group("sampling (default: greedy)"))
    _add_output_arguments(parser.add_argument_group("output"))
    _add_remote_arguments(parser.add_argument_group("remote (--server)"))
    _add_local_arguments(parser.add_argument_group("local engine"))


def _add_source_arguments(src: argparse._ArgumentGroup) -> None:
    src.add_argument(
        "--model",
        help="local checkpoint dir or hub id (local run); with --server, the "
        "served model's name (and its tokenizer if it is a local dir)",
    )
    src.add_argument(
        "--server",
        action="append",
        metavar="URL",
        help="OpenAI-compatible server (repeat or comma-separate for replicas)",
    )
    src.add_argument(
        "--arm",
        required=True,
        help="local run: the arm, FORMAT[@chunk=N][@intra=DTYPE] (fp32, fp16, bf16, fp8_e4m3, m7, "
        "bf16-rtz@chunk=64, ...; see evalkit/arm.py); with --server: any label",
    )
    src.add_argument("--arm-note", help="free text recorded with the arm, e.g. 'ATOM_GDN_SSM_DTYPE=fp16'")
    src.add_argument(
        "--tokenizer",
        help="tokenizer for --server runs (long-context tasks size prompts in the model's tokens)",
    )
    src.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="let Python code shipped with the tokenizer or checkpoint run (off by default; recorded)",
    )


def _add_question_arguments(q: argparse._ArgumentGroup) -> None:
    q.add_argument(
        "--tasks",
        help="comma-separated task names (`evalkit tasks` lists them); "
        "default: the reference model's suite, else gsm8k",
    )
    q.add_argument("--lengths", help="context lengths for long-context tasks, e.g. 4k,16k,64k")
    q.add_argument("--limit", type=int, help="first N questions per task (and length)")
    q.add_argument("--seed", type=int, help="seed of the task generators (and sent to servers)")
    q.add_argument("--data-dir", help="local data folder (e.g. a GSM8K copy); also EVALKIT_DATA")
    q.add_argument(
        "--plan",
        metavar="PLAN.yaml",
        help="the pre-registered plan (evalkit plan --out) this run belongs to: its name and hash go "
        "in the manifest, so `compare --plan` refuses a plan edited after the run started",
    )
    q.add_argument(
        "--apply-chat-template",
        action="store_true",
        help="chat-formatted prompts (chat completions on a server)",
    )
    q.add_argument(
        "--task-option",
        action="append",
        metavar="[TASK:]KEY=VALUE",
        help="a task's own option, e.g. gsm8k:num_fewshot=0 (without TASK: every task gets it; "
        "recorded in the task config and its hash)",
    )
    q.add_argument(
        "--include-path",
        "--include_path",
        action="append",
        metavar="DIR",
        help="folder of lm-eval task YAMLs (as lm_eval --include_path); --tasks may name any lm-eval "
        "generate_until task, found here first, then in lm-eval's own tasks",
    )
    q.add_argument(
        "--max-new-tokens",
        type=int,
        help="cap every task's generation length (smoke tests; recorded in the manifest)",
    )
    q.add_argument(
        "--gold-logprob",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also score each question's reference answer (gold_* fields in samples.jsonl; the paired "
        "measure of `compare`). Default on for a local run (teacher-forced in decode mode from a copy "
        "of the post-prompt state: no second prefill), off with --server (one more request per "
        "question, from the server's prompt log-probabilities where it offers them)",
    )


def _add_sampling_arguments(smp: argparse._ArgumentGroup) -> None:
    smp.add_argument(
        "--temperature",
        type=float,
        help="sample at this temperature (> 0) with coupled randomness: both arms of a comparison "
        "draw the same random numbers per question, sample and position (part of the run's identity)",
    )
    smp.add_argument("--top-p", type=float, help="nucleus truncation with --temperature (default 1: off)")
    smp.add_argument("--top-k", type=int, help="top-k truncation with --temperature (default 0: off)")
    smp.add_argument(
        "--samples-per-question",
        type=int,
        metavar="K",
        help="K samples of every question with --temperature (default 1); compare analyses them "
        "clustered by question",
    )
    smp.add_argument(
        "--sampling-seed",
        type=int,
        metavar="S",
        help="seed of the coupled randomness with --temperature (default 0); both arms must share it",
    )


def _add_output_arguments(o: argparse._ArgumentGroup) -> None:
    o.add_argument("--out", help="run directory (default runs/<model>-<arm>); re-running resumes it")
    o.add_argument(
        "--allow-source-change",
        action="store_true",
        help="resume a run made by other evalkit sources or library versions (refused by default; "
        "the change is recorded in the manifest)",
    )
    o.add_argument(
        "--no-prompts",
        action="store_true",
        help="leave the prompt text out of samples.jsonl (its prompt_hash stays): a 128k-token "
        "question stores about 0.5 MB",
    )
    o.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress output (default: a bar on a terminal, else a plain line every 30 s)",
    )


def _add_remote_arguments(r: argparse._ArgumentGroup) -> None:
    r.add_argument("--concurrency", type=int, default=16, help="in-flight requests per server (16)")
    r.add_argument(
        "--request-order",
        metavar="given|shuffled:SEED",
        help="the order requests are sent in: the task's (given, the default) or a seeded permutation; "
        "with another --concurrency, a replicate of a server run for its numerics floor (compare --floor)",
    )
    r.add_argument("--timeout", type=float, default=600.0, help="per-request timeout, seconds (600)")
    r.add_argument(
        "--max-retries",
        type=int,
        default=5,
        help="retries on 429/5xx/timeouts/dropped connections before recording an error (5)",
    )
    r.add_argument(
        "--api-key",
        help="key sent as `Authorization: Bearer` to every endpoint (default: OPENAI_API_KEY); never stored",
    )


def _add_local_arguments(loc: argparse._ArgumentGroup) -> None:
    add_kernels_argument(loc)
    loc.add_argument("--max-num-seqs", type=int, help="most sequences decoded together")
    loc.add_argument(
        "--device",
        help="cpu | cuda | cuda:N (default: cuda if available); several, comma-separated "
        "(cuda:0,cuda:1): one engine process per device, the questions sharded among them",
    )
    loc.add_argument(
        "--data-parallel",
        type=data_parallel_arg,
        metavar="N|auto",
        help="N engine processes (on cuda:0 … cuda:N-1, or N on the one --device); auto: one per "
        "GPU, or one per CPU core on the CPU (same samples as one engine)",
    )


def default_out(model: str | None, servers: list[str], arm: str) -> Path:
    if servers:
        name = model or "server"
    else:
        name = model or "reference"
    name = Path(name.rstrip("/")).name or "model"
    return Path("runs") / re.sub(r"[^A-Za-z0-9._-]+", "_", f"{name}-{arm}")


def parse_task_options(items: list[str] | None, tasks: list[str]) -> dict[str, dict[str, Any]]:
    """["gsm8k:num_fewshot=0", "max_new_tokens=32"] -> {task: {key: value}} (JSON values, else text)."""
    out: dict[str, dict[str, Any]] = {t: {} for t in tasks}
    for item in items or []:
        target, sep, assignment = item.partition(":") if ":" in item.split("=", 1)[0] else ("", "", item)
        key, eq, raw = assignment.partition("=")
        if not eq or not key.strip():
            raise InputError(f"--task-option {item!r}: expected [TASK:]KEY=VALUE")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        except RecursionError:
            raise InputError(f"--task-option {item!r}: the value is nested too deeply") from None
        names = [target] if sep else tasks
        for name in names:
            if name not in out:
                raise InputError(
                    f"--task-option {item!r}: {name!r} is not among --tasks ({', '.join(tasks)})"
                )
            out[name][key.strip()] = value
    return out


def with_include_path(
    options: dict[str, dict[str, Any]], paths: list[str] | None
) -> dict[str, dict[str, Any]]:
    """Hand --include-path to the tasks evalkit does not define (lm-eval's, found through it)."""
    if paths:
        from evalkit.tasks.registry import task_names

        builtin = set(task_names())
        for name, opts in options.items():
            if name not in builtin:
                opts.setdefault("include_path", list(paths))
    return options


def sampling_from_args(args: argparse.Namespace) -> Any:
    """A `SamplingSpec` when --temperature > 0, else None (greedy); a sampling option without a
    temperature is refused rather than ignored."""
    from evalkit.runner.sampling import SamplingSpec

    given = [
        f"--{n.replace('_', '-')}"
        for n in ("top_p", "top_k", "samples_per_question", "sampling_seed")
        if getattr(args, n, None) is not None
    ]
    t = getattr(args, "temperature", None)
    if t is None or t == 0:
        if given:
            raise InputError(f"{', '.join(given)} need(s) --temperature > 0 (a greedy run draws no samples)")
        return None
    return SamplingSpec(
        temperature=t,
        top_p=1.0 if args.top_p is None else args.top_p,
        top_k=args.top_k or 0,
        samples=1 if args.samples_per_question is None else args.samples_per_question,
        seed=args.sampling_seed or 0,
    )


def _check(args: argparse.Namespace) -> None:
    for flag in ("limit", "max_num_seqs", "max_new_tokens"):
        v = getattr(args, flag)
        if v is not None and v < 1:
            raise InputError(f"--{flag.replace('_', '-')} must be at least 1")
    if args.concurrency < 1:
        raise InputError("--concurrency must be at least 1")
    if args.request_order is not None:
        from evalkit.backends.request_order import parse_request_order

        parse_request_order(args.request_order)
        if not _split(args.server):
            raise InputError("--request-order is for --server runs (the local engine is batch-invariant)")
    for folder in args.include_path or []:  # lm-eval would skip a missing one without a word
        if not Path(folder).expanduser().is_dir():
            raise InputError(f"--include-path {folder}: not a folder")
    if args.tasks is not None and not _split([args.tasks]):  # before any model loads
        raise InputError(f"--tasks {args.tasks!r} names no task (`evalkit tasks` lists them)")
    if args.lengths:
        from evalkit.tasks.registry import parse_lengths

        parse_lengths(args.lengths)


def main(args: argparse.Namespace) -> int:
    from evalkit.runner import RunSpec, run_evaluation

    _check(args)
    sampling = sampling_from_args(args)
    plan = None
    if getattr(args, "plan", None):
        from evalkit.compare.plan_file import load_plan

        plan = load_plan(args.plan)  # before any model loads: an edited plan is refused here
    servers = _split(args.server)
    setup = _setup(args, servers)
    tasks, lengths = _tasks_and_lengths(args, setup)
    out = Path(args.out) if args.out else default_out(args.model, servers, args.arm)
    spec = RunSpec(
        tasks=tasks,
        task_options=with_include_path(parse_task_options(args.task_option, tasks), args.include_path),
        out_dir=out,
        lengths=lengths,
        limit=args.limit,
        seed=args.seed,
        data_dir=args.data_dir,
        apply_chat_template=args.apply_chat_template,
        max_new_tokens=args.max_new_tokens,
        gold_logprob=(not servers) if args.gold_logprob is None else args.gold_logprob,
        store_prompts=not args.no_prompts,
        manifest=_manifest(args, setup, plan, sampling, servers),
        allow_source_change=args.allow_source_change,
        sampling=sampling,
    )
    try:
        outcome = run_evaluation(
            spec,
            setup.backend,
            setup.tokenizer,
            progress=not args.no_progress,
            after_generate=setup.after_generate,
        )
    finally:
        setup.backend.close()
    return _report(outcome, setup, out)


def _setup(args: argparse.Namespace, servers: list[str]) -> Any:
    """The backend of the run: the servers' replicas, else the local engine (options of the other
    kind refused)."""
    from evalkit.runner import setup as su

    if servers:
        return su.remote_setup(
            servers,
            args.model,
            args.tokenizer,
            args.arm,
            args.arm_note,
            args.concurrency,
            args.timeout,
            args.max_retries,
            args.seed,
            trust_remote_code=args.trust_remote_code,
            api_key=args.api_key,
            request_order=args.request_order or "given",
        )
    for flag in ("tokenizer",):
        if getattr(args, flag):
            raise InputError(f"--{flag} is for --server runs (a local model brings its own)")
    if args.api_key:
        raise InputError("--api-key is for --server runs")
    return su.local_setup(
        args.model,
        args.arm,
        args.arm_note,
        args.device,
        args.max_num_seqs,
        trust_remote_code=args.trust_remote_code,
        data_parallel=args.data_parallel,
        kernels=kernels_from_args(args),
    )


def _tasks_and_lengths(args: argparse.Namespace, setup: Any) -> tuple[list[str], list[int] | None]:
    """The tasks and lengths asked; the reference model's suite fills what the command leaves out
    (also `args.limit` and `args.seed`, each option the command gives overriding the suite's)."""
    from evalkit.runner import setup as su

    suite = setup.default_suite
    tasks = _split([args.tasks]) if args.tasks is not None else (list(suite.tasks) if suite else ["gsm8k"])
    lengths = None
    if args.lengths:
        from evalkit.tasks.registry import parse_lengths

        lengths = parse_lengths(args.lengths)
    elif suite:
        lengths = list(suite.lengths)
    su.check_lengths(lengths, setup.backend)
    if suite:
        args.limit = args.limit if args.limit is not None else suite.limit
        args.seed = args.seed if args.seed is not None else suite.seed
    return tasks, lengths


def _manifest(
    args: argparse.Namespace, setup: Any, plan: Any, sampling: Any, servers: list[str]
) -> dict[str, Any]:
    """The run's manifest fields from the command (secrets masked), the backend, the sampling and
    the plan."""
    from evalkit.redact import redact_command
    from evalkit.runner import setup as su

    command = ["evalkit", "run", *sys.argv[2:]] if sys.argv[1:2] == ["run"] else sys.argv
    command = redact_command(command)
    manifest = su.base_manifest_fields(command)
    if getattr(args, "config_options", None):  # `command` names the file; keep what it said
        manifest["config_file"] = {"path": args.config, "options": args.config_options}
    manifest.update(
        model=setup.model, arm=setup.arm, backend=setup.backend.describe(), seeds={"task_seed": args.seed}
    )
    if setup.kernels is not None:
        manifest["kernels"] = setup.kernels
    if sampling is not None and servers:  # each request carries its own seed and temperature
        manifest["backend"].update(temperature=sampling.temperature, seed="per request (see sampling)")
    if plan is not None:
        manifest["plan"] = plan.identity()
    return manifest


def _report(outcome: Any, setup: Any, out: Path) -> int:
    """The summary table and the closing lines; 1 when every request failed (not a result)."""
    from evalkit.runner.table import render_summary

    print(render_summary(outcome.summary, title=f"{setup.arm['label']}: {out}"))
    if (Path(out) / HEADROOM).exists():  # the local engine's state magnitudes (evalkit.store.headroom)
        print(headroom_line(json.loads((Path(out) / HEADROOM).read_text())))
    if outcome.latency_line:
        print(outcome.latency_line)
    # the closing line: what was stored and where (the last line a user and a script read)
    print(
        f"{outcome.stored} new samples ({outcome.skipped} already on disk), "
        f"{outcome.prompt_tokens_per_s:.1f} prompt tok/s, {outcome.tokens_per_s:.1f} generated tok/s, "
        f"{outcome.wall_s:.1f} s -> {out}"
    )
    run_info = getattr(setup.backend, "run_info", dict)()
    fps = run_info.get("system_fingerprints") or []
    if len(fps) > 1:
        print(
            f"evalkit run: warning: the server(s) reported {len(fps)} different system_fingerprints "
            f"({', '.join(fps)}): were all replicas started the same way?",
            file=sys.stderr,
        )
    if outcome.errors and outcome.errors == outcome.stored:  # nothing was answered: not a result
        print(
            f"evalkit run: error: every request failed ({outcome.errors} of {outcome.stored} questions "
            f"ended with an error; see `error` in {out}/samples.jsonl); re-run the command to retry them",
            file=sys.stderr,
        )
        return 1
    if outcome.errors:
        print(
            f"evalkit run: warning: {outcome.errors} questions ended with an error and are not scored "
            f"(see `error` in {out}/samples.jsonl); compare excludes them",
            file=sys.stderr,
        )
    return 0
