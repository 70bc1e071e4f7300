"""The Mamba2 reference model's scan while it trains: SSD (mamba2.md §3) in fp32 torch on the CPU,
through FLA's GLA chunk kernel on a GPU.

SSD per head is gated linear attention with one scalar decay per head (mamba2.md §8): query C,
key dt*B, value x, log-decay dt*A, scale 1, the state read after the update. FLA's scalar-gate
kernel (`chunk_simple_gla`) refuses its gated backward under Triton 3.4-3.7.0 on Hopper GPUs
(`chunk_bwd_dqkwg`, FLA #640), and the lent H200 has Triton 3.6; `chunk_gla` (a decay per key
channel, its own backward kernels) computes the same recurrence when every channel of a head gets
the head's decay, as the GDN twin trains through KDA's kernel (`gdn_on_kda`). The D skip, the gate
and the norm stay outside the scan. Before training on a GPU, `check_route` compares the kernel
route's outputs and gradients with the torch route in bf16 (the training autocast's dtype, so the
check compiles the kernels training uses); a route that disagrees is not used."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

TORCH_NOTE = "SSD in fp32 torch (chunked, autograd)"
GLA_NOTE = (
    "SSD via FLA chunk_gla with each head's decay repeated over its state channels "
    "(FLA's chunk_simple_gla backward refuses Triton < 3.7.1 on Hopper)"
)
CHUNK = 64  # the torch route's chunk: exp of a chunk's summed log-decay stays within fp32


def ssd_torch(x: torch.Tensor, dt: torch.Tensor, A: torch.Tensor, B: torch.Tensor, C: torch.Tensor) -> Any:
    """y_t = C_t . h_t with h_t = exp(dt_t A) h_{t-1} + dt_t x_t B_t^T, from a zero state, in fp32.
    x [b, T, H, P], dt [b, T, H] (after softplus), A [H] (negative), B and C [b, T, H, N]
    (already one per head); returns y [b, T, H, P] without the D skip."""
    import torch
    import torch.nn.functional as F

    b, T, H, P = x.shape
    Q = CHUNK
    pad = (-T) % Q
    xdt = x.float() * dt.float()[..., None]
    a = dt.float() * A.float()  # log-decay per token and head, <= 0
    B, C = B.float(), C.float()
    if pad:  # padded tokens have a = 0 and dt*x = 0: they change no state and are cut off
        xdt, B, C = (F.pad(t, (0, 0, 0, 0, 0, pad)) for t in (xdt, B, C))
        a = F.pad(a, (0, 0, 0, pad))
    nc = (T + pad) // Q
    xdt = xdt.view(b, nc, Q, H, P)
    B, C = B.view(b, nc, Q, H, -1), C.view(b, nc, Q, H, -1)
    cum = a.view(b, nc, Q, H).cumsum(2)  # [b, c, l, h]: log-decay from the chunk start
    causal = torch.ones(Q, Q, dtype=torch.bool, device=x.device).tril()
    seg = cum[:, :, :, None, :] - cum[:, :, None, :, :]  # [b, c, l, s, h]
    decay = torch.exp(seg.masked_fill(~causal[None, None, :, :, None], float("-inf")))
    scores = torch.einsum("bclhn,bcshn->bclsh", C, B) * decay
    y = torch.einsum("bclsh,bcshp->bclhp", scores, xdt)
    # each chunk's own contribution to the state at its end, then the states at chunk starts
    to_end = torch.exp(cum[:, :, -1:, :] - cum)
    chunk_states = torch.einsum("bclh,bclhn,bclhp->bchpn", to_end, B, xdt)
    chunk_decay = torch.exp(cum[:, :, -1, :])  # [b, c, h]
    h = x.new_zeros(b, H, P, B.shape[-1], dtype=torch.float32)
    starts = []
    for c in range(nc):
        starts.append(h)
        h = h * chunk_decay[:, c, :, None, None] + chunk_states[:, c]
    starts_t = torch.stack(starts, 1)  # [b, c, h, p, n]
    y = y + torch.einsum("bclhn,bchpn->bclhp", C, starts_t) * torch.exp(cum)[..., None]
    return y.reshape(b, nc * Q, H, P)[:, :T]


def ssd_via(chunk_gla: Callable[..., Any]) -> Callable[..., Any]:
    """`ssd_torch`'s drop-in that runs `chunk_gla` (FLA's signature: q, k, v, g [b, T, H, K], scale)."""

    def ssd_as_gla(x: Any, dt: Any, A: Any, B: Any, C: Any) -> Any:
        dtype = x.dtype
        g = (dt.float() * A.float())[..., None].expand(*dt.shape, B.shape[-1]).contiguous()
        k = (B.float() * dt.float()[..., None]).to(dtype)
        o, _ = chunk_gla(C.to(dtype).contiguous(), k.contiguous(), x.contiguous(), g, scale=1.0)
        return o.float()

    return ssd_as_gla


def kernel_route() -> tuple[Callable[..., Any], str] | None:
    """FLA's GLA route when a GPU and FLA are there, else None."""
    import torch

    if not torch.cuda.is_available():
        return None
    try:
        from fla.ops.gla import chunk_gla
    except ImportError:
        return None
    return ssd_via(chunk_gla), GLA_NOTE


def check_route(
    route: Callable[..., Any], device: Any, dtype: Any = None, T: int = 300, tol: float | None = None
) -> dict[str, Any]:
    """Outputs and input gradients of `route` against `ssd_torch` on random inputs of `dtype`
    (default fp32) on `device`, a few heads and a length across chunks: {"ok", "out_rel",
    "grad_rel", "dtype"} (max errors relative to the largest value; `tol` for the outputs, default
    2% in fp32, 5% in 16-bit, twice that for the gradients, whose decay gradient a kernel forms
    from differences: far below what a wrong kernel gives, above 16-bit rounding)."""
    import torch
    import torch.nn.functional as F

    dtype = dtype or torch.float32
    tol = tol if tol is not None else (2e-2 if dtype == torch.float32 else 5e-2)
    gen = torch.Generator(device="cpu").manual_seed(0)
    b, H, P, N = 2, 4, 64, 64

    def r(*shape: int, s: float = 1.0) -> torch.Tensor:
        return (s * torch.randn(*shape, generator=gen)).to(device, dtype).requires_grad_(True)

    x, B, C = r(b, T, H, P), r(b, T, H, N, s=0.3), r(b, T, H, N, s=0.3)
    dt_raw = (torch.randn(b, T, H, generator=gen)).to(device).requires_grad_(True)  # fp32, as training
    A = (-torch.rand(H, generator=gen) * 4 - 0.1).to(device)
    w = torch.randn(b, T, H, P, generator=gen).to(device)
    results = []
    for fn in (ssd_torch, route):
        dt = F.softplus(dt_raw - 2.0)
        y = fn(x, dt, A, B, C)
        grads = torch.autograd.grad((y * w).sum(), (x, B, C, dt_raw))
        results.append((y.detach().float(), [g.float() for g in grads]))
    (y0, g0), (y1, g1) = results

    def rel(a: torch.Tensor, b_: torch.Tensor) -> float:
        return float((a - b_).abs().max() / b_.abs().max().clamp_min(1e-12))

    out_rel = rel(y1, y0)
    grad_rel = max(rel(a, b_) for a, b_ in zip(g1, g0))
    ok = out_rel < tol and grad_rel < 2 * tol
    return {"ok": ok, "out_rel": out_rel, "grad_rel": grad_rel, "dtype": str(dtype).removeprefix("torch.")}
