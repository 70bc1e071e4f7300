"""The fp32-twin check: a 16-bit state launch must compute exactly what the fp32 build computes,
except for the final rounding of the stored state.

Before a decode or prefill launch on an fp16/bf16 pool, the touched pool rows are widened exactly
to fp32 into a private twin pool and the same inputs run through the fp32-pool build of the same
kernel (same tile configuration). The launch passes when
- its outputs are bit-identical to the twin's outputs, and
- every touched 16-bit pool row is bit-identical to the twin's fp32 row rounded to nearest even.
Any other difference (a truncating store, a conversion inside the math, a reduction order that
depends on the pool dtype) fails it. `TwinChecker` wraps the two launches and keeps the counts;
the engine can route every 16-bit launch through it, or every n-th one (`every`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from evalkit.errors import EvalkitError

from . import cpu
from .common import state_dtype_name


class TwinMismatch(EvalkitError):
    """A 16-bit launch differed from its fp32 twin."""


@dataclass
class TwinStats:
    checked: int = 0
    passed: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.checked - self.passed

    def as_dict(self) -> dict:
        return {
            "checked": self.checked,
            "passed": self.passed,
            "failed": self.failed,
            "failures": self.failures[:20],
        }


def bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bit pattern (NaN == NaN, -0 != +0): what 'bit-identical' means here."""
    return t.contiguous().view(
        {1: torch.int8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    )


def bit_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(bits(a), bits(b))


def _use_triton(t: torch.Tensor) -> bool:
    from . import use_triton

    return use_triton(t)


class TwinChecker:
    """Wraps kda_decode / kda_prefill: 16-bit launches are checked against their fp32 twin.

    `every`: check one launch in `every` (the others run unchecked). `raise_on_mismatch`: raise
    TwinMismatch at the first failure instead of only counting it. `rounding` is passed to the
    launch under test only ('rtz' builds the deliberately wrong kernel: tests of this check)."""

    def __init__(self, *, every: int = 1, raise_on_mismatch: bool = False, rounding: str = "rtne"):
        self.every = max(1, int(every))
        self.raise_on_mismatch = raise_on_mismatch
        self.rounding = rounding
        self.stats: dict[str, TwinStats] = {}
        self._seen = 0

    # ------------------------------------------------------------------ bookkeeping
    def _record(self, key: str, ok: bool, why: str) -> None:
        st = self.stats.setdefault(key, TwinStats())
        st.checked += 1
        st.passed += int(ok)
        if not ok:
            st.failures.append(why)
            if self.raise_on_mismatch:
                raise TwinMismatch(f"fp32-twin check failed for {key}: {why}")

    def _due(self, pool: torch.Tensor) -> bool:
        if pool.dtype == torch.float32:
            return False
        self._seen += 1
        return (self._seen - 1) % self.every == 0

    @property
    def checked(self) -> int:
        return sum(s.checked for s in self.stats.values())

    @property
    def passed(self) -> int:
        return sum(s.passed for s in self.stats.values())

    def summary(self) -> dict:
        return {k: s.as_dict() for k, s in sorted(self.stats.items())}

    # ------------------------------------------------------------------ the two ops
    def kda_decode(self, q, k, v, g_raw, beta_raw, A_log, dt_bias, state_pool, slots) -> torch.Tensor:
        triton_path = _use_triton(q)
        if triton_path:
            from .kda_decode.wrapper import decode_config
            from .kda_decode.wrapper import kda_decode as impl

            config = decode_config(state_pool.dtype, v.shape[-1])
            launch = lambda pool, sl, rounding: impl(
                q, k, v, g_raw, beta_raw, A_log, dt_bias, pool, sl, config=config, rounding=rounding
            )
        else:
            launch = lambda pool, sl, rounding: cpu.kda_decode(
                q, k, v, g_raw, beta_raw, A_log, dt_bias, pool, sl
            )
        if not self._due(state_pool):
            return launch(state_pool, slots, "rtne")
        idx = slots.long()
        twin = state_pool[idx].to(torch.float32)  # exact widening of the touched rows
        twin_slots = torch.arange(idx.numel(), device=slots.device, dtype=slots.dtype)
        o_twin = launch(twin, twin_slots, "rtne")
        o = launch(state_pool, slots, self.rounding)
        self._compare(f"decode/{state_dtype_name(state_pool.dtype)}", o, o_twin, state_pool[idx], twin)
        return o

    def kda_prefill(
        self,
        q,
        k,
        v,
        g_raw,
        beta_raw,
        A_log,
        dt_bias,
        state_pool,
        slots,
        cu_seqlens,
        has_initial_state,
        *,
        chunk_size: int = 64,
        intra_chunk_dtype=None,
    ) -> torch.Tensor:
        if _use_triton(q):
            from .kda_prefill.wrapper import kda_prefill as impl

            launch = lambda pool, sl, rounding: impl(
                q,
                k,
                v,
                g_raw,
                beta_raw,
                A_log,
                dt_bias,
                pool,
                sl,
                cu_seqlens,
                has_initial_state,
                chunk_size=chunk_size,
                intra_chunk_dtype=intra_chunk_dtype,
                rounding=rounding,
            )
        else:
            launch = lambda pool, sl, rounding: cpu.kda_prefill(
                q,
                k,
                v,
                g_raw,
                beta_raw,
                A_log,
                dt_bias,
                pool,
                sl,
                cu_seqlens,
                has_initial_state,
                chunk_size=chunk_size,
                intra_chunk_dtype=intra_chunk_dtype,
            )
        if not self._due(state_pool):
            return launch(state_pool, slots, "rtne")
        idx = slots.long()
        twin = state_pool[idx].to(torch.float32)
        twin_slots = torch.arange(idx.numel(), device=slots.device, dtype=slots.dtype)
        o_twin = launch(twin, twin_slots, "rtne")
        o = launch(state_pool, slots, self.rounding)
        self._compare(f"prefill/{state_dtype_name(state_pool.dtype)}", o, o_twin, state_pool[idx], twin)
        return o

    def _compare(self, key, o, o_twin, rows16, twin32) -> None:
        if not bit_equal(o, o_twin):
            n = int((bits(o) != bits(o_twin)).sum())
            self._record(key, False, f"outputs differ from the fp32 twin in {n} of {o.numel()} elements")
            return
        want = twin32.to(rows16.dtype)  # torch rounds to nearest even
        if not bit_equal(rows16, want):
            n = int((bits(rows16) != bits(want)).sum())
            self._record(
                key, False, f"stored state != RTNE(fp32 twin state) in {n} of {want.numel()} elements"
            )
            return
        self._record(key, True, "")
