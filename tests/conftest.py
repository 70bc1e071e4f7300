"""Shared fixtures: tiny random Kimi-Linear checkpoints (built once, cached under .pytest_cache)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from helpers.checkpoint_cache import checkpoint_cache_root

import evalkit  # noqa: F401 - before any test imports transformers (evalkit/__init__: sys.path order)

# The CI box has 2 cores shared by several processes: one intra-op thread is several times faster
# than two spinning threads for the tiny models here (set EVALKIT_TEST_THREADS to override).
try:
    import torch

    torch.set_num_threads(int(os.environ.get("EVALKIT_TEST_THREADS", "1")))
except ImportError:  # pragma: no cover
    pass

# Long-context docs are built fresh in tests (no prompt cache in ~/.cache) and serially (no pool on a
# shared 2-core box); tests of the cache and the pool turn them on themselves.
os.environ.setdefault("EVALKIT_PROMPT_CACHE", "off")
os.environ.setdefault("EVALKIT_PROMPT_WORKERS", "1")


def _tiny(request: pytest.FixtureRequest, kind: str) -> Path:
    from evalkit.testing import build_tiny_checkpoint

    root = checkpoint_cache_root(request)
    return build_tiny_checkpoint(root / kind, kind=kind)


@pytest.fixture(scope="session")
def tiny_hybrid_ckpt(request: pytest.FixtureRequest) -> Path:
    """4 layers: KDA, KDA, KDA, MLA; dense layer 0 then MoE (4 experts, top 2, shared expert)."""
    return _tiny(request, "hybrid")


@pytest.fixture(scope="session")
def tiny_pure_kda_ckpt(request: pytest.FixtureRequest) -> Path:
    """4 KDA layers, no MLA."""
    return _tiny(request, "pure_kda")
