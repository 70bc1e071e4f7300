"""`evalkit tasks`: list every task (description, metrics, default lengths), or show one
generated example with `--show TASK`."""

from __future__ import annotations

import argparse
import json
import os

from evalkit.errors import InputError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the list as JSON")
    parser.add_argument("--show", metavar="TASK", help="build and print one example of TASK")
    parser.add_argument(
        "--length", default="4k", help="target length for --show (default 4k; K for longdecode)"
    )
    parser.add_argument(
        "--tokenizer", help="tokenizer (local path or hub name) for --show; default: a small test BPE"
    )
    parser.add_argument("--apply-chat-template", action="store_true", help="--show with the chat template")
    parser.add_argument(
        "--data-dir",
        default=os.environ.get("EVALKIT_DATA"),
        help="folder with GSM8K train.jsonl/test.jsonl (default $EVALKIT_DATA, else the hub)",
    )
    parser.add_argument(
        "--chars", type=int, default=200, help="characters of the prompt's head and tail to show"
    )


def _fmt_lengths(lengths: list[int] | None, family: str) -> str:
    if not lengths:
        return "-"
    if family == "gsm8k_long" and max(lengths) <= 200:
        return "K=" + ",".join(map(str, lengths))
    return ",".join(f"{n // 1024}k" if n % 1024 == 0 else str(n) for n in lengths)


def main(args: argparse.Namespace) -> int:
    from evalkit.tasks.registry import list_tasks

    if args.show:
        return _show(args)
    infos = list_tasks()
    if args.json:
        print(json.dumps([info.__dict__ for info in infos], indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="evalkit tasks", show_lines=False)
    for col in ("task", "description", "metrics", "default lengths", "max new"):
        table.add_column(col, overflow="fold")
    for info in infos:
        metrics = ", ".join(m.replace("exact_match,", "em:") for m in info.metrics)
        table.add_row(
            info.name,
            info.description,
            metrics,
            _fmt_lengths(info.default_lengths, info.family),
            str(info.max_new_tokens or "-"),
        )
    console = Console()
    if not console.is_terminal:
        console = Console(width=160)
    console.print(table)
    print(
        "Any lm-eval generate_until task also runs by name (evalkit run --tasks NAME), from "
        "--include-path DIR first, then lm-eval's own tasks."
    )
    return 0


def _load_tokenizer(name: str | None, data_dir: str | None):
    if not name:
        from evalkit.tasks.tiny_tokenizer import tiny_tokenizer

        return tiny_tokenizer(data_dir=data_dir)
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name)
    except OSError as exc:
        raise InputError(f"cannot load tokenizer {name!r}: {str(exc).splitlines()[0]}") from exc


def _show(args: argparse.Namespace) -> int:
    from evalkit.tasks.registry import get_task, parse_lengths

    task = get_task(args.show)
    lengths = None if task.default_lengths is None else parse_lengths(args.length)
    needs_tokenizer = task.default_lengths is not None or args.apply_chat_template or args.tokenizer
    tokenizer = _load_tokenizer(args.tokenizer, args.data_dir) if needs_tokenizer else None
    req = task.requests(
        tokenizer=tokenizer,
        lengths=lengths,
        limit=1,
        seed=None,
        data_dir=args.data_dir,
        apply_chat_template=args.apply_chat_template,
    )[0]
    prompt = req.prompt if isinstance(req.prompt, str) else json.dumps(req.prompt)
    n = args.chars
    print(
        f"task {req.task}  length {req.length}  prompt tokens {req.meta.get('length')}  "
        f"max_new_tokens {req.max_new_tokens}  until {req.until}"
    )
    print(f"--- prompt head ---\n{prompt[:n]}")
    if len(prompt) > 2 * n:
        print(f"--- ... {len(prompt) - 2 * n} characters ... ---")
    print(f"--- prompt tail ---\n{prompt[-n:] if len(prompt) > n else ''}")
    targets = [d.target for d in req.docs]
    print(
        f"--- target{'s' if len(targets) > 1 else ''} ---\n"
        + " | ".join(t[-80:] for t in targets[:5])
        + (" | ..." if len(targets) > 5 else "")
    )
    return 0
