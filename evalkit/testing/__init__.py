"""Helpers for tests across evalkit (tiny checkpoints built with transformers' own classes)."""

from .tiny_models import build_tiny_checkpoint

__all__ = ["build_tiny_checkpoint"]
