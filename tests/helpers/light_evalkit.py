"""`python light_evalkit.py ARGS…`: the evalkit CLI as a light install (no `engine` or `lmeval`
extra) sees it.

torch, triton, transformers and lm-eval with its dataset libraries are hidden from the import
system, as if never installed:
`import torch` raises ModuleNotFoundError and `importlib.util.find_spec("torch")` is None (the
probe libraries such as `datasets` use). This is much faster than building a venv without torch,
and exact about the one thing that matters: no code path reaches for the engine's modules.
"""

from __future__ import annotations

import importlib.machinery
import sys

HIDDEN = ("torch", "triton", "transformers", "lm_eval", "datasets", "evaluate")


class _HidingPathFinder(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):  # noqa: ANN001 -- importlib's signature
        if name.partition(".")[0] in HIDDEN:
            return None
        return super().find_spec(name, path, target)


def hide_engine_modules() -> None:
    if any(name in sys.modules for name in HIDDEN):
        raise RuntimeError("hide the engine's modules before anything imports them")
    sys.meta_path[:] = [
        _HidingPathFinder if f is importlib.machinery.PathFinder else f for f in sys.meta_path
    ]


if __name__ == "__main__":
    hide_engine_modules()
    from evalkit.cli import main

    sys.exit(main(sys.argv[1:]))
