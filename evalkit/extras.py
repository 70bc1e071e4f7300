"""Optional parts of evalkit and the pip extra that brings each.

`pip install evalkit-state` (the distribution; the module is `evalkit`) is enough to compare runs,
evaluate a server and use the statistics; the in-process engine (kernels, drift, serve, the lm-eval
model) needs `evalkit-state[engine]`. When one of the engine's modules is missing, the user gets
one line naming the extra, not a traceback.
"""

from __future__ import annotations

from evalkit.errors import EvalkitError

DISTRIBUTION = "evalkit-state"  # what pip installs; "evalkit" on the public index is another project
ENGINE_EXTRA = "engine"
# top-level modules that only the engine extra installs
ENGINE_MODULES = ("torch", "triton", "transformers", "safetensors", "fastapi", "uvicorn")


class MissingExtraError(EvalkitError):
    """A feature needs an optional extra that is not installed."""


def install_hint(extra: str = ENGINE_EXTRA) -> str:
    return f"pip install '{DISTRIBUTION}[{extra}]'"


def _message(module: str) -> str:
    return f"the in-process engine is not installed (no module {module!r}); {install_hint()}"


def missing_extra_message(exc: BaseException) -> str | None:
    """The one-line message for an import failure of an engine module, else None (a real bug)."""
    if not isinstance(exc, ModuleNotFoundError) or not exc.name:
        return None
    top = exc.name.partition(".")[0]
    return _message(top) if top in ENGINE_MODULES else None
