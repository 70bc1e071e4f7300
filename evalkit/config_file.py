"""`--config FILE`: a YAML file whose keys are a command's long options, so a long `evalkit run`
line can live in a file (as lm-eval's `--config`). Options given on the command line win.

    # run.yaml
    server: [http://127.0.0.1:8000, http://127.0.0.1:8001]
    model: moonshotai/Kimi-Linear-48B-A3B-Instruct
    arm: vllm-fp16
    tasks: [gsm8k, passkey]      # a list or the CLI's comma-separated text
    lengths: 4k,16k
    limit: 200
    apply-chat-template: true    # dashes or underscores

A command takes part by declaring `--config` among its arguments.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

CONFIG_OPTION = "--config"


def _config_path(argv: list[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg == CONFIG_OPTION and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(CONFIG_OPTION + "="):
            return arg.split("=", 1)[1]
    return None


def _load(path: str) -> dict[str, Any]:
    import yaml

    from evalkit.user_files import why_unreadable

    reason = why_unreadable(path)
    if reason is not None:
        raise ValueError(reason)
    try:
        data = yaml.safe_load(Path(path).expanduser().read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not UTF-8 text") from None
    except RecursionError:
        raise ValueError(f"{path} is nested too deeply") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"{path} must be a mapping of option names to values")
    return data


def _options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """Long option name without dashes (and its dest) -> action."""
    out: dict[str, argparse.Action] = {}
    for action in parser._actions:
        if action.dest in ("help", "config"):
            continue
        for opt in action.option_strings:
            if opt.startswith("--"):
                out[opt[2:]] = action
                out[opt[2:].replace("-", "_")] = action
    return out


_SWITCHES = (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse.BooleanOptionalAction)


def _value(action: argparse.Action, key: str, raw: Any) -> Any:
    """The value argparse would have produced for `raw` (YAML gives typed values already): a switch
    takes true or false only (YAML's quoted 'no' is text, not false); any other option takes a
    plain value (text or a number), a list of them where the option repeats or is comma-separated,
    never a mapping."""
    if isinstance(action, _SWITCHES):
        if not isinstance(raw, bool):
            raise ValueError(f"{key}: expected true or false, got {raw!r}")
        return raw
    if raw is None:  # `limit:` with nothing after it: the option is not given
        return None
    convert = action.type or (lambda x: x)

    def one(x: Any) -> Any:
        if isinstance(x, bool) or not isinstance(x, (str, int, float)):
            want = "a list of values" if isinstance(action, argparse._AppendAction) else "a value"
            raise ValueError(f"{key}: expected {want} (text or a number), got {_shape(x)}")
        try:
            return convert(str(x))
        except (TypeError, ValueError, argparse.ArgumentTypeError) as exc:
            raise ValueError(f"{key}: {raw!r} is not a valid value ({exc})") from None

    if isinstance(action, argparse._AppendAction):
        return [one(x) for x in (raw if isinstance(raw, list) else [raw])]
    if isinstance(raw, list):  # a YAML list for a comma-separated option
        raw = ",".join(str(one(x)) for x in raw)
    value = one(raw)
    if action.choices is not None and value not in action.choices:
        raise ValueError(f"{key}: {value!r} is not one of {', '.join(map(str, action.choices))}")
    return value


def _shape(x: Any) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    return {dict: "a mapping", list: "a list", type(None): "null"}.get(type(x), type(x).__name__)


def _given_on_command_line(action: argparse.Action, argv: list[str]) -> bool:
    return any(a == o or a.startswith(o + "=") for a in argv for o in action.option_strings)


def parse_with_config(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """`parser.parse_args(argv)`, with defaults from `--config FILE` when the parser declares it."""
    path = _config_path(argv) if CONFIG_OPTION in parser._option_string_actions else None
    if path is None:
        return parser.parse_args(argv)
    options = _options(parser)
    appended: dict[str, int] = {}
    loaded: dict[str, Any] = {}
    try:
        loaded = _load(path)
        for key, raw in loaded.items():
            action = options.get(str(key))
            if action is None:
                known = sorted({k for k in options if "_" not in k})
                raise ValueError(f"unknown option {key!r} (known: {', '.join(known)})")
            value = _value(action, str(key), raw)
            action.required = False  # the file gives it
            parser.set_defaults(**{action.dest: value})
            if isinstance(action, argparse._AppendAction) and value is not None:
                appended[action.dest] = len(value)
    except ValueError as exc:  # one line (no usage block): the file, not the command line, is wrong
        parser.exit(2, f"{parser.prog}: error: --config {path}: {exc}\n")
    args = parser.parse_args(argv)
    for dest, n in appended.items():  # argparse appends to the default; the command line wins
        action = next(a for a in parser._actions if a.dest == dest)
        if _given_on_command_line(action, argv):
            setattr(args, dest, getattr(args, dest)[n:])
    args.config_options = loaded  # what the file said, for the run's manifest
    return args
