"""Fixed memory pools: per KDA layer a recurrent-state pool [S, H, K, V] in the dtype of the arm's
storage format (`arm.format.pool_dtype`: fp32 also for mN, 1 byte for fp8) and a
conv-state pool [S, 3*H*K, W-1] (model dtype); per MLA layer a paged latent cache
[blocks * block_size, kv_lora_rank + rope] (model dtype). Slot S-1 and block 0 are scratch: the
dummy rows of a fixed-width decode batch read and write only there.

A freed slot is zeroed before anyone else gets it (no state leaks between requests; prefill also
ignores the old contents through `has_initial_state`)."""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator

import torch

from evalkit import kernels
from evalkit.arm import Arm, parse_arm
from evalkit.errors import EvalkitError, InputError
from evalkit.kernels import resolve_state_dtype
from evalkit.kernels.formats import StateFormat

from ..model.config import KimiArch
from ..model.kda_ops import KdaOps


def _recurrent_dims(arch) -> tuple[tuple[int, ...], int, int]:
    """Per recurrent layer: the state shape, the conv channels and the conv width. KDA: [H, K, K]
    and 3*H*K; a GDN arch (fewer key than value heads) declares its own."""
    H, K, W = arch.linear_num_heads, arch.linear_head_dim, arch.linear_conv_kernel_dim
    shape = getattr(arch, "recurrent_state_shape", (H, K, K))
    return tuple(shape), getattr(arch, "conv_dim", 3 * H * K), W


def _device_bytes(device: torch.device) -> int | None:
    """The device's total memory (host RAM for the CPU), or None where it cannot be told."""
    try:
        if device.type == "cuda":
            return torch.cuda.get_device_properties(device).total_memory
        if device.type == "cpu":
            return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (OSError, ValueError, RuntimeError):
        pass
    return None


def _check_fits(need: int, device: torch.device, num_slots: int) -> None:
    """One line instead of an allocator's traceback (or the OOM killer) for a pool larger than
    the whole device, e.g. --max-num-seqs 1000000000."""
    have = _device_bytes(device)
    if have is not None and need > have:
        raise InputError(
            f"{num_slots} state slots need {need / 2**30:.3g} GiB, more than the {device.type}'s "
            f"{have / 2**30:.3g} GiB; lower --max-num-seqs"
        )


class OutOfSlots(EvalkitError):
    """No free state slot or cache block (the scheduler checks before admitting, so this is a bug)."""


