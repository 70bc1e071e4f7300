"""issue 12: bits of margin (the function `evalkit sweep` calls) on hand-built rows."""

import pytest

from evalkit import stats as st
from evalkit.compare.bits import bits_of_margin


def _row(length, b_only, c_only, n=3000):
    return {"length": length, "n": n, "baseline_only": b_only, "candidate_only": c_only}


def test_fewest_bits_in_an_unbroken_chain_of_noninferior_arms():
    rows = {
        10: [_row(2048, 0, 0), _row(8192, 1, 1)],
        7: [_row(2048, 2, 1), _row(8192, 3, 2)],
        4: [_row(2048, 4, 3), _row(8192, 200, 10)],  # 8192: a clear loss at 4 bits
        3: [_row(2048, 90, 5), _row(8192, 6, 5)],  # 8192: lucky, but 4 bits already failed
    }
    out = bits_of_margin(rows, margin=0.01)
    assert out[2048].bits == 4 and out[2048].tested == (10, 7, 4, 3)
    assert out[2048].noninferior == (True, True, True, False)
    assert out[8192].bits == 7 and out[8192].headroom_vs_fp16 == 3 and out[8192].headroom_vs_bf16 == 0
    assert out[2048].pvalues[3] == pytest.approx(st.noninferiority_test(5, 90, 3000, 0.01).pvalue)


def test_no_arm_noninferior_and_narrowest_still_fine():
    out = bits_of_margin({10: [_row(None, 5, 0, n=40)], 7: [_row(None, 6, 0, n=40)]})
    assert out[None].bits is None and "not even m10" in out[None].note
    out = bits_of_margin({10: [_row(4096, 0, 0)], 2: [_row(4096, 1, 1)]})
    assert out[4096].bits == 2 and "narrowest arm tested" in out[4096].note


def test_two_rows_at_one_length_are_refused():
    with pytest.raises(ValueError, match="one task x metric"):
        bits_of_margin({10: [_row(1, 0, 0), _row(1, 0, 0)]})


def test_logprob_measure_uses_the_cells_own_test():
    cell = lambda length, p: {"length": length, "margin": 0.01, "noninferiority_p": p}
    out = bits_of_margin(
        {10: [cell(8192, 1e-9)], 5: [cell(8192, 0.001)], 3: [cell(8192, 0.2)]}, 0.01, measure="logprob"
    )
    assert out[8192].bits == 5 and out[8192].pvalues == (1e-9, 0.001, 0.2)
    with pytest.raises(ValueError, match="margin"):
        bits_of_margin({10: [cell(8192, 0.0)]}, 0.02, measure="logprob")


def test_arms_sharing_a_width_are_separate_rungs():
    """fp16 and m10 both store 10 bits: keyed (bits, label), each is tested, and either failing
    breaks the chain (what `evalkit sweep` passes)."""
    rows = {
        (10, "fp16"): [_row(2048, 0, 0)],
        (10, "m10"): [_row(2048, 200, 0)],  # a clear loss
        (7, "bf16"): [_row(2048, 0, 0)],
    }
    out = bits_of_margin(rows, margin=0.01)[2048]
    assert out.arms == ("fp16", "m10", "bf16") and out.noninferior == (True, False, True)
    assert out.bits == 10 and out.arm == "fp16"


def test_a_length_where_the_baseline_gets_everything_wrong_has_no_room():
    rows = {
        10: [{**_row(4096, 0, 0, n=100), "acc_baseline": 0.0}],
        7: [{**_row(4096, 0, 0, n=100), "acc_baseline": 0.0}],
    }
    out = bits_of_margin(rows, margin=0.05)[4096]
    assert out.no_room and out.bits is None and "no room" in out.note
    rows = {10: [{**_row(4096, 0, 0, n=100), "acc_baseline": 0.5}]}
    assert bits_of_margin(rows, margin=0.05)[4096].bits == 10


def test_bits_get_the_range_of_rungs_consistent_with_the_data():
    """issue 38: 10 bits shown non-inferior, 7 and 4 undecided, 3 shown inferior: the walk says 10,
    the data leave 4 to 10 possible; with no rung shown inferior the range is open below."""
    rows = {
        10: [_row(1024, 2, 2, n=3000)],
        7: [_row(1024, 8, 2, n=300)],
        4: [_row(1024, 10, 3, n=300)],
        3: [_row(1024, 60, 5, n=300)],
    }
    out = bits_of_margin(rows, margin=0.01)[1024]
    assert out.bits == 10 and out.noninferior == (True, False, False, False)
    assert st.tango_ci(5, 60, 300, 0.95).ci_high < -0.01 < st.tango_ci(3, 10, 300, 0.95).ci_high
    assert out.fewest_consistent == 4 and not out.open_below
    out = bits_of_margin({10: [_row(1024, 2, 2)], 7: [_row(1024, 8, 2, n=300)]}, margin=0.01)[1024]
    assert out.bits == 10 and out.fewest_consistent == 7 and out.open_below
