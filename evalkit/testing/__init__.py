"""Helpers for tests across evalkit (tiny checkpoints built with transformers' own classes)."""

from .tiny_gdn_models import build_tiny_gdn_checkpoint
from .tiny_models import build_tiny_checkpoint

__all__ = ["build_tiny_checkpoint", "build_tiny_gdn_checkpoint"]
