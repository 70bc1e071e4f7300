"""Random inputs for tests, the twin check and benchmarks (fresh each call unless a generator is given).

The gate inputs are spread so that per-token decays range from ~1 (no forgetting) to strong
forgetting (exp(g) ~ 1e-3 per token), which exercises the chunked prefill's overflow guards."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class KdaInputs:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    g_raw: torch.Tensor
    beta_raw: torch.Tensor
    A_log: torch.Tensor
    dt_bias: torch.Tensor

    def args(self) -> tuple:
        return (self.q, self.k, self.v, self.g_raw, self.beta_raw, self.A_log, self.dt_bias)

    def rows(self, idx) -> KdaInputs:
        """The same layer parameters with a subset of token rows (e.g. one decode step)."""
        return KdaInputs(
            self.q[idx],
            self.k[idx],
            self.v[idx],
            self.g_raw[idx],
            self.beta_raw[idx],
            self.A_log,
            self.dt_bias,
        )


def kda_inputs(
    n: int, H: int, K: int, V: int, *, dtype=torch.float32, device="cpu",
    generator: torch.Generator | None = None, strong_decay: float = 0.2,
) -> KdaInputs:
    """n rows (tokens or sequences) of q/k/v/g_raw [n, H, K|V], beta_raw [n, H]; A_log [H], dt_bias [H*K].

    Drawn directly on `device` (pass a generator of that device for reproducibility).
    `strong_decay` is the fraction of channels whose gate input is pushed up (fast forgetting)."""
    f32 = dict(dtype=torch.float32, device=device, generator=generator)

    def rnd(*shape, scale=1.0):
        return torch.randn(*shape, **f32) * scale

    g_raw = rnd(n, H, K, scale=2.0) - 3.0 + (torch.rand(n, H, K, **f32) < strong_decay).float() * 6.0
    t = KdaInputs(
        q=rnd(n, H, K).to(dtype), k=rnd(n, H, K).to(dtype), v=rnd(n, H, V).to(dtype), g_raw=g_raw.to(dtype),
        beta_raw=rnd(n, H, scale=1.5).to(dtype),
        A_log=torch.log(torch.rand(H, **f32) * 3.0 + 0.5), dt_bias=rnd(H * K, scale=0.5),
    )  # fmt: skip
    return t


def random_pool(
    S: int,
    H: int,
    K: int,
    V: int,
    dtype: torch.dtype,
    *,
    device="cpu",
    generator: torch.Generator | None = None,
    scale: float = 0.5,
) -> torch.Tensor:
    """A state pool with random contents (as if earlier tokens had filled it), in `dtype`."""
    return (torch.randn(S, H, K, V, generator=generator, device=device) * scale).to(dtype)


def random_cu_seqlens(lengths: list[int], device="cpu") -> torch.Tensor:
    cu = [0]
    for n in lengths:
        cu.append(cu[-1] + n)
    return torch.tensor(cu, dtype=torch.int32, device=device)
