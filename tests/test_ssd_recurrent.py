"""Drift's one-launch SSD decode-mode kernel (`kernels/ssd_decode/recurrent.py`) against the
engine's own SSD decode step called once per token: bit for bit, in every storage format
(stochastic rounding included: it hashes each token's position), for the op and through the
engine (a tiny NemotronH, block decode with the kernel vs with the per-token loop).

The Triton code runs in Triton's CPU interpreter, in a fresh subprocess (see
tests/test_drift_recurrent.py for why); `_all_checks` runs there and reports JSON.
"""

from __future__ import annotations

from pathlib import Path

import pytest

FORMATS = ("fp32", "fp16", "bf16", "m3", "fp8_e4m3", "fp16-sr")
ENGINE_ARMS = ("fp32", "bf16", "fp16-sr", "m3-rtz")


# ---- run inside the subprocess ------------------------------------------------------------------
def _op_checks() -> dict:
    import torch

    from evalkit.kernels import ssd_decode
    from evalkit.kernels.rounding import round_to_format
    from evalkit.kernels.ssd_decode import recurrent as R

    out = {"self_check": R.check_against_decode_loop(H=4, G=2, P=8, N=16, T=12, device="cpu")}
    # no initial state, slot 1 of 2: slot 0 must stay as it was
    g = torch.Generator().manual_seed(2)
    T, H, G, P, N = 9, 4, 2, 8, 16
    x, dt_raw = torch.randn(T, H, P, generator=g), torch.randn(T, H, generator=g) - 1
    B, C = torch.randn(T, G, N, generator=g), torch.randn(T, G, N, generator=g)
    A_log, dt_bias, D = (torch.randn(H, generator=g) for _ in range(3))
    pool = round_to_format(torch.full((2, H, P, N), float("nan")), "bf16")
    y = R.ssd_recurrent_rounded(x, dt_raw, B, C, A_log, dt_bias, D, pool, 1, False, fmt="bf16")
    zeros = torch.zeros(2, H, P, N, dtype=torch.bfloat16)
    slot = torch.tensor([1])
    y_loop = R.decode_loop(ssd_decode, x, dt_raw, B, C, A_log, dt_bias, D, zeros, slot, fmt="bf16")
    out["no_init"] = {
        "state_equal": bool(torch.equal(pool[1], zeros[1])),
        "out_equal": bool(torch.equal(y, y_loop)),
        "other_slot_untouched": bool(torch.isnan(pool[0].float()).all()),
    }
    # the comparison can fail: stochastic rounding at positions one off from the loop's
    init = torch.randn(1, H, P, N, generator=g)
    a = round_to_format(init, "fp16")
    b = a.clone()
    R.ssd_recurrent_rounded(x, dt_raw, B, C, A_log, dt_bias, D, a, 0, True, fmt="fp16-sr", position_last=50)
    R.ssd_recurrent_rounded(x, dt_raw, B, C, A_log, dt_bias, D, b, 0, True, fmt="fp16-sr", position_last=51)
    out["sr_position_matters"] = not torch.equal(a, b)
    try:
        R.ssd_recurrent_rounded(x, dt_raw, B, C, A_log, dt_bias, D, a, 0, True, fmt="fp16-sr")
        out["sr_without_position"] = None
    except ValueError as exc:
        out["sr_without_position"] = str(exc)
    return out


def _engine(ckpt: str) -> dict:
    """Block decode with the one-launch kernel vs with `ssd_decode` per token (fused off)."""
    import torch

    from evalkit.backends.local_probe import EngineDriftModel
    from evalkit.kernels.ssd_decode import recurrent as R

    calls = {True: 0, False: 0}
    kernel = R.ssd_recurrent_rounded

    def counted(*args, **kwargs):
        calls[dm.fused_decode] += 1
        return kernel(*args, **kwargs)

    R.ssd_recurrent_rounded = counted
    dm = EngineDriftModel.load(ckpt, device="cpu", max_len=128, chunk_size=16)
    toks = torch.randint(3, 512, (40,), generator=torch.Generator().manual_seed(0))
    res = {}
    for fused in (True, False):
        dm.fused_decode = fused
        for arm in ENGINE_ARMS:
            s = dm.open_session(arm)
            logits = torch.cat([s.prefill(toks[:16]), s.decode(toks[16:])])
            res[fused, arm] = (logits, [x.float().clone() for x in s.states()])
            s.close()
    out = {"kernel_calls": {"fused": calls[True], "loop": calls[False]}}
    for arm in ENGINE_ARMS:
        (la, sa), (lb, sb) = res[True, arm], res[False, arm]
        out[arm] = {
            "logits_equal": bool(torch.equal(la, lb)),
            "states_equal": len(sa) == 2 and all(torch.equal(x, y) for x, y in zip(sa, sb)),
        }
    ref = res[True, "fp32"][1]
    out["state_error"] = {
        a: [float((x - r).norm() / r.norm()) for x, r in zip(res[True, a][1], ref)] for a in ENGINE_ARMS
    }
    return out


def _all_checks(ckpt: str) -> dict:
    import torch

    torch.set_num_threads(1)
    from evalkit.kernels.ssd_decode import recurrent as R

    assert type(R.ssd_recurrent_kernel).__name__ == "InterpretedFunction"
    out = _op_checks()
    out["engine"] = _engine(ckpt)
    out["executed"] = ["op self-check", "no initial state", "sr positions", "engine"]
    return out


# ---- the tests ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def results(request):
    from helpers.checkpoint_cache import checkpoint_cache_root

    from evalkit.kernels.testing import run_json_script
    from evalkit.testing.tiny_mamba2_models import build_tiny_nemotron_h_checkpoint

    ckpt = build_tiny_nemotron_h_checkpoint(checkpoint_cache_root(request) / "nemotron-h")
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import test_ssd_recurrent as t; "
        "print(json.dumps(t._all_checks(sys.argv[2])))"
    )
    return run_json_script(code, str(Path(__file__).parent), str(ckpt))


@pytest.mark.parametrize("fmt", FORMATS)
def test_bit_identical_to_the_decode_step_per_token(results, fmt):
    r = results["self_check"][fmt]
    assert r["bit_identical"] and r["ok"] and r["state_vs_loop"] == 0.0, r
    assert (r["effect"] > 0) == (fmt != "fp32")


def test_starts_from_zeros_and_leaves_other_slots(results):
    assert results["no_init"] == {"state_equal": True, "out_equal": True, "other_slot_untouched": True}


def test_stochastic_rounding_hashes_each_tokens_position(results):
    assert results["sr_position_matters"]
    assert "positions" in (results["sr_without_position"] or "")


@pytest.mark.parametrize("arm", ENGINE_ARMS)
def test_engine_block_decode_with_the_kernel_equals_the_per_token_loop(results, arm):
    e = results["engine"]
    assert e["kernel_calls"]["fused"] > 0 and e["kernel_calls"]["loop"] == 0, e["kernel_calls"]
    assert e[arm]["logits_equal"] and e[arm]["states_equal"], (arm, e[arm])
    errors = e["state_error"][arm]
    assert (min(errors) > 0) == (arm != "fp32"), errors
