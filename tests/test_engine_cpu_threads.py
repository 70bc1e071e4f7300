"""The CPU engine's torch threads: one unless the user sets EVALKIT_CPU_THREADS or OMP_NUM_THREADS."""

from __future__ import annotations

import pytest
import torch

from evalkit.engine import LLMEngine
from evalkit.engine.cpu_threads import choose_cpu_threads
from evalkit.errors import InputError


def test_choice_order_and_refusals():
    assert choose_cpu_threads({}) == 1
    assert choose_cpu_threads({"OMP_NUM_THREADS": "3"}) == 3
    assert choose_cpu_threads({"OMP_NUM_THREADS": "3", "EVALKIT_CPU_THREADS": "2"}) == 2
    for bad in ("0", "two", "-1"):
        with pytest.raises(InputError, match="EVALKIT_CPU_THREADS"):
            choose_cpu_threads({"EVALKIT_CPU_THREADS": bad})


def test_cpu_engine_sets_torch_threads(tiny_hybrid_ckpt, monkeypatch):
    before = torch.get_num_threads()
    try:
        monkeypatch.setenv("EVALKIT_CPU_THREADS", "2")
        LLMEngine(str(tiny_hybrid_ckpt), device="cpu", max_num_seqs=1)
        assert torch.get_num_threads() == 2
        monkeypatch.delenv("EVALKIT_CPU_THREADS")
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
        LLMEngine(str(tiny_hybrid_ckpt), device="cpu", max_num_seqs=1)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
