"""`kernels.host_values`: a forward's layers read cu_seqlens from the device once, and never get
stale values (a new tensor, or the same one written in place, is read again)."""

from __future__ import annotations

import torch

from evalkit.kernels import host_values as hv


def _counting(monkeypatch) -> list[int]:
    reads = []
    real = torch.Tensor.tolist

    def tolist(self):
        reads.append(1)
        return real(self)

    monkeypatch.setattr(torch.Tensor, "tolist", tolist)
    return reads


def test_one_read_per_tensor_and_fresh_values_after_a_write(monkeypatch):
    reads = _counting(monkeypatch)
    cu = torch.tensor([0, 5, 9], dtype=torch.int32)
    assert hv.host_values(cu) == [0, 5, 9] and hv.host_values(cu) == [0, 5, 9]
    assert len(reads) == 1
    cu[2] = 12  # in place: the version counter moves
    assert hv.host_values(cu) == [0, 5, 12] and len(reads) == 2
    got = hv.host_values(cu)
    got.append(99)  # the caller's list is its own
    assert hv.host_values(cu) == [0, 5, 12] and len(reads) == 2


def test_a_new_tensor_is_read_even_with_equal_values_or_a_reused_address(monkeypatch):
    reads = _counting(monkeypatch)
    assert hv.host_values(torch.tensor([0, 3])) == [0, 3]  # freed right after
    assert hv.host_values(torch.tensor([0, 4])) == [0, 4]  # may reuse the address
    assert hv.host_values(torch.tensor([0, 4])) == [0, 4]
    assert len(reads) == 3


def test_the_kda_prefill_checks_share_the_read(monkeypatch):
    from evalkit.kernels.common import check_varlen

    reads = _counting(monkeypatch)
    cu = torch.tensor([0, 4, 7], dtype=torch.int32)
    slots, init = torch.tensor([0, 1]), torch.tensor([False, True])
    for _ in range(3):  # three layers of one forward
        assert check_varlen(cu, init, slots, 7) == [0, 4, 7]
    assert len(reads) == 1
