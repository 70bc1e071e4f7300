"""issue 38: the plan's family-wise procedure over loss claims: Holm against statsmodels'
`multipletests`, and the fixed sequence against a hand-worked example."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from evalkit.compare.loss_family import loss_family


def test_holm_matches_statsmodels_with_the_family_padded_by_p_1(monkeypatch):
    import gc

    monkeypatch.setattr(gc, "collect", lambda *a: 0)  # statsmodels' Holm collects on every call (slow)
    rng = np.random.default_rng(7)
    for _ in range(50):
        p = rng.uniform(0, 0.2, size=rng.integers(1, 6)).tolist()
        size = len(p) + int(rng.integers(0, 4))
        fam = loss_family([f"c{i}" for i in range(len(p))], p, [True] * len(p), 0.05, size=size)
        reject, adjusted, *_ = multipletests(p + [1.0] * (size - len(p)), alpha=0.05, method="holm")
        assert fam.adjusted == pytest.approx(adjusted[: len(p)])
        assert list(fam.loss) == list(reject[: len(p)])
        assert set(fam.status) == {"tested"}


def test_a_significant_gain_is_never_a_loss():
    fam = loss_family(["a"], [0.001], [False], 0.05)
    assert fam.adjusted == (0.001,) and fam.loss == (False,)


def test_fixed_sequence_on_a_hand_worked_example():
    # decision-protocol §2: p = .004/.019/.031/.41 at alpha .025 in the order fp16, bf16, e4m3, e5m2.
    # By hand: .004 <= .025 reject, go on; .019 <= .025 reject, go on; .031 > .025 stop there;
    # e5m2 is not tested. Holm (4 hypotheses) rejects only .004 (.019 > .025/3).
    names, p = ["fp16", "bf16", "e4m3", "e5m2"], [0.004, 0.019, 0.031, 0.41]
    order = list(names)
    fam = loss_family(names, p, [True] * 4, 0.025, procedure="fixed-sequence", order=order)
    assert fam.loss == (True, True, False, False)
    assert fam.status == ("tested", "tested", "tested", "not tested")
    assert fam.stopped_at == "e4m3"
    assert fam.adjusted[:3] == pytest.approx((0.004, 0.019, 0.031))
    holm = loss_family(names, p, [True] * 4, 0.025)
    assert holm.loss == (True, False, False, False)
    # the order is the plan's, not the caller's: the same hypotheses listed backwards
    back = loss_family(names[::-1], p[::-1], [True] * 4, 0.025, procedure="fixed-sequence", order=order)
    assert back.loss == (False, False, True, True) and back.status[0] == "not tested"
    # a first hypothesis that is not rejected stops everything, however small the later p
    first = loss_family(
        ["a", "b"], [0.5, 1e-9], [True, True], 0.025, procedure="fixed-sequence", order=["a", "b"]
    )
    assert first.loss == (False, False) and first.status == ("tested", "not tested")
    # a significant gain is not a rejection of "no loss": the sequence stops at it
    gain = loss_family(
        ["a", "b"], [1e-4, 1e-4], [False, True], 0.025, procedure="fixed-sequence", order=["a", "b"]
    )
    assert gain.loss == (False, False) and gain.stopped_at == "a"
