"""`python -m evalkit.interop.lm_eval_cli [lm_eval arguments]`: lm-eval's own CLI with the
`evalkit` model registered, e.g.

    python -m evalkit.interop.lm_eval_cli run --model evalkit \
        --model_args pretrained=PATH,state_dtype=fp16 --tasks gsm8k --log_samples --output_path out/
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from evalkit.errors import is_user_error
from evalkit.interop import register


def with_pretrained(argv: list[str], embedded: Callable[[], str]) -> list[str]:
    """`--model evalkit` with no `pretrained` in `--model_args` runs the embedded model; name it
    there, since lm-eval hands model_args to tasks that load the model's tokenizer (RULER's
    `pretrained`), which would otherwise fail. Other models and explicit paths are left alone."""
    model = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == "--model"), None)
    if model is None:
        model = next((a.split("=", 1)[1] for a in argv if a.startswith("--model=")), None)
    if model != "evalkit":
        return argv
    out = list(argv)
    for i, arg in enumerate(out):
        value = out[i + 1] if arg == "--model_args" and i + 1 < len(out) else None
        if arg.startswith("--model_args="):
            value = arg.split("=", 1)[1]
        if value is None:
            continue
        if any(kv.strip().startswith("pretrained=") for kv in value.split(",")):
            return argv
        value = ",".join(x for x in (value, f"pretrained={embedded()}") if x)
        if arg == "--model_args":
            out[i + 1] = value
        else:
            out[i] = f"--model_args={value}"
        return out
    return [*out, "--model_args", f"pretrained={embedded()}"]


def _embedded_model() -> str:
    from evalkit.runner.setup import default_model

    return default_model()[0]


def main() -> None:
    """lm-eval's CLI; an evalkit user error (a refused checkpoint, a bad arm) is one line, exit 2,
    and so is a missing extra (a light install has no lm-eval)."""
    from evalkit.extras import missing_extra_message

    try:
        register()
        from lm_eval.__main__ import cli_evaluate
    except ModuleNotFoundError as exc:
        message = missing_extra_message(exc)
        if message is None:
            raise
        print(f"evalkit-lm-eval: error: {message}", file=sys.stderr)
        sys.exit(2)

    try:
        sys.argv = [sys.argv[0], *with_pretrained(sys.argv[1:], _embedded_model)]
        cli_evaluate()
    except Exception as exc:
        if not is_user_error(exc):
            raise
        print(f"evalkit-lm-eval: error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
