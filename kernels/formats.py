"""How the recurrent state is stored: the storage format of a state pool, one value per arm.

The state's math is always fp32; a format says only what happens when the fp32 state is written
to the pool (after every decode token, and at the end of every prefill chunk):
- `storage`: the pool's element type: fp32, fp16, bf16, fp8_e4m3 (e4m3fn: no inf, max 448) or
  fp8_e5m2 (max 57344). fp8 stores saturate to the largest finite value of the format.
- `mantissa_bits`: only with fp32 storage: the value is rounded to N explicit mantissa bits
  (1 <= N <= 23) and kept in the fp32 pool, so precision can be swept with fp32's exponent range
  (`m10` has fp16's mantissa, `m7` bf16's, without their range limits).
- `rounding`: "rtne" (round to nearest, ties to even: what hardware conversions and servers do),
  "sr" (stochastic rounding, seeded and reproducible: the random bits are a hash of `seed`, the
  layer, the sequence position of the store and the element's index), or "rtz" (truncation toward
  zero: a deliberately biased arm, the positive control).

Names (the CLI's vocabulary): `fp32`, `fp16`, `bf16`, `fp8_e4m3`, `fp8_e5m2`, `m<N>`; a rounding
suffix `-sr` or `-rtz` (e.g. `fp16-sr`, `bf16-rtz`, `m3-rtz`); `-sr` takes an optional seed,
`fp16-sr:7`. This module imports nothing from the rest of evalkit (kernels are the lowest layer).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .errors import FormatError

if TYPE_CHECKING:
    import torch

# torch's dtype of each storage, by attribute name: this module imports no torch, so the format
# vocabulary (`parse_format`, `evalkit.arm`) works in a light install without the engine.
STORAGE_DTYPE_NAMES: dict[str, str] = {
    "fp32": "float32",
    "fp16": "float16",
    "bf16": "bfloat16",
    "fp8_e4m3": "float8_e4m3fn",
    "fp8_e5m2": "float8_e5m2",
}
STORAGES = tuple(STORAGE_DTYPE_NAMES)


@functools.cache
def storage_dtypes() -> dict:
    """storage name -> torch dtype (imports torch on the first call; built once: kernel launches
    check the pool's dtype through it)."""
    import torch

    return {k: getattr(torch, v) for k, v in STORAGE_DTYPE_NAMES.items()}


ROUNDINGS = ("rtne", "sr", "rtz")
# explicit mantissa bits of each storage (what "bits of margin" is measured against)
MANTISSA_BITS = {"fp32": 23, "fp16": 10, "bf16": 7, "fp8_e4m3": 3, "fp8_e5m2": 2}
# largest finite value of each storage (what "bits of exponent headroom" is measured against;
# torch.finfo's values, spelled out so this module needs no torch)
MAX_FINITE = {
    "fp32": 3.4028234663852886e38,
    "fp16": 65504.0,
    "bf16": 3.3895313892515355e38,
    "fp8_e4m3": 448.0,
    "fp8_e5m2": 57344.0,
}


_NAME = re.compile(
    r"^(?P<base>fp32|fp16|bf16|fp8_e4m3|fp8_e5m2|m(?P<n>\d+))(?:-(?P<r>sr|rtz|rtne)(?::(?P<seed>\d+))?)?$"
)


@dataclass(frozen=True)
class StateFormat:
    storage: str = "fp32"
    mantissa_bits: int | None = None  # only with storage "fp32": the simulated mantissa width
    rounding: str = "rtne"
    seed: int = 0  # stochastic rounding only

    def __post_init__(self) -> None:
        if self.storage not in STORAGES:
            raise FormatError(f"unknown state storage {self.storage!r}; one of {', '.join(STORAGES)}")
        if self.rounding not in ROUNDINGS:
            raise FormatError(f"unknown rounding {self.rounding!r}; one of {', '.join(ROUNDINGS)}")
        if self.mantissa_bits is not None:
            if self.storage != "fp32":
                raise FormatError("a simulated mantissa width (mN) is kept in an fp32 pool")
            if not 1 <= self.mantissa_bits <= 23:
                raise FormatError(f"mantissa bits must be 1..23, got {self.mantissa_bits}")
        if self.storage == "fp32" and self.mantissa_bits in (None, 23) and self.rounding != "rtne":
            raise FormatError("fp32 storage does not round; -sr/-rtz need fp16, bf16, fp8 or mN")

    @property
    def pool_dtype(self) -> torch.dtype:
        return storage_dtypes()[self.storage]

    @property
    def bits(self) -> int:
        """Explicit mantissa bits kept by a store."""
        return self.mantissa_bits if self.mantissa_bits is not None else MANTISSA_BITS[self.storage]

    @property
    def max_finite(self) -> float:
        """The largest finite value a store keeps (mN formats keep fp32's range)."""
        return MAX_FINITE[self.storage]

    @property
    def exact(self) -> bool:
        """True when a store changes nothing (plain fp32)."""
        return self.storage == "fp32" and self.mantissa_bits in (None, 23)

    @property
    def name(self) -> str:
        base = f"m{self.mantissa_bits}" if self.mantissa_bits is not None else self.storage
        if self.rounding == "rtne":
            return base
        if self.rounding == "sr" and self.seed:
            return f"{base}-sr:{self.seed}"
        return f"{base}-{self.rounding}"

    def describe(self) -> dict:
        return {
            "name": self.name,
            "storage": self.storage,
            "mantissa_bits": self.bits,
            "rounding": self.rounding,
            "seed": self.seed if self.rounding == "sr" else None,
        }

    def __str__(self) -> str:
        return self.name


def parse_format(name: str | StateFormat | torch.dtype) -> StateFormat:
    """'fp16' / 'm7' / 'bf16-rtz' / 'fp16-sr:3' / torch.float16 -> StateFormat; FormatError otherwise."""
    if isinstance(name, StateFormat):
        return name
    if type(name).__module__ == "torch":  # a torch.dtype (torch is loaded when one exists)
        for key, dt in storage_dtypes().items():
            if dt == name:
                return StateFormat(key)
        raise FormatError(f"no state format stores {name}")
    aliases = {"float32": "fp32", "float16": "fp16", "half": "fp16", "bfloat16": "bf16"}
    text = aliases.get(str(name).strip().lower(), str(name).strip().lower())
    m = _NAME.match(text)
    if not m:
        raise FormatError(
            f"unknown state format {name!r}: use fp32, fp16, bf16, fp8_e4m3, fp8_e5m2 or mN (N = 1..23), "
            "optionally with -sr[:SEED] (stochastic rounding) or -rtz (truncation), e.g. fp16-sr, m3-rtz"
        )
    rounding = m["r"] or "rtne"
    if m["seed"] is not None and rounding != "sr":
        raise FormatError(f"{name!r}: only stochastic rounding (-sr) takes a seed")
    n = int(m["n"]) if m["n"] is not None else None
    storage = "fp32" if n is not None else m["base"]
    return StateFormat(storage, n, rounding, int(m["seed"] or 0))
