"""`host_values`: a small index tensor (cu_seqlens) read to the host once per tensor, not per call.

Why: reading a CUDA tensor's values is a device-to-host sync. A prefill forward hands the same
cu_seqlens tensor to every KDA and short-conv layer, and each wrapper needs its values on the host
(chunk tables, checks): read on every call, the host waits for the GPU to drain at every layer,
and the GPU then idles until the layer's launches arrive. The values are kept with a weak
reference to the tensor and its version counter, so a new tensor (even at a reused address) or an
in-place change is read again."""

from __future__ import annotations

import weakref

import torch

_last: dict[str, tuple[weakref.ref, int, list[int]]] = {}


def host_values(t: torch.Tensor) -> list[int]:
    """t.tolist() as ints, read from the device only when `t` is not the tensor read last (or has
    been written since)."""
    key = str(t.device)
    hit = _last.get(key)
    if hit is not None and hit[0]() is t and hit[1] == t._version:
        return list(hit[2])
    values = [int(x) for x in t.tolist()]
    _last[key] = (weakref.ref(t), t._version, values)
    return list(values)
