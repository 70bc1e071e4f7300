"""Tiny random Gated DeltaNet checkpoints for the GDN tests (built once, cached under .pytest_cache)."""

from __future__ import annotations

from pathlib import Path

import pytest


def tiny_gdn(request: pytest.FixtureRequest, family: str) -> Path:
    from evalkit.testing.tiny_gdn_models import build_tiny_gdn_checkpoint

    cache = getattr(request.config, "cache", None)  # absent under `-p no:cacheprovider`
    if cache is not None:
        root = Path(cache.mkdir("evalkit-tiny-checkpoints"))
    else:
        root = request.getfixturevalue("tmp_path_factory").mktemp("evalkit-tiny-checkpoints")
    return build_tiny_gdn_checkpoint(root / f"gdn-{family}", family=family)
