"""The engine benchmark's arithmetic floor, for the 48B model or its first N layers, on any GPU.

The anchors are the full Kimi-Linear-48B (27 layers) on an H200: prompt tokens at 110k tok/s
(~2 x 3.5 GFLOP a token at the 790 TFLOP/s an 8192^3 bf16 product measured there) and a
large-batch decode step at ~22 ms (the ~95 GB it streams at the 4.30 TB/s a 4 GiB copy measured
there). A model cut to its first layers (a GPU that cannot hold 27) on another GPU scales each term
by the parameters it multiplies or streams against the full model's, and by the device's own
measured rate against the H200's; the full model on an H200 scales by 1 up to the rates' noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

FLOOR_PREFILL_TOK_S = 110_000
FLOOR_DECODE_STEP_S = 0.022
FLOOR_WAVE = 512
ANCHOR_GEMM_TFLOPS = 790.0
ANCHOR_COPY_TBPS = 4.30
FULL_LAYERS = 27


@dataclass(frozen=True)
class ParamShares:
    """Parameters a prompt token multiplies (routed experts at top-k of E) and parameters a
    large-batch decode step streams (every expert; not the embedding table, of which it gathers
    rows), each as a share of the full 27-layer model's."""

    active: float
    streamed: float


@dataclass(frozen=True)
class FloorScale:
    """A model's parameter shares and a device's measured rates: the anchors' prefill and decode
    terms scale by share x anchor rate / this rate."""

    shares: ParamShares
    gemm_tflops: float
    copy_tbps: float

    @classmethod
    def anchors(cls) -> FloorScale:
        return cls(ParamShares(1.0, 1.0), ANCHOR_GEMM_TFLOPS, ANCHOR_COPY_TBPS)

    @property
    def prefill(self) -> float:
        return self.shares.active * ANCHOR_GEMM_TFLOPS / self.gemm_tflops

    @property
    def decode(self) -> float:
        return self.shares.streamed * ANCHOR_COPY_TBPS / self.copy_tbps


def floor_seconds(n: int, mean_prompt: int, new_tokens: int, scale: FloorScale | None = None) -> float:
    """n prompts of mean_prompt tokens at the prefill rate, then ceil(n / 512) waves of new_tokens
    decode steps."""
    s = scale or FloorScale.anchors()
    prefill = n * mean_prompt / FLOOR_PREFILL_TOK_S * s.prefill
    decode = math.ceil(n / FLOOR_WAVE) * new_tokens * FLOOR_DECODE_STEP_S * s.decode
    return prefill + decode


def _counts(arch) -> tuple[float, float]:
    """(active, streamed) parameters of a Kimi-Linear architecture, counted on the meta device.
    The embedding table is in neither (a token gathers its row); the anchors' "3.5 B active"
    counted it, so the 27-layer model's active count here is ~3.1 B, and the shares use this count
    on both sides."""
    from evalkit.model.kimi import KimiLinearLM

    lm = KimiLinearLM(arch, torch.bfloat16, torch.device("meta"))
    routed = arch.num_experts_per_tok / arch.num_local_experts
    active = streamed = 0.0
    for name, p in lm.named_parameters():
        if name.split(".")[0] == "embed_tokens":
            continue
        n = float(p.numel())
        streamed += n
        is_routed = name.endswith(("mlp.w13", "mlp.w2"))
        active += n * routed if is_routed else n
    return active, streamed


def param_shares(num_layers: int) -> ParamShares:
    """The first num_layers layers of the 48B model against all 27."""
    from evalkit.model import kimi_linear_48b_config, parse_config

    part = _counts(parse_config(kimi_linear_48b_config(num_layers)))
    full = _counts(parse_config(kimi_linear_48b_config(FULL_LAYERS)))
    return ParamShares(active=part[0] / full[0], streamed=part[1] / full[1])


def measure_rates(device: torch.device) -> tuple[float, float]:
    """(bf16 TFLOP/s of an 8192^3 product, TB/s of a 4 GiB fp32 copy counting bytes read and
    written) on a GPU, medians of triton's do_bench: the anchors' own measurements."""
    from triton.testing import do_bench

    def gemm_tflops() -> float:
        a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
        b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
        ms = do_bench(lambda: a @ b, return_mode="median")
        return 2 * 8192**3 / (ms * 1e-3) / 1e12

    def copy_tbps() -> float:
        nbytes, ms = copy_ms(1 << 30, device, lambda fn: do_bench(fn, return_mode="median"))
        return nbytes / (ms * 1e-3) / 1e12

    rates = gemm_tflops(), copy_tbps()
    torch.cuda.empty_cache()
    return rates


def copy_ms(
    numel: int, device: torch.device | str, time_ms: Callable[[Callable[[], object]], float]
) -> tuple[int, float]:
    """(bytes moved, ms by `time_ms`) of copying `numel` fp32 values into a second buffer, counting
    the bytes read and written: the copy bandwidth that the floor's decode anchor and every decode
    kernel's "% of copy" are shares of, measured one way everywhere."""
    src = torch.empty(numel, device=device, dtype=torch.float32)
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src))
    return 2 * src.numel() * src.element_size(), ms
