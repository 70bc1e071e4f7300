"""Tiny random Gated DeltaNet checkpoints for the GDN tests (built once, cached under .pytest_cache)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.checkpoint_cache import checkpoint_cache_root


def tiny_gdn(request: pytest.FixtureRequest, family: str) -> Path:
    from evalkit.testing.tiny_gdn_models import build_tiny_gdn_checkpoint

    root = checkpoint_cache_root(request)
    return build_tiny_gdn_checkpoint(root / f"gdn-{family}", family=family)
