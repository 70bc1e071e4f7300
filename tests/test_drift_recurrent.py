"""Drift's one-launch decode-mode kernel against the engine's own decode step applied token by
token: the same state rounding after every token.

The Triton code runs in Triton's CPU interpreter, in a fresh subprocess: TRITON_INTERPRET must be
set before any Triton kernel is defined, and a process that already built GPU kernels (other test
modules) breaks interpreted calls to `tl` functions. `_all_checks` runs there and reports JSON;
the tests below assert on it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

T, H, K, V = 24, 2, 16, 32
CASES = [(arm, init) for arm in ("fp32", "fp16", "bf16") for init in (True, False)]


# ---- run inside the subprocess ------------------------------------------------------------------
def _inputs(seed: int):
    import torch

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


def _case(kern, arm: str, has_init: bool) -> dict:
    """The kernel and a per-token loop of the CPU decode step, from the same pool; plus the size
    of the effect under study (rounding after every token vs never)."""
    import torch

    from evalkit.kernels import STATE_DTYPES, cpu

    q, k, v, gr, beta, A_log, dt_bias, init = _inputs(seed=3 * len(arm) + has_init)
    dt = STATE_DTYPES[arm]
    start = init.to(dt) if has_init else torch.zeros(1, H, K, V, dtype=dt)
    pool_loop = torch.cat([torch.full_like(start, float("nan")), start])  # slot 1; slot 0 must stay NaN
    pool_fused = pool_loop.clone()
    slot = torch.tensor([1])
    o_loop = torch.stack(
        [
            cpu.kda_decode(
                q[t : t + 1],
                k[t : t + 1],
                v[t : t + 1],
                gr[t : t + 1],
                beta[t : t + 1],
                A_log,
                dt_bias,
                pool_loop,
                slot,
            )[0]
            for t in range(T)
        ]
    )
    o = kern.kda_recurrent_rounded(q, k, v, gr, beta, A_log, dt_bias, pool_fused, 1, has_init)
    exact = (init if has_init else torch.zeros(1, H, K, V)).to(dt).float().clone()
    o_exact = kern.kda_recurrent_rounded(q, k, v, gr, beta, A_log, dt_bias, exact, 0, True)  # never rounded
    untouched = bool(torch.isnan(pool_fused[0].float()).all())
    return {
        "dtype_kept": pool_fused.dtype == dt,
        "other_slot_untouched": untouched,
        "state_vs_loop": _fro(pool_fused[1], pool_loop[1]),
        "out_vs_loop": _fro(o, o_loop),
        "state_effect": _fro(pool_loop[1], exact[0].to(dt)),
        "out_effect": _fro(o_loop, o_exact),
    }


def _engine(ckpt: str) -> dict:
    """Through the engine: block decode with the one-launch kernel vs with kda_decode per token."""
    import torch

    from evalkit.backends.local_probe import EngineDriftModel

    dm = EngineDriftModel.load(ckpt, device="cpu", max_len=128, chunk_size=16)
    toks = torch.randint(0, dm.vocab_size, (32,), generator=torch.Generator().manual_seed(0))
    res = {}
    for fused in (True, False):
        dm.fused_decode = fused
        for arm in ("fp32", "bf16"):
            s = dm.open_session(arm)
            logits = torch.cat([s.prefill(toks[:8]), s.decode(toks[8:])])
            res[fused, arm] = (logits, [x.float().clone() for x in s.states()])
            s.close()
    out = {}
    for arm in ("fp32", "bf16"):
        (la, sa), (lb, sb) = res[True, arm], res[False, arm]
        out[arm] = {
            "logits_equal": bool(torch.equal(la, lb)),
            "states_equal": all(torch.equal(x, y) for x, y in zip(sa, sb)),
        }
    out["bf16_state_error"] = [_fro(x, r) for x, r in zip(res[True, "bf16"][1], res[True, "fp32"][1])]
    return out


def _all_checks(ckpt: str) -> dict:
    import torch

    torch.set_num_threads(1)
    kern = __import__("evalkit.kernels.kda_decode.recurrent", fromlist=["x"])
    assert type(kern._recurrent_rounded_kernel).__name__ == "InterpretedFunction"
    out = {"cases": {f"{a}-{i}": _case(kern, a, i) for a, i in CASES}}
    out["executed"] = [f"case {c}" for c in out["cases"]]
    out["self_check"] = kern.check_against_decode_loop(H=2, K=16, V=32, T=20, device="cpu")
    q, k, v, gr, beta, A_log, dt_bias, init = _inputs(seed=1)
    try:
        kern.kda_recurrent_rounded(q, k, v, gr, beta, A_log, dt_bias, init.double(), 0, True)
        out["rejects_float64_pool"] = None
    except ValueError as exc:
        out["rejects_float64_pool"] = str(exc)
    out["engine"] = _engine(ckpt)
    return out


# ---- the tests ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def results(tiny_pure_kda_ckpt):
    from evalkit.kernels.testing import run_json_script

    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import test_drift_recurrent as t; "
        "print(json.dumps(t._all_checks(sys.argv[2])))"
    )
    return run_json_script(code, str(Path(__file__).parent), str(tiny_pure_kda_ckpt))


@pytest.mark.parametrize("arm, has_init", CASES)
def test_matches_decode_steps(results, arm, has_init):
    r = results["cases"][f"{arm}-{has_init}"]
    assert r["dtype_kept"] and r["other_slot_untouched"]
    if arm == "fp32":
        assert r["state_vs_loop"] < 1e-6 and r["out_vs_loop"] < 1e-6
        return
    assert r["state_effect"] > 0 and r["out_effect"] > 0
    # fp32 summation order may flip an occasional rounding; it must stay far below the effect itself
    assert r["state_vs_loop"] < 0.25 * r["state_effect"]
    assert r["out_vs_loop"] < 0.25 * r["out_effect"]


def test_self_check_passes(results):
    rep = results["self_check"]
    assert rep["ok"] and rep["bf16"]["effect"] > 0 and rep["fp32"]["state_vs_loop"] < 1e-5


def test_rejects_unknown_pool_dtype(results):
    assert "unsupported state pool dtype" in (results["rejects_float64_pool"] or "")


def test_engine_block_decode_fused_equals_decode_kernel_loop(results):
    """All kernels in Triton's interpreter: the one-launch kernel gives bit-identical logits and
    states to `kernels.kda_decode` called once per token, and bf16 does differ from fp32."""
    e = results["engine"]
    for arm in ("fp32", "bf16"):
        assert e[arm]["logits_equal"] and e[arm]["states_equal"], (arm, e[arm])
    assert min(e["bf16_state_error"]) > 0
