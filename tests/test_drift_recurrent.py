"""Drift's one-launch decode-mode kernel (Triton, run in the CPU interpreter) against the
engine's own decode step applied token by token: the same state rounding after every token."""

from __future__ import annotations

import importlib

import pytest
import torch

from evalkit.kernels import STATE_DTYPES, cpu

T, H, K, V = 24, 2, 16, 32


@pytest.fixture(scope="module")
def kern():
    mp = pytest.MonkeyPatch()
    mp.setenv("TRITON_INTERPRET", "1")
    mod = importlib.import_module("evalkit.drift.recurrent_rounding")
    if type(mod._recurrent_rounded_kernel).__name__ != "InterpretedFunction":
        pytest.skip("Triton kernels were imported for the GPU earlier in this process")
    yield mod
    mp.undo()


def _inputs(seed: int):
    g = torch.Generator().manual_seed(seed)
    q, k, gr = (torch.randn(T, H, K, generator=g) for _ in range(3))
    v = torch.randn(T, H, V, generator=g) * 3
    beta = torch.randn(T, H, generator=g)
    A_log = torch.rand(H, generator=g).log()
    dt_bias = torch.randn(H * K, generator=g) - 3.0  # slow decay: the state accumulates
    init = torch.randn(1, H, K, V, generator=g)
    return q, k, v, gr, beta, A_log, dt_bias, init


def _fro(a, b) -> float:
    return float((a.float() - b.float()).norm() / b.float().norm())


@pytest.mark.parametrize("arm", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("has_init", [True, False])
def test_matches_decode_steps(kern, arm, has_init):
    q, k, v, gr, beta, A_log, dt_bias, init = _inputs(seed=3 * len(arm) + has_init)
    dt = STATE_DTYPES[arm]
    start = init.to(dt) if has_init else torch.zeros(1, H, K, V, dtype=dt)
    pool_loop = torch.cat([torch.full_like(start, float("nan")), start])  # slot 1; slot 0 must stay NaN
    pool_fused = pool_loop.clone()
    outs = [cpu.kda_decode(q[t:t + 1], k[t:t + 1], v[t:t + 1], gr[t:t + 1], beta[t:t + 1], A_log, dt_bias,
                           pool_loop, torch.tensor([1]))[0] for t in range(T)]
    o_loop = torch.stack(outs)
    o = kern.kda_recurrent_rounded(q, k, v, gr, beta, A_log, dt_bias, pool_fused, 1, has_init)
    assert pool_fused.dtype == dt and torch.isnan(pool_fused[0].float()).all()
    if arm == "fp32":
        assert _fro(o, o_loop) < 1e-6 and _fro(pool_fused[1], pool_loop[1]) < 1e-6
        return
    # The size of the effect under study: rounding after every token vs once at the end.
    exact = (init.to(dt).float() if has_init else torch.zeros(1, H, K, V)).clone()
    o_exact = kern.kda_recurrent_rounded(q, k, v, gr, beta, A_log, dt_bias, exact, 0, True)  # never rounded
    effect = _fro(pool_loop[1], exact[0].to(dt))
    assert effect > 0
    # fp32 summation order may flip an occasional rounding; it must stay far below the effect
    assert _fro(pool_fused[1], pool_loop[1]) < 0.25 * effect
    assert _fro(o, o_loop) < 0.25 * _fro(o_loop, o_exact)


def test_self_check_passes_in_the_interpreter(kern):
    rep = kern.check_against_decode_loop(H=2, K=16, V=32, T=20, device="cpu")
    assert rep["ok"] and rep["bf16"]["effect"] > 0 and rep["fp32"]["state_vs_loop"] < 1e-5


def test_rejects_unknown_pool_dtype(kern):
    q, k, v, gr, beta, A_log, dt_bias, init = _inputs(seed=1)
    with pytest.raises(ValueError, match="unsupported state pool dtype"):
        kern.kda_recurrent_rounded(q, k, v, gr, beta, A_log, dt_bias, init.double(), 0, True)


SCRIPT = r"""
import sys, torch
torch.set_num_threads(1)
from evalkit.drift.engine_adapter import EngineDriftModel
dm = EngineDriftModel.load(sys.argv[1], device="cpu", max_len=128, chunk_size=16)
toks = torch.randint(0, dm.vocab_size, (32,), generator=torch.Generator().manual_seed(0))
res = {}
for fused in (True, False):
    dm.fused_decode = fused
    for arm in ("fp32", "bf16"):
        s = dm.open_session(arm)
        logits = torch.cat([s.prefill(toks[:8]), s.decode(toks[8:])])
        res[fused, arm] = (logits, [x.float().clone() for x in s.states()])
        s.close()
for arm in ("fp32", "bf16"):
    (la, sa), (lb, sb) = res[True, arm], res[False, arm]
    assert torch.equal(la, lb), (arm, (la - lb).abs().max())
    assert all(torch.equal(x, y) for x, y in zip(sa, sb)), arm
d = [float((x - r).norm() / r.norm()) for x, r in zip(res[True, "bf16"][1], res[True, "fp32"][1])]
assert min(d) > 0, d
print("OK", d)
"""


def test_engine_block_decode_fused_equals_decode_kernel_loop(tiny_pure_kda_ckpt, tmp_path):
    """Through the engine (all kernels in Triton's interpreter): the one-launch kernel gives
    bit-identical logits and states to `kernels.kda_decode` called once per token."""
    import os
    import subprocess
    import sys

    script = tmp_path / "fused.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, str(script), str(tiny_pure_kda_ckpt)], capture_output=True,
                         text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "OK" in out.stdout
