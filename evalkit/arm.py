"""An arm of the in-process engine: how the recurrent state is stored, and where.

Syntax (the CLI's `--arm`, `--arms`, and the sweep's directory names):

    FORMAT[@chunk=N][@intra=DTYPE]

- FORMAT: a state format of `evalkit.kernels.formats` (`fp32`, `fp16`, `bf16`, `fp8_e4m3`,
  `fp8_e5m2`, `mN` for N simulated mantissa bits, each optionally `-sr[:SEED]` or `-rtz`):
  what a store does to the fp32 state.
- `@chunk=N`: the prefill chunk size in tokens, i.e. where the state is stored while a prompt is
  read (once every N tokens, plus once per generated token). Default `DEFAULT_PREFILL_CHUNK`.
- `@intra=DTYPE`: round the state carried inside each prefill chunk to fp32/fp16/bf16 too
  (default: no intra-chunk rounding).

Examples: `fp16`, `m7`, `bf16-rtz@chunk=64`, `fp16@chunk=64@intra=bf16`. `Arm.label` writes an arm
back in this syntax, leaving defaults out, so `parse_arm(a.label) == a`.

`DEFAULT_PREFILL_CHUNK = 2048` on the CPU and on the GPU alike, so an arm means the same store points
wherever it runs (before, the engine stored every 256 tokens on the CPU and every 16,384 on the
GPU). 2048 is what serving engines do: vLLM's default chunked-prefill budget and SGLang's
`--chunked-prefill-size` are 2k-8k tokens, so a deployed 16-bit state is rounded every 2-8k prompt
tokens; the smallest of those is the conservative (most roundings) choice.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from evalkit.errors import InputError
from evalkit.kernels.formats import MANTISSA_BITS, FormatError, StateFormat, parse_format

DEFAULT_PREFILL_CHUNK = 2048
INTRA_CHUNK_DTYPES = ("fp32", "fp16", "bf16")
# the formats serving engines offer for the SSM/KDA state (vLLM, SGLang, ATOM), with their long names
SERVER_FORMATS: dict[str, str] = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
# the formats the 16-bit arms are measured against in a sweep ("bits of margin")
REFERENCE_BITS: dict[str, int] = {"fp16": MANTISSA_BITS["fp16"], "bf16": MANTISSA_BITS["bf16"]}
SYNTAX = "FORMAT[@chunk=N][@intra=fp32|fp16|bf16], e.g. fp16, m7, bf16-rtz@chunk=64"

_PARAM = re.compile(r"^(?P<key>[a-z_]+)=(?P<value>[^@=]+)$")


@dataclass(frozen=True)
class Arm:
    format: StateFormat = StateFormat()
    prefill_chunk_size: int = DEFAULT_PREFILL_CHUNK
    intra_chunk_dtype: str | None = None

    def __post_init__(self) -> None:
        if self.prefill_chunk_size < 1:
            raise InputError(f"arm {self.label!r}: chunk must be at least 1 token")
        if self.intra_chunk_dtype not in (None, *INTRA_CHUNK_DTYPES):
            raise InputError(
                f"arm intra-chunk dtype {self.intra_chunk_dtype!r}: one of {', '.join(INTRA_CHUNK_DTYPES)}"
            )

    @property
    def label(self) -> str:
        out = self.format.name
        if self.prefill_chunk_size != DEFAULT_PREFILL_CHUNK:
            out += f"@chunk={self.prefill_chunk_size}"
        if self.intra_chunk_dtype is not None:
            out += f"@intra={self.intra_chunk_dtype}"
        return out

    @property
    def mantissa_bits(self) -> int:
        return self.format.bits

    @property
    def is_baseline(self) -> bool:
        """An exact (fp32) store: what every other arm is compared with."""
        return self.format.exact and self.intra_chunk_dtype in (None, "fp32")

    def describe(self) -> dict[str, Any]:
        """The manifest's `arm` record (every key but `note` is part of the run's identity)."""
        return {
            "label": self.label,
            "state_dtype": self.format.name,
            "format": self.format.describe(),
            "prefill_chunk_size": self.prefill_chunk_size,
            "intra_chunk_dtype": self.intra_chunk_dtype,
        }

    def __str__(self) -> str:
        return self.label


def parse_arm(text: str | Arm) -> Arm:
    """'fp16@chunk=64' -> Arm; InputError (one line, says the syntax) otherwise."""
    if isinstance(text, Arm):
        return text
    raw = str(text).strip()
    head, *params = raw.split("@")
    try:
        fmt = parse_format(head)
    except FormatError as exc:
        raise InputError(f"arm {raw!r}: {exc}") from None
    chunk, intra = DEFAULT_PREFILL_CHUNK, None
    seen: set[str] = set()
    for p in params:
        m = _PARAM.match(p.strip().lower())
        if not m or m["key"] not in ("chunk", "intra") or m["key"] in seen:
            raise InputError(f"arm {raw!r}: bad parameter {p!r}; syntax {SYNTAX}")
        seen.add(m["key"])
        if m["key"] == "chunk":
            if not m["value"].isdigit() or int(m["value"]) < 1:
                raise InputError(f"arm {raw!r}: chunk must be a positive number of tokens")
            chunk = int(m["value"])
        else:
            intra = m["value"]
            if intra not in INTRA_CHUNK_DTYPES:
                raise InputError(f"arm {raw!r}: intra must be one of {', '.join(INTRA_CHUNK_DTYPES)}")
    return Arm(fmt, chunk, intra)


def parse_arms(text: str) -> list[Arm]:
    """A comma-separated list of arms ('fp32,m7,bf16-rtz@chunk=64'), each once."""
    arms = [parse_arm(a) for a in text.split(",") if a.strip()]
    if not arms:
        raise InputError(f"no arm in {text!r}; syntax {SYNTAX}")
    labels = [a.label for a in arms]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise InputError(f"arm listed twice: {', '.join(dup)}")
    return arms


def server_format(text: str) -> str:
    """A state format a serving engine offers (fp32/fp16/bf16), for `evalkit recipes`."""
    name = parse_arm(text).format.name
    if name not in SERVER_FORMATS:
        raise InputError(f"servers store the state as {', '.join(SERVER_FORMATS)} only, not {text!r}")
    return name


__all__ = [
    "Arm",
    "DEFAULT_PREFILL_CHUNK",
    "REFERENCE_BITS",
    "SERVER_FORMATS",
    "SYNTAX",
    "parse_arm",
    "parse_arms",
    "server_format",
]
