"""`python -m evalkit.interop.lm_eval_cli [lm_eval arguments]`: lm-eval's own CLI with the
`evalkit` model registered, e.g.

    python -m evalkit.interop.lm_eval_cli run --model evalkit \
        --model_args pretrained=PATH,state_dtype=fp16 --tasks gsm8k --log_samples --output_path out/
"""

from __future__ import annotations

from evalkit.interop import register


def main() -> None:
    register()
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()


if __name__ == "__main__":
    main()
