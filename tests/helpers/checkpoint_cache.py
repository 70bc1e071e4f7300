"""Where the tests keep the tiny random checkpoints they build: under .pytest_cache, so a checkpoint
is built once across sessions, or in a session temp folder when the cache plugin is off."""

from __future__ import annotations

from pathlib import Path

import pytest


def checkpoint_cache_root(request: pytest.FixtureRequest) -> Path:
    cache = getattr(request.config, "cache", None)  # absent under `-p no:cacheprovider`
    if cache is not None:
        return Path(cache.mkdir("evalkit-tiny-checkpoints"))
    return request.getfixturevalue("tmp_path_factory").mktemp("evalkit-tiny-checkpoints")
