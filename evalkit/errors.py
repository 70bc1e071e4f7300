"""User-facing errors: the CLI prints their message on one line and exits non-zero, no traceback."""

from __future__ import annotations

import sys


class EvalkitError(Exception):
    """An error a user can act on (bad input, missing file, mismatched runs)."""

    exit_code = 2


class InputError(EvalkitError):
    """A file or argument is malformed or missing."""


class MismatchError(EvalkitError):
    """Two runs, or a run and its manifest, do not describe the same evaluation."""


def is_user_error(exc: BaseException) -> bool:
    """True for an error a user can act on: an `EvalkitError`, or one of the kernels' own errors
    (`evalkit.kernels.errors.KernelError`; kernels import nothing from evalkit, so they cannot derive
    from `EvalkitError`). Looked up in sys.modules: a kernel error exists only once kernels were
    imported, and the CLI must not import torch to find out."""
    if isinstance(exc, EvalkitError):
        return True
    kernel_errors = sys.modules.get("evalkit.kernels.errors")
    return kernel_errors is not None and isinstance(exc, kernel_errors.KernelError)
