"""`KernelChoice`: every switch besides the arm's state format that changes the last bits of a run.

An `Arm` says how the recurrent state is stored; a `KernelChoice` says how everything around it is
computed. Both are part of a run's identity (the manifest records `KernelChoice.describe()` in full;
resume refuses a change of any field). Syntax (the CLI's `--kernels`; defaults left out):

    KEY=VALUE[,KEY=VALUE...]     e.g.  prefill_dots=bf16,weights=bf16

Keys (values, the default first):
- `kda_prefill` (stream, split): the Triton KDA prefill kernel by registered name
  (`kernels/kda_prefill/wrapper.PREFILL_VARIANTS`); "split" is the earlier variant with the same
  math in another order: a numerics floor (the same arm, other last bits).
- `ssd_prefill` (walk, split): the Triton Mamba2 SSD prefill (`kernels/ssd_prefill`): one
  sequential program per sequence, head and row block, or a sequential state pass and every
  block's output in parallel; the same products in the same order, bit-equal under the interpreter
  but not on an H100 (`results/ssd-prefill-split/`): a numerics floor.
- `prefill_dots` (fp32, bf16): the prefill's products with fp32 operands (tf32x3 on tensor cores,
  ~fp32 accuracy) or bf16 operands, the servers' numerics (FLA's chunk kernel); bf16 needs the
  Triton path (GPU).
- `moe_combine` (fused, torch): the MoE top-k combine on the GPU path, one Triton launch or torch's.
- `moe_decode` (triton, grouped_mm): the MoE experts' GEMMs of a decode step on the GPU path: the
  Triton kernel that streams each expert's weights once for its few rows (`kernels/moe_gemm`; 96-99%
  of copy bandwidth on an H100 where torch's reached 86-90%, results/bench/moe-decode-gemm/) or
  torch's grouped GEMM (`torch._grouped_mm`, what the prefill runs). Both are batch invariant.
- `fused_elementwise` (on, off): RMSNorm and SwiGLU in one Triton pass each on the GPU path.
- `mla_prefill` (auto, triton, flash, sdpa): the MLA prefill attention (auto: the Triton kernel for
  16-bit tensors on CUDA, SDPA elsewhere).
- `weights` (auto, fp32, bf16, fp16): the weight/activation dtype (auto: bf16 on the GPU, fp32 on
  the CPU).
- `tf32` (off, on): `torch.backends.cuda.matmul.allow_tf32` for the GEMMs on the GPU.

The CPU runs the torch forms whatever the GPU-path switches say (they are recorded all the same),
and refuses the switches of the Triton prefill kernels (`kda_prefill`, `ssd_prefill`, `prefill_dots`).
To mirror a server that runs FLA's kernels on a bf16 model: `--kernels prefill_dots=bf16` (the
GPU's `weights=auto` is bf16 already); keep the default to measure the state format alone.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from evalkit.errors import InputError

PREFILL_VARIANTS = ("stream", "split")  # the registered names of kernels/kda_prefill/wrapper.py
SSD_PREFILL_VARIANTS = ("walk", "split")  # kernels/ssd_prefill/wrapper.VARIANTS
PREFILL_DOTS = ("fp32", "bf16")
MOE_COMBINES = ("fused", "torch")
MOE_DECODES = ("triton", "grouped_mm")
MLA_PREFILLS = ("auto", "triton", "flash", "sdpa")
WEIGHT_DTYPES = ("auto", "fp32", "bf16", "fp16")
_ON_OFF = {"on": True, "off": False}
# prefill_dots -> the Triton kernel's dot precision
DOT_PRECISION = {"fp32": "tf32x3", "bf16": "bf16"}
SYNTAX = "KEY=VALUE[,KEY=VALUE], keys " + ", ".join(
    (
        "kda_prefill",
        "ssd_prefill",
        "prefill_dots",
        "moe_combine",
        "moe_decode",
        "fused_elementwise",
        "mla_prefill",
        "weights",
        "tf32",
    )
)
# what each environment variable fills (the CLI's default of --kernels only)
ENV_KEYS = {
    "EVALKIT_KDA_PREFILL": "kda_prefill",
    "EVALKIT_MOE_COMBINE": "moe_combine",
    "EVALKIT_MLA_PREFILL": "mla_prefill",
    "EVALKIT_FUSED_ELEMENTWISE": "fused_elementwise",
}
# switches recorded only since a later version: the value every run had before (a record without
# the key ran this, whatever today's default is)
BEFORE_RECORDED = {"moe_decode": "grouped_mm"}
_CHOICES: dict[str, tuple[str, ...]] = {
    "kda_prefill": PREFILL_VARIANTS,
    "ssd_prefill": SSD_PREFILL_VARIANTS,
    "prefill_dots": PREFILL_DOTS,
    "moe_combine": MOE_COMBINES,
    "moe_decode": MOE_DECODES,
    "mla_prefill": MLA_PREFILLS,
    "weights": WEIGHT_DTYPES,
}


@dataclass(frozen=True)
class KernelChoice:
    kda_prefill: str = "stream"
    ssd_prefill: str = "walk"
    prefill_dots: str = "fp32"
    moe_combine: str = "fused"
    moe_decode: str = "triton"
    fused_elementwise: bool = True
    mla_prefill: str = "auto"
    weights: str = "auto"
    tf32: bool = False

    def __post_init__(self) -> None:
        for key, allowed in _CHOICES.items():
            if getattr(self, key) not in allowed:
                raise InputError(
                    f"kernels: {key} must be one of {', '.join(allowed)}, got {getattr(self, key)!r}"
                )
        for key in ("fused_elementwise", "tf32"):
            if not isinstance(getattr(self, key), bool):
                raise InputError(f"kernels: {key} must be on or off, got {getattr(self, key)!r}")

    @property
    def label(self) -> str:
        """The non-default switches in `parse_kernels` syntax ("default" when there are none)."""
        default = KernelChoice()
        parts = [
            f"{f.name}={_text(getattr(self, f.name))}"
            for f in fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        ]
        return ",".join(parts) or "default"

    @property
    def dot_precision(self) -> str:
        """The Triton prefill kernel's `dot_precision`."""
        return DOT_PRECISION[self.prefill_dots]

    def weight_dtype(self, gpu: bool) -> str:
        """fp32 | bf16 | fp16: `weights`, with auto resolved for the device."""
        if self.weights != "auto":
            return self.weights
        return "bf16" if gpu else "fp32"

    def torch_weight_dtype(self) -> Any:
        """`weights` as a torch dtype to load the model in; None for auto (the loader's device default)."""
        if self.weights == "auto":
            return None
        import torch

        return {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[self.weights]

    def describe(self) -> dict[str, Any]:
        """The manifest's `kernels` record: every switch (all of them identity) and the label."""
        return {**asdict(self), "label": self.label}

    def __str__(self) -> str:
        return self.label


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _value(key: str, text: str) -> Any:
    if key in ("fused_elementwise", "tf32"):
        t = {"1": "on", "0": "off", "true": "on", "false": "off"}.get(text, text)
        if t not in _ON_OFF:
            raise InputError(f"kernels: {key} must be on or off, got {text!r}")
        return _ON_OFF[t]
    return text


def parse_kernels(text: str | KernelChoice | None, base: KernelChoice | None = None) -> KernelChoice:
    """'prefill_dots=bf16,weights=fp32' -> KernelChoice (keys not named keep `base`'s values, else
    the defaults); "" or "default" -> `base`; InputError (one line, says the syntax) otherwise."""
    if isinstance(text, KernelChoice):
        return text
    out = asdict(base or KernelChoice())
    raw = (text or "").strip()
    if raw in ("", "default"):
        return KernelChoice(**out)
    seen: set[str] = set()
    for part in raw.split(","):
        key, sep, value = part.strip().lower().partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in out or key in seen:
            raise InputError(f"kernels {raw!r}: bad switch {part.strip()!r}; syntax {SYNTAX}")
        seen.add(key)
        out[key] = _value(key, value.strip())
    return KernelChoice(**out)


def kernels_from_environment(environ: dict[str, str]) -> KernelChoice:
    """The switches the EVALKIT_* variables set (`ENV_KEYS`): the CLI's default of `--kernels`
    only; nothing else reads them."""
    parts = []
    for var, key in ENV_KEYS.items():
        value = environ.get(var)
        if value is None or not value.strip():
            continue
        try:
            parts.append(f"{key}={_text(_value(key, value.strip().lower()))}")
        except InputError as exc:
            raise InputError(f"${var}: {exc}") from None
    try:
        return parse_kernels(",".join(parts))
    except InputError as exc:
        raise InputError(f"{exc} (from {', '.join(v for v in ENV_KEYS if environ.get(v))})") from None


def differences(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """'key: A vs B' for each switch two `describe()` records disagree on, and the weights dtype
    that ran (`weights_dtype`) when both record it. A missing record counts as the defaults: what
    ran before the switches were recorded, unless an environment variable said otherwise; a switch
    recorded only since a later version counts as what ran before it (`BEFORE_RECORDED`)."""
    da, db = ({**KernelChoice().describe(), **BEFORE_RECORDED, **(x or {})} for x in (a, b))
    keys = [k for k in (*asdict(KernelChoice()), "weights_dtype") if k in da and k in db]
    return [f"{k}: {_text(da[k])} vs {_text(db[k])}" for k in keys if da[k] != db[k]]


__all__ = [
    "ENV_KEYS",
    "KernelChoice",
    "PREFILL_VARIANTS",
    "SYNTAX",
    "differences",
    "kernels_from_environment",
    "parse_kernels",
]
