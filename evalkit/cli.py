"""The `evalkit` command line: one subcommand per module under `evalkit.commands`.

Each command module exposes `add_arguments(parser)` and `main(args)`, and is imported only when
its subcommand runs, so `evalkit compare` never pays for torch's import.
"""

from __future__ import annotations

import argparse
import importlib
import sys

import evalkit
from evalkit import __version__
from evalkit.config_file import parse_with_config
from evalkit.errors import is_user_error
from evalkit.extras import MissingExtraError, missing_extra_message
from evalkit.redact import mask_text

# subcommand -> (module under evalkit.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("run", "evaluate one arm (a state format, or a remote server) and write a run directory"),
    "sweep": ("sweep", "run a list of arms (e.g. fp32,m10,m7,m5,m3) and report the bits of margin"),
    "ab": (
        "ab",
        "baseline and candidate arms in stages, each plan cell stopping once a sequential look decides",
    ),
    "compare": ("compare", "paired comparison of two runs: McNemar, CIs, non-inferiority, power"),
    "plan": ("plan", "questions per cell needed to show non-inferiority (or detect a loss) with 80%% power"),
    "drift": ("drift", "how state error and output divergence grow with sequence length"),
    "serve": ("serve", "OpenAI-compatible HTTP server over the in-process engine"),
    "tasks": ("tasks", "list the tasks, their metrics and default lengths"),
    "verify-kernels": ("verify_kernels", "fp32-twin check of the 16-bit state kernels"),
    "recipes": ("recipes", "how to start vLLM/SGLang/ATOM servers for each arm"),
    "cache-probe": (
        "cache_probe",
        "does a server's answer depend on its prefix cache? (cold, cold, warm; paired)",
    ),
}

# what an interrupted command left behind, for the commands that write something resumable
INTERRUPTED_NOTES = {
    "run": "completed samples are on disk, re-run to resume",
    "sweep": "completed samples are on disk, re-run to resume",
    "drift": "finished prompts are on disk, re-run with --resume to continue",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evalkit", description=evalkit.__doc__)
    parser.add_argument("--version", action="version", version=f"evalkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_module, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, description=help_text)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in COMMANDS:
        # No subcommand: top-level help, --version, or argparse's own "invalid choice" error.
        build_parser().parse_args(argv)
        build_parser().print_help()
        return 2
    # The subcommand's module adds its own arguments (so `evalkit compare --help` lists them).
    command = argv[0]
    module_name, help_text = COMMANDS[command]
    module = importlib.import_module(f"evalkit.commands.{module_name}")
    sub_parser = argparse.ArgumentParser(prog=f"evalkit {command}", description=help_text)
    module.add_arguments(sub_parser)
    args = parse_with_config(sub_parser, argv[1:])  # plain parse_args unless it takes --config
    try:
        return int(module.main(args) or 0)
    except Exception as exc:
        if is_user_error(exc):
            print(f"evalkit {command}: error: {mask_text(str(exc))}", file=sys.stderr)
            return exc.exit_code
        # a light install (no `engine` extra) reaching for torch
        message = missing_extra_message(exc) if isinstance(exc, ModuleNotFoundError) else None
        if message is None:
            raise
        print(f"evalkit {command}: error: {message}", file=sys.stderr)
        return MissingExtraError.exit_code
    except KeyboardInterrupt:
        note = INTERRUPTED_NOTES.get(command)
        print(f"evalkit {command}: interrupted" + (f"; {note}" if note else ""), file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
