"""The kernels' own errors. Kernels are the lowest layer and import nothing from the rest of
evalkit, so their errors do not derive from `evalkit.errors.EvalkitError`; the CLI treats every
`KernelError` as a user error too (one line, exit 2: `evalkit.errors.is_user_error`)."""

from __future__ import annotations


class KernelError(Exception):
    """An error a user can act on, raised by the kernels (a bad format name, bad tensors)."""

    exit_code = 2


class FormatError(KernelError, ValueError):
    """A state format name or combination that does not exist (one line, says what does)."""


class KernelInputError(KernelError, ValueError):
    """A kernel was called with tensors of the wrong shape, dtype or device."""


class TwinMismatch(KernelError):
    """A 16-bit launch differed from its fp32 twin."""
