"""The Mamba2 reference model's mixer while it trains: transformers' own NemotronH Mamba2 mixer
(its parameters, checkpoint names and cached prefill/decode unchanged) whose forward without a
cache (training steps, plain forwards) runs the SSD through a `mamba2_ssd` route. The rest of
that forward is transformers' torch path (mamba2.md §3): in_proj rows [z | xBC | dt], the causal
depthwise conv + SiLU, dt = softplus(dt + dt_bias) with no clamp (the config's limit is (0, inf)),
A = -exp(A_log), each head reading its group's B and C, y + D x in fp32, the gated group norm,
out_proj."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from evalkit.refmodel.mamba2_ssd import TORCH_NOTE, check_route, ssd_torch


def mixer_forward(m: Any, u: Any, ssd: Callable[..., Any]) -> Any:
    """One NemotronH Mamba2 mixer `m` on u [b, T, hidden] from a zero state, its scan through `ssd`."""
    import torch
    import torch.nn.functional as F

    b, T, _ = u.shape
    H, P, N, G = m.num_heads, m.head_dim, m.ssm_state_size, m.n_groups
    z, xbc, dt = m.in_proj(u).split([m.intermediate_size, m.conv_dim, H], dim=-1)
    xbc = m.act(m.conv1d(xbc.transpose(1, 2))[..., :T].transpose(1, 2))
    x, B, C = xbc.split([m.intermediate_size, G * N, G * N], dim=-1)
    x = x.reshape(b, T, H, P)
    B, C = (t.reshape(b, T, G, N).repeat_interleave(H // G, dim=2) for t in (B, C))
    dt = F.softplus(dt.float() + m.dt_bias.float())
    A = -torch.exp(m.A_log.float())
    y = ssd(x, dt, A, B, C) + m.D.float()[:, None] * x.float()
    g = m.norm(y.reshape(b, T, m.intermediate_size), z)
    return m.out_proj(g.to(u.dtype))


@functools.cache
def training_mixer_class() -> type:
    """transformers' NemotronHMamba2Mixer with the cache-free forward above (`ssd` per instance)."""
    from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMamba2Mixer

    class TrainingMamba2Mixer(NemotronHMamba2Mixer):
        ssd: Callable[..., Any] = staticmethod(ssd_torch)
        ssd_note: str = TORCH_NOTE

        def forward(self, hidden_states: Any, *args: Any, **kwargs: Any) -> Any:
            cache = kwargs.get("cache", kwargs.get("cache_params", args[0] if args else None))
            mask = kwargs.get("attention_mask", args[1] if len(args) > 1 else None)
            if cache is not None or (mask is not None and not bool(mask.all())):
                return super().forward(hidden_states, *args, **kwargs)  # cached or padded: transformers'
            return mixer_forward(self, hidden_states, self.ssd)

    return TrainingMamba2Mixer


def mixers(model: Any) -> list[Any]:
    from transformers.models.nemotron_h.modeling_nemotron_h import NemotronHMamba2Mixer

    return [m for m in model.modules() if isinstance(m, NemotronHMamba2Mixer)]


def use_route(model: Any, ssd: Callable[..., Any], note: str) -> int:
    """Make every Mamba2 mixer of `model` a training mixer scanning through `ssd`; returns how many."""
    cls = training_mixer_class()
    found = mixers(model)
    for m in found:
        m.__class__ = cls
        m.ssd, m.ssd_note = ssd, note
    return len(found)


def route_note(model: Any) -> str | None:
    """The scan route of `model`'s training mixers (None: not a Mamba2 reference model)."""
    notes = {getattr(m, "ssd_note", None) for m in mixers(model)}
    return notes.pop() if len(notes) == 1 else None


def verify_route(model: Any, device: Any) -> dict[str, Any] | None:
    """On a kernel route: `check_route` on `device` (bf16 on a GPU, as the training autocast; fp32
    elsewhere); a failing route is replaced by the torch one. Returns the check (None on the
    torch route: nothing to check)."""
    import torch

    ms = mixers(model)
    if not ms or ms[0].ssd_note == TORCH_NOTE:
        return None
    dtype = torch.bfloat16 if torch.device(device).type == "cuda" else torch.float32
    try:
        check = check_route(ms[0].ssd, device, dtype)
    except Exception as exc:  # noqa: BLE001 - a kernel that cannot run is a failed check
        check = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    check["route"] = ms[0].ssd_note
    if not check["ok"]:
        use_route(model, ssd_torch, TORCH_NOTE)
        check["fallback"] = TORCH_NOTE
    return check
