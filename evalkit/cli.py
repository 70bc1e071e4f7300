"""The `evalkit` command line: one subcommand per module under `evalkit.commands`.

Each command module exposes `register(subparsers)` and is imported only when its
subcommand runs, so `evalkit compare` never pays for torch's import.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from evalkit import __version__
from evalkit.errors import EvalkitError

# subcommand -> (module under evalkit.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "evaluate one arm (a state dtype, or a remote server) and write a run directory"),
    "compare": ("compare", "paired comparison of two runs: McNemar, CIs, non-inferiority, power"),
    "drift": ("drift", "how state error and output divergence grow with sequence length"),
    "serve": ("serve", "OpenAI-compatible HTTP server over the in-process engine"),
    "tasks": ("tasks", "list the tasks, their metrics and default lengths"),
    "verify-kernels": ("verify_kernels", "fp32-twin check of the 16-bit state kernels"),
    "recipes": ("recipes", "how to start vLLM/SGLang/ATOM servers for each arm"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evalkit", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"evalkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # Two passes: find the subcommand, then let its module add its own arguments.
    known, _ = parser.parse_known_args(argv)
    if not getattr(known, "command", None):
        parser.print_help()
        return 2
    module = importlib.import_module(f"evalkit.commands.{known._module}")
    sub_parser = argparse.ArgumentParser(
        prog=f"evalkit {known.command}", description=COMMANDS[known.command][1]
    )
    module.add_arguments(sub_parser)
    args = sub_parser.parse_args(argv[1:])
    try:
        return int(module.main(args) or 0)
    except EvalkitError as exc:
        print(f"evalkit {known.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"evalkit {known.command}: interrupted; completed samples are on disk, re-run to resume",
              file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
