"""`python -m evalkit.interop.lm_eval_cli [lm_eval arguments]`: lm-eval's own CLI with the
`evalkit` model registered, e.g.

    python -m evalkit.interop.lm_eval_cli run --model evalkit \
        --model_args pretrained=PATH,state_dtype=fp16 --tasks gsm8k --log_samples --output_path out/
"""

from __future__ import annotations

import sys

from evalkit.errors import is_user_error
from evalkit.interop import register


def main() -> None:
    """lm-eval's CLI; an evalkit user error (a refused checkpoint, a bad arm) is one line, exit 2."""
    register()
    from lm_eval.__main__ import cli_evaluate

    try:
        cli_evaluate()
    except Exception as exc:
        if not is_user_error(exc):
            raise
        print(f"evalkit-lm-eval: error: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
