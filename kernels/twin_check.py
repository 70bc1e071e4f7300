"""The fp32-twin check: a launch that stores the state in a rounding format (fp16, bf16, fp8, mN;
any rounding) must compute exactly what the fp32 build computes, except for the final rounding
of the stored state.

Before a decode or prefill launch on such a pool, the touched pool rows are widened exactly to
fp32 into a private twin pool and the same inputs run through the fp32-pool build of the same
kernel (same tile configuration). The launch passes when
- its outputs are bit-identical to the twin's outputs, and
- every touched pool row is bit-identical to the twin's fp32 row rounded the format's way
  (`rounding.round_to_format`; stochastic rounding with the same random bits: same seed, launch
  seed and positions).
Any other difference (another rounding, other random bits, a conversion inside the math, a
reduction order that depends on the pool dtype) fails it. `TwinChecker` wraps the two launches
and keeps the counts; the engine can route every rounding launch through it, or every n-th one
(`every`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .common import resolve_format
from .dispatch import KDA_POOL_ARG, implementation, use_triton
from .errors import TwinMismatch
from .formats import StateFormat
from .rounding import round_to_format

# the formats `evalkit verify-kernels` draws from: every storage and every rounding
TWIN_FORMATS = (
    "fp16", "bf16", "fp16-rtz", "bf16-rtz", "fp16-sr", "bf16-sr:1", "fp8_e4m3", "fp8_e5m2",
    "fp8_e4m3-sr", "fp8_e5m2-rtz", "m10", "m7-sr", "m5", "m3-rtz", "m1-sr",
)  # fmt: skip
# a deliberately wrong build of a format with each rounding (what --self-test must catch)
WRONG_ROUNDING = {"rtne": "rtz", "sr": "rtz", "rtz": "rtne"}


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


class TwinChecker:
    """Wraps kda_decode / kda_prefill and the SSD ops ssd_decode / ssd_prefill: rounding launches
    are checked against their fp32 twin.

    `every`: check one launch in `every` (the others run unchecked). `raise_on_mismatch`: raise
    TwinMismatch at the first failure instead of only counting it. `rounding` overrides the
    rounding of the Triton launch under test only (e.g. 'rtz' on an rtne format builds a
    deliberately wrong kernel: tests of this check); "wrong" builds each launch with a rounding
    other than its format's (`WRONG_ROUNDING`); None builds what the format says."""

    def __init__(self, *, every: int = 1, raise_on_mismatch: bool = False, rounding: str | None = None):
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

    def _due(self, fmt: StateFormat) -> bool:
        if fmt.exact:
            return False
        self._seen += 1
        return (self._seen - 1) % self.every == 0

    def _build_rounding(self, fmt: StateFormat) -> str | None:
        return WRONG_ROUNDING[fmt.rounding] if self.rounding == "wrong" else self.rounding

    @property
    def checked(self) -> int:
        return sum(s.checked for s in self.stats.values())

    @property
    def passed(self) -> int:
        return sum(s.passed for s in self.stats.values())

    def summary(self) -> dict:
        return {k: s.as_dict() for k, s in sorted(self.stats.items())}

    # ------------------------------------------------------------------ the two ops
    def kda_decode(self, *args, fmt=None, sr_seed: int = 0, positions=None) -> torch.Tensor:
        """`evalkit.kernels.kda_decode`, checked against its fp32 twin when due."""
        n = args[0].shape[0]
        return self._launch("kda_decode", args, {}, fmt, n, sr_seed=sr_seed, positions=positions)

    def kda_prefill(self, *args, **options) -> torch.Tensor:
        """`evalkit.kernels.kda_prefill`, checked against its fp32 twin when due (the prefill
        kernel's variant and dot precision apply to the twin too)."""
        return self._prefill("kda_prefill", args, **options)

    def ssd_decode(self, *args, fmt=None, sr_seed: int = 0, positions=None) -> torch.Tensor:
        """`evalkit.kernels.ssd_decode`, checked against its fp32 twin when due."""
        n = args[0].shape[0]
        return self._launch("ssd_decode", args, {}, fmt, n, sr_seed=sr_seed, positions=positions)

    def ssd_prefill(self, *args, **options) -> torch.Tensor:
        """`evalkit.kernels.ssd_prefill`, checked against its fp32 twin when due (the prefill
        kernel's variant applies to the twin too)."""
        return self._prefill("ssd_prefill", args, **options)

    def _prefill(
        self,
        op: str,
        args: tuple,
        *,
        chunk_size: int = 64,
        intra_chunk_dtype=None,
        fmt=None,
        sr_seed: int = 0,
        positions=None,
        **triton_options,
    ) -> torch.Tensor:
        n = args[KDA_POOL_ARG + 1].numel()
        options = dict(chunk_size=chunk_size, intra_chunk_dtype=intra_chunk_dtype, **triton_options)
        return self._launch(op, args, options, fmt, n, sr_seed=sr_seed, positions=positions)

    def _launch(self, op: str, args: tuple, options: dict, fmt, n: int, **store) -> torch.Tensor:
        """Run `op` on `args` (the public function's positional arguments); when due, first run the
        fp32 twin on widened copies of the touched rows, then compare."""
        inputs, rest = args[:KDA_POOL_ARG], args[KDA_POOL_ARG + 2 :]
        state_pool, slots = args[KDA_POOL_ARG], args[KDA_POOL_ARG + 1]
        fmt = resolve_format(fmt, state_pool, store["positions"], n)
        impl = implementation(op, inputs[0])
        triton = use_triton(inputs[0])
        if triton and op == "kda_decode":  # the twin must run the same tile configuration
            from .kda_decode.wrapper import decode_config

            options = dict(options, config=decode_config(fmt, inputs[2].shape[-1]))

        def launch(pool, sl, f, rounding):
            build = dict(rounding=rounding) if triton else {}
            return impl(*inputs, pool, sl, *rest, fmt=f, **options, **build, **store)

        if not self._due(fmt):
            return launch(state_pool, slots, fmt, None)
        idx = slots.long()
        twin = state_pool[idx].to(torch.float32)  # exact widening of the touched rows
        twin_slots = torch.arange(idx.numel(), device=slots.device, dtype=slots.dtype)
        o_twin = launch(twin, twin_slots, "fp32", None)
        o = launch(state_pool, slots, fmt, self._build_rounding(fmt))
        kind = op.removeprefix("kda_")
        if op == "ssd_prefill" and options.get("variant", "walk") != "walk":
            kind += f"[{options['variant']}]"
        self._compare(f"{kind}/{fmt.name}", o, o_twin, state_pool[idx], twin, fmt, store)
        return o

    def _compare(self, key, o, o_twin, rows, twin32, fmt: StateFormat, store: dict) -> None:
        if not bit_equal(o, o_twin):
            n = int((bits(o) != bits(o_twin)).sum())
            self._record(key, False, f"outputs differ from the fp32 twin in {n} of {o.numel()} elements")
            return
        want = round_to_format(twin32, fmt, **store)  # the oracle, with the launch's random bits
        if not bit_equal(rows, want):
            n = int((bits(rows) != bits(want)).sum())
            how = {"rtne": "RTNE", "rtz": "RTZ", "sr": "SR"}[fmt.rounding]
            self._record(
                key, False, f"stored state != {how}(fp32 twin state) in {n} of {want.numel()} elements"
            )
            return
        self._record(key, True, "")
