"""User-facing errors: the CLI prints their message on one line and exits non-zero, no traceback."""


class EvalkitError(Exception):
    """An error a user can act on (bad input, missing file, mismatched runs)."""

    exit_code = 2


class InputError(EvalkitError):
    """A file or argument is malformed or missing."""


class MismatchError(EvalkitError):
    """Two runs, or a run and its manifest, do not describe the same evaluation."""
