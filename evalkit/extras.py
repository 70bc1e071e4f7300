"""Optional parts of evalkit and the pip extra that brings each.

`pip install evalkit-state` (the distribution; the module is `evalkit`) is enough to compare runs,
evaluate a server on evalkit's own tasks and use the statistics; the in-process engine (kernels,
drift, serve, the lm-eval model) needs `evalkit-state[engine]`, and lm-eval's tasks and scoring
(gsm8k, any lm-eval task by name, the GSM8K hub copy) `evalkit-state[lmeval]` (lm-eval pulls
datasets, pyarrow, pandas, scikit-learn, which a compare-only CI job has no use for). When a
module of an extra is missing, the user gets one line naming the extra, not a traceback.
"""

from __future__ import annotations

from evalkit.errors import EvalkitError

DISTRIBUTION = "evalkit-state"  # what pip installs; "evalkit" on the public index is another project
ENGINE_EXTRA = "engine"
LMEVAL_EXTRA = "lmeval"
# top-level modules that only the engine extra installs
ENGINE_MODULES = ("torch", "triton", "transformers", "safetensors", "fastapi", "uvicorn")
# top-level modules that only the lmeval extra installs (lm-eval and the dataset loader it brings)
LMEVAL_MODULES = ("lm_eval", "datasets", "evaluate")


class MissingExtraError(EvalkitError):
    """A feature needs an optional extra that is not installed."""


def install_hint(extra: str = ENGINE_EXTRA) -> str:
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def _message(module: str) -> str:
    if module in LMEVAL_MODULES:
        hint = install_hint(LMEVAL_EXTRA)
        return f"lm-eval's tasks and scoring are not installed (no module {module!r}); {hint}"
    return f"the in-process engine is not installed (no module {module!r}); {install_hint()}"


def missing_extra_message(exc: BaseException) -> str | None:
    """The one-line message for an import failure of an extra's module, else None (a real bug)."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.partition(".")[0]
    return _message(top) if top in ENGINE_MODULES + LMEVAL_MODULES else None
