"""Host-side helpers shared by the Triton wrappers: interpreter detection, the storage format's
build constants and arguments, and host tables uploaded to the device without a sync."""

from __future__ import annotations

import functools
import os

import torch

from .errors import KernelInputError
from .formats import ROUNDINGS, StateFormat
from .rounding import sr_key


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def int32_on_device(values: list[int] | tuple[int, ...], device: str | torch.device) -> torch.Tensor:
    """Host integers as an int32 tensor on `device`, uploaded without a sync (a blocking
    host-to-device copy waits for the GPU to drain)."""
    return torch.tensor(values, dtype=torch.int32).to(device, non_blocking=True)


@functools.lru_cache(maxsize=8)
def block_table(
    cu: tuple[int, ...], size: int, device: str
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    """(block_start [NB], block_end [NB], block_offsets [N], NB) for blocks of `size` tokens that
    restart at every sequence start. Cached by (cu, size, device): every layer of a forward pass
    shares its batch's table (the tensors are shared: read them, never write them)."""
    starts, ends, offsets = [], [], []
    for bos, eos in zip(cu[:-1], cu[1:]):
        offsets.append(len(starts))
        for t in range(bos, eos, size):
            starts.append(t)
            ends.append(min(t + size, eos))
    return (
        int32_on_device(starts, device),
        int32_on_device(ends, device),
        int32_on_device(offsets, device),
        len(starts),
    )


@functools.lru_cache(maxsize=8)
def device_cu_seqlens(cu: tuple[int, ...], device: str) -> torch.Tensor:
    """A batch's cu_seqlens (read on the host) on the device, cached by its values: every layer of a
    forward pass that was given them on the host shares one upload (read it, never write it)."""
    return int32_on_device(cu, device)


def as_rows(x: torch.Tensor) -> torch.Tensor:
    """x [..., D] as a 2-D [rows, D] whose last dim is contiguous (rows may keep a stride): a view
    where one exists, else a copy; what a row-wise kernel taking a row stride can read."""
    rows = x.reshape(-1, x.shape[-1])
    return rows if rows.stride(-1) == 1 else rows.contiguous()


def check_triton_device(kernel, t: torch.Tensor) -> None:
    """CPU tensors need Triton's interpreter, which only works when TRITON_INTERPRET=1 was set before
    `triton` was first imported (the standard library's own jit functions are built at that import).
    Say so plainly instead of failing deep inside Triton."""
    if t.is_cuda:
        return
    import triton.language as tl

    if type(kernel).__name__ != "InterpretedFunction" or type(tl.sum).__name__ != "InterpretedFunction":
        raise KernelInputError(
            "Triton kernels got CPU tensors, but Triton was imported for the GPU: set TRITON_INTERPRET=1 in "
            "the environment before anything imports triton, or use evalkit.kernels.cpu"
        )


def format_constexprs(fmt: StateFormat, rounding: str | None = None) -> dict:
    """The kernels' build constants of a storage format. `rounding` overrides the format's
    rounding (tests and `verify-kernels --self-test` build deliberately wrong kernels this way)."""
    if rounding is not None and rounding not in ROUNDINGS:
        raise KernelInputError(f"rounding must be one of {', '.join(ROUNDINGS)}, got {rounding!r}")
    if rounding == "sr" and fmt.rounding != "sr":
        raise KernelInputError("a stochastic-rounding build needs a -sr format (its seed and positions)")
    return {"STORAGE": fmt.storage, "MANT_BITS": fmt.bits, "ROUNDING": rounding or fmt.rounding}


def pool_arg(pool: torch.Tensor) -> torch.Tensor:
    """The pool as the kernels address it: fp8 pools as uint8 codes (bit arithmetic on both the
    GPU and the interpreter, which has no fp8 type)."""
    return pool.view(torch.uint8) if pool.element_size() == 1 else pool


def launch_key(fmt: StateFormat, sr_seed: int) -> int:
    """The stochastic-rounding key as a signed int32 kernel argument (0 when not rounding that way)."""
    if fmt.rounding != "sr":
        return 0
    key = sr_key(fmt.seed, sr_seed)
    return key - 2**32 if key >= 2**31 else key


INTERPRETED_MULTIPROCESSORS = 3  # the interpreter has no SMs; a few make a persistent grid loop


@functools.cache
def _cuda_multiprocessors(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def multiprocessors(device: torch.device) -> int:
    """SMs of the launch's device: the size of a persistent grid (a few under the interpreter, so
    its programs walk several tiles each, as they do on a GPU)."""
    if device.type != "cuda":
        return INTERPRETED_MULTIPROCESSORS
    return _cuda_multiprocessors(device.index if device.index is not None else torch.cuda.current_device())