class StatePools:
    """The pools, plus how the model's recurrent layers launch their kernels on them:
    `kda_ops` (default `evalkit.kernels`; the engine's fp32-twin checker or drift's per-token
    rounding wrap it) and `serial_prefill` (one KDA prefill kernel call per sequence: the engine
    sets it for the batch-invariant CPU path)."""

    kda_ops: KdaOps
    serial_prefill: bool

    def __init__(
        self,
        arch: KimiArch,
        num_slots: int,
        arm: Arm | str,
        model_dtype: torch.dtype,
        device: torch.device | str,
        num_blocks: int,
        block_size: int,
        kda_chunk_size: int = 64,
        *,
        kda_ops: KdaOps | None = None,
        serial_prefill: bool = False,
    ):
        self.arch = arch
        self.device = torch.device(device)
        self.arm = parse_arm(arm)  # how the kernels round each store (parsed here once)
        self.state_dtype = self.arm.format.pool_dtype
        self.model_dtype = model_dtype
        self.num_slots = num_slots
        self.scratch_slot = num_slots
        self.block_size = block_size
        self.num_blocks = num_blocks if arch.mla_layers else 0
        self.chunk_size = kda_chunk_size
        self.kda_ops = kernels if kda_ops is None else kda_ops
        self.serial_prefill = serial_prefill
        intra = self.arm.intra_chunk_dtype
        self.intra_chunk_dtype = None if intra is None else resolve_state_dtype(intra)
        shape, C, W = _recurrent_dims(arch)
        S = num_slots + 1
        _check_fits(S * self.bytes_per_slot(arch, self.state_dtype, model_dtype), self.device, num_slots)
        self.kda = {
            i: torch.zeros(S, *shape, dtype=self.state_dtype, device=self.device) for i in arch.kda_layers
        }
        self.conv = {
            i: torch.zeros(S, C, W - 1, dtype=model_dtype, device=self.device) for i in arch.kda_layers
        }
        rows = max(self.num_blocks, 1) * block_size
        self.mla = {
            i: torch.zeros(rows, arch.mla_latent_dim, dtype=model_dtype, device=self.device)
            for i in arch.mla_layers
        }
        self._free_slots = list(range(num_slots - 1, -1, -1))  # pop() hands out 0, 1, 2, ...
        self._pending_frees: list[int] | None = None  # slots freed inside `freeing_together`
        self._free_blocks = list(range(self.num_blocks - 1, 0, -1))  # block 0 is scratch

    @property
    def state_format(self) -> StateFormat:
        """The arm's storage format."""
        return self.arm.format

    # -- sizes ---------------------------------------------------------------------------------
    @staticmethod
    def bytes_per_slot(arch: KimiArch, state_dtype: torch.dtype, model_dtype: torch.dtype) -> int:
        return StatePools.state_bytes_per_slot(arch, state_dtype) + StatePools.conv_bytes_per_slot(
            arch, model_dtype
        )

    @staticmethod
    def state_bytes_per_slot(arch: KimiArch, state_dtype: torch.dtype) -> int:
        """The recurrent state of every recurrent layer: what the arm's format sizes."""
        shape, _, _ = _recurrent_dims(arch)
        return len(arch.kda_layers) * math.prod(shape) * state_dtype.itemsize

    @staticmethod
    def conv_bytes_per_slot(arch: KimiArch, model_dtype: torch.dtype) -> int:
        """The short convolutions' carried inputs (model dtype, whatever the arm)."""
        _, C, W = _recurrent_dims(arch)
        return len(arch.kda_layers) * C * (W - 1) * model_dtype.itemsize

    @staticmethod
    def bytes_per_token(arch: KimiArch, model_dtype: torch.dtype) -> int:
        return len(arch.mla_layers) * arch.mla_latent_dim * model_dtype.itemsize

    def memory_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for d in (self.kda, self.conv, self.mla) for t in d.values())

    # -- slots ---------------------------------------------------------------------------------
    @property
    def free_slots(self) -> int:
        return len(self._free_slots)

    def alloc_slot(self) -> int:
        if not self._free_slots:
            raise OutOfSlots("no free state slot")
        return self._free_slots.pop()

    def free_slot(self, slot: int) -> None:
        if self._pending_frees is not None:  # inside `freeing_together`: zeroed at its end
            self._pending_frees.append(slot)
            return
        self.zero_slot(slot)
        self._free_slots.append(slot)

    @contextlib.contextmanager
    def freeing_together(self) -> Iterator[None]:
        """Slots freed inside are zeroed together at the end (one launch per pool, where a slot at
        a time is one per pool and slot: a wave of 512 sequences ends in one decode step) and only
        then handed out again."""
        if self._pending_frees is not None:  # nested: the outer block zeroes them
            yield
            return
        self._pending_frees = []
        try:
            yield
        finally:
            slots, self._pending_frees = self._pending_frees, None
            if slots:
                idx = torch.tensor(slots, dtype=torch.long).to(self.device, non_blocking=True)
                for t in (*self.kda.values(), *self.conv.values()):
                    _zero_rows(t, idx)
                self._free_slots.extend(slots)

    def zero_slot(self, slot: int) -> None:
        for t in self.kda.values():
            t[slot].zero_()
        for t in self.conv.values():
            t[slot].zero_()

    # -- MLA cache blocks ----------------------------------------------------------------------
    def blocks_needed(self, n_tokens: int) -> int:
        if not self.mla:
            return 0
        return -(-n_tokens // self.block_size)

    @property
    def free_blocks(self) -> int:
        return len(self._free_blocks)

    def alloc_blocks(self, n: int) -> list[int]:
        if n > len(self._free_blocks):
            raise OutOfSlots(f"need {n} cache blocks, {len(self._free_blocks)} free")
        return [self._free_blocks.pop() for _ in range(n)]

    def free_blocks_of(self, blocks: list[int]) -> None:
        self._free_blocks.extend(reversed(blocks))

    # -- reading states (drift, health) --------------------------------------------------------
    def kda_state(self, layer: int, slot: int) -> torch.Tensor:
        """The stored recurrent state [H, K, V] of `slot` in KDA layer `layer` (a view, pool dtype)."""
        return self.kda[layer][slot]

    def layer_max_abs(self, slots: torch.Tensor) -> torch.Tensor:
        """Largest |state| per KDA layer and slot, fp32 [layers, len(slots)] (NaN where any is NaN):
        no sync. A slot's largest |x| is the larger of |min| and |max| (exact; NaN propagates), read
        in one pass with no temporary; when the slots are most of the pool, every slot is read in
        place (no gather copy) and these picked out."""
        out = torch.zeros(len(self.kda), slots.numel(), device=self.device)
        whole = 2 * slots.numel() >= self.num_slots + 1
        for row, t in enumerate(self.kda.values()):
            out[row] = _slot_max_abs(t)[slots] if whole else _slot_max_abs(t, slots)
        return out

    def max_abs(self, slots: torch.Tensor) -> torch.Tensor:
        """Largest |state| per slot over every KDA layer, fp32 [len(slots)] (NaN if any is NaN)."""
        if not self.kda:
            return torch.zeros(slots.numel(), device=self.device)
        return self.layer_max_abs(slots).amax(0)

    def nonfinite_count(self, slots: torch.Tensor) -> torch.Tensor:
        """Non-finite state elements per slot over every KDA layer, int64 [len(slots)]; asked only
        for slots whose largest |state| is not finite (so a healthy run never pays for it)."""
        out = torch.zeros(slots.numel(), dtype=torch.long, device=self.device)
        for t in self.kda.values():
            for i, part in _slot_parts(t, slots, 32):
                out[i : i + 32] += (~torch.isfinite(part)).flatten(1).sum(1)
        return out


def _zero_rows(pool: torch.Tensor, idx: torch.Tensor) -> None:
    """pool[idx] = 0 in one launch, through the pool's bits as integers of its width (+0.0 is all
    zero bits in every float format here, and index_fill has no fp8 kernels)."""
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[pool.element_size()]
    pool.view(ints).index_fill_(0, idx, 0)


def _slot_parts(pool: torch.Tensor, slots: torch.Tensor | None, step: int):
    """(index of the first, rows) of `slots` of a pool [S, ...] (every slot when None), `step` slots
    at a time: slices of the pool in place, or gathered copies (a bounded temporary); fp8, which
    torch cannot reduce, widened to fp32."""
    n = pool.shape[0] if slots is None else slots.numel()
    for i in range(0, n, step):
        part = pool[i : i + step] if slots is None else pool.index_select(0, slots[i : i + step])
        yield i, part.float() if part.element_size() == 1 else part


def _slot_max_abs(pool: torch.Tensor, slots: torch.Tensor | None = None) -> torch.Tensor:
    """Largest |x| of each of `slots` (every slot when None) of a pool [S, ...], fp32. Every slot in
    place is one reduction; a gather (or fp8, widened) goes 32 slots at a time."""
    n = pool.shape[0] if slots is None else slots.numel()
    step = n if slots is None and pool.element_size() > 1 else 32
    out = torch.empty(n, device=pool.device)
    for i, part in _slot_parts(pool, slots, step):
        lo, hi = torch.aminmax(part.flatten(1), dim=1)
        out[i : i + step] = torch.maximum(lo.abs(), hi.abs()).float()
    return out
