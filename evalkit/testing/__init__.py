"""Helpers for tests across evalkit (tiny checkpoints built with transformers' own classes).

Imported lazily, so that `python -m evalkit.testing.tiny_models PATH` runs the module once."""

from __future__ import annotations

from typing import Any

__all__ = ["build_tiny_checkpoint", "build_tiny_gdn_checkpoint"]


def __getattr__(name: str) -> Any:
    if name == "build_tiny_checkpoint":
        from evalkit.testing.tiny_models import build_tiny_checkpoint

        return build_tiny_checkpoint
    if name == "build_tiny_gdn_checkpoint":
        from evalkit.testing.tiny_gdn_models import build_tiny_gdn_checkpoint

        return build_tiny_gdn_checkpoint
    raise AttributeError(f"module 'evalkit.testing' has no attribute {name!r}")
