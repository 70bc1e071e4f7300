"""Test modules that run themselves again in Triton's CPU interpreter (TRITON_INTERPRET=1 must be set
before `triton` is first imported, see `evalkit.kernels.testing.run_module_under_interpreter`)."""

from __future__ import annotations

import importlib
import os
import types
from collections.abc import Callable

import pytest

from evalkit.kernels.testing import run_module_under_interpreter

INTERPRETING = os.environ.get("TRITON_INTERPRET") == "1"


def rerun_under_interpreter(path: str) -> Callable[[], None]:
    """The one test that, in a normal run, re-runs the module at `path` in a fresh interpreted process.
    Bind it in the module as `test_module_under_triton_interpreter = rerun_under_interpreter(__file__)`."""

    @pytest.mark.skipif(INTERPRETING, reason="this process is the interpreter run")
    def test_module_under_triton_interpreter() -> None:
        rc, out = run_module_under_interpreter(path)
        assert rc == 0, out

    return test_module_under_triton_interpreter


def interpreted_modules(**modules: str) -> types.SimpleNamespace:
    """Import the named kernel modules, skipping outside the interpreter run and checking that the
    Triton kernels really are interpreted there."""
    if not INTERPRETING:
        pytest.skip("runs inside test_module_under_triton_interpreter")
    decode = importlib.import_module("evalkit.kernels.kda_decode.wrapper")
    assert type(decode.kda_decode_kernel).__name__ == "InterpretedFunction"
    return types.SimpleNamespace(**{name: importlib.import_module(mod) for name, mod in modules.items()})
